"""One readable file per chapter: a `Config` dataclass, `PRESETS` and `main(cfg, run, resume)`; a
policy-update chapter also has `same_update(cfg_a, cfg_b)`, which `arl compare` uses to say when two
arms make the same update.

Recipes import the library, never each other; the library never imports a recipe (the CLI hands a
recipe's pieces to the code that needs them).
"""

from __future__ import annotations

import importlib

CHAPTERS = {
    "losses": ("arl.recipes.losses", "01 Loss functions: objectives against the ratio, and one GRPO batch replayed through each loss"),
    "grpo": ("arl.recipes.grpo", "01 GRPO: group-relative policy optimisation on mini arithmetic word problems"),
    "dapo": ("arl.recipes.dapo", "01 DAPO: clip-higher, dynamic sampling, token-level loss, overlong shaping (presets grpo/dapo)"),
    "gspo": ("arl.recipes.gspo", "01 GSPO: sequence-level importance ratio and clipping"),
    "opd": ("arl.recipes.opd", "02 General OPD: a teacher's logprobs on the student's own samples as per-token advantages"),
    "opd-specialist": ("arl.recipes.opd_specialist", "02 Specialist vs general: SFT, OPD, staged SAR-OPD and interleaved IDT-OPD, each also from the SFT model, on two domains"),
    "opsd": ("arl.recipes.opsd", "02 OPSD: self-distillation from the start weights shown the reference solution"),
    "search-r1": ("arl.recipes.search_r1", "03 Search-R1: multi-turn GRPO for a policy that searches a local BM25 index before it answers"),
    "retool": ("arl.recipes.retool", "03 ReTool: multi-turn GRPO for a policy that learns when to run Python in a sandbox"),
    "textworld": ("arl.recipes.textworld", "03 TextWorld agent: multi-turn GRPO that wins small generated text games with an act(command) tool"),
    "agent-opsd": ("arl.recipes.agent_opsd", "04 AgentOPSD: turn-level credit from a privileged self-teacher on long-horizon TextWorld games"),
    "tempo": ("arl.recipes.tempo", "04 TEMPO: temporal-difference credit for long text games: macro-steps of H turns, a critic from the policy's own weights, a state store"),
    "vision-grpo": ("arl.recipes.vision_grpo", "04 Vision GRPO: GRPO on 4-choice questions about rendered figures, the image inside the prompt (controls: a blank image, the facts as text)"),
    "spec-o3": ("arl.recipes.spec_o3", "04 Spec-o3: vet a spectrum image for a rare class, zooming with a tool that returns images; SFT on demonstrations, then multi-turn GRPO (control: no tool)"),
    "spec-o3-sft": ("arl.recipes.spec_o3_sft", "04 Spec-o3's control: continued SFT on the tool-using demonstrations for the same wall time"),
    "jev": ("arl.recipes.jev", "04 Jev: fixed-option decisions from one forward pass, with calibrated confidence"),
    "jev-sft": ("arl.recipes.jev_sft", "04 Jev's control: continued SFT on the answers written out, read as written, for the same wall time"),
    "sft": ("arl.recipes.sft", "01 GRPO's (and OPSD's) control: continued SFT from the same cold start for the same wall time"),
    "search-r1-sft": ("arl.recipes.search_r1_sft", "03 Search-R1's control: continued SFT on the gold search demonstrations for the same wall time"),
    "retool-sft": ("arl.recipes.retool_sft", "03 ReTool's control: continued SFT on the cold start's direct and tool-call demonstrations for the same wall time"),
    "textworld-sft": ("arl.recipes.textworld_sft", "03 TextWorld's control: continued SFT on the training games' walkthroughs for the same wall time"),
    "vision-sft": ("arl.recipes.vision_sft", "04 Vision GRPO's control: continued SFT on the figures, in the same view, for the same wall time"),
}

NEEDS = {
    "search-r1": ("search",),
    "search-r1-sft": ("search",),
    "retool": ("linux",),
    "retool-sft": ("linux",),
    "textworld": ("textworld",),
    "textworld-sft": ("textworld",),
    "agent-opsd": ("textworld",),
    "tempo": ("textworld",),
}
"""What a chapter needs beyond `pip install agentic-rl-lab`: extras of pyproject.toml, or "linux" (the
retool sandbox); `arl.extras` checks them before a run folder is made."""


def check_needs(chapter: str) -> None:
    """`arl.extras.MissingExtra` (one line naming the extra to install) for the first thing `chapter` needs
    that this installation lacks."""
    from .. import extras

    extras.check(NEEDS.get(chapter, ()), f"the {chapter} chapter")


def load(chapter: str):
    if chapter not in CHAPTERS:
        raise ValueError(f"unknown chapter {chapter!r}; `arl list` shows them: {', '.join(CHAPTERS)}")
    return importlib.import_module(CHAPTERS[chapter][0])
