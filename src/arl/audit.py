"""`arl audit RUN_DIR`: the learning path's four questions, answered from a run's own data.

1. Where does the reward come from, and can it be verified? The chapter's reward (or supervision) and its
   verifier's tests; from the run's rollouts, the rewards' values, the share of positive reward on samples
   that were correct against samples that were not (format and shaping), the highest-reward samples, and,
   where an independent check exists, how often it agrees with the reward.
2. Which tokens or turns carried gradient? The run's trained-token metric, and the rollouts' tokens by
   source (prompt, completion, template, observation or tool output, image), per turn for agents.
3. What did this run change? Its config against the chapter's nearest preset, or against a baseline run.
4. Which conclusions still need stronger controls? Seeds, a control arm, unequal compute, the size of the
   evaluation set, and settings changed from the preset while reading the test split.

The same four answers end every run's report.html (`add_to_report`, called by `arl run` when a run finishes).
"""

from __future__ import annotations

import html
import json
import math
import re
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from . import atomic
from .config import resolve
from .path import local_runs
from .rewards import any_format_reward
from .track import RunDir


@dataclass(frozen=True)
class Signal:
    """What a chapter trains on: its reward or supervision, the function that computes it, and the tests that check it."""

    what: str
    source: str
    tests: str
    control: str | None = None
    """The chapter whose runs are this chapter's control (continued SFT at equal wall time), if any."""


_BOXED = ("the last \\boxed{} equals the generated problem's answer: 1, else 0", "arl.rewards.boxed_reward",
          "tests/test_rewards.py (test_extract_boxed, test_boxed_reward, test_math_verify_decides_equivalent_forms)")
_GAMES = ("the game: 1 for winning, minus invalid_penalty per invalid command, quitting charged for the turns left",
          "arl.envs.textworld.TextWorldEnv", "tests/test_textworld.py")
_SUPERVISED = "no reward: token cross entropy on demonstrations"
SIGNALS = {
    "losses": Signal("one GRPO batch sampled from the cold start and scored by " + _BOXED[0] + "; replayed through "
                     "every loss for `replay_updates` importance-sampling updates on that batch", _BOXED[1], _BOXED[2]),
    "grpo": Signal(_BOXED[0], _BOXED[1], _BOXED[2], control="sft"),
    "dapo": Signal(_BOXED[0] + "; plus the overlong ramp when overlong_cache > 0",
                   "arl.rewards.boxed_reward + arl.rewards.overlong_penalty",
                   _BOXED[2] + ", tests/test_rewards.py::test_overlong_ramp_matches_its_formula_at_the_boundaries"),
    "gspo": Signal(*_BOXED),
    "sft": Signal(_SUPERVISED + " (the generator's worked solutions)", "arl.coldstart.sft_examples", "tests/test_recipes.py"),
    "opd": Signal("the teacher's per-token log-ratio on the student's samples (signal=teacher), or " + _BOXED[0]
                  + " (signal=reward)", "arl.distill + arl.rewards.boxed_reward", "tests/test_distill.py, " + _BOXED[2]),
    "opd-specialist": Signal("a specialist teacher's per-token log-ratio on the student's samples; the boxed "
                             "reward is logged", "arl.distill", "tests/test_distill.py"),
    "opsd": Signal("the start weights shown the reference solution, as a per-token teacher; the boxed reward is "
                   "logged", "arl.distill", "tests/test_distill.py::test_teacher_advantages_by_hand, "
                   "tests/test_recipes.py::test_opsd_teacher_weights_never_change", control="sft"),
    "search-r1": Signal("exact match of the Answer: line with a gold answer: 1, else 0; FORMAT_PENALTY for no "
                        "answer, an unreadable call or a spent budget", "arl.rewards.em.grade_answer",
                        "tests/test_em.py", control="search-r1-sft"),
    "retool": Signal(_BOXED[0] + "; FORMAT_PENALTY for no box, an unreadable call or a spent budget",
                     "arl.envs.retool (arl.rewards.boxed_reward)", "tests/test_retool.py", control="retool-sft"),
    "textworld": Signal(*_GAMES, control="textworld-sft"),
    "agent-opsd": Signal(_GAMES[0] + "; turns reweighted by the privileged self-teacher's evidence", _GAMES[1],
                         "tests/test_textworld.py, tests/test_self_teacher.py"),
    "tempo": Signal(_GAMES[0] + "; credit per macro-step from a TD critic", _GAMES[1], "tests/test_tempo.py"),
    "vision-grpo": Signal("the last boxed letter equals the figure question's answer: 1, else 0",
                          "arl.rewards.choice_reward", "tests/test_rewards.py::test_choice_reward_reads_the_last_boxed_letter",
                          control="vision-sft"),
    "spec-o3": Signal("the vetting answer's class against the spectrum's label, minus a fifth for a bad format",
                      "arl.rewards.vetting_reward", "tests/test_rewards.py::test_vetting_reward_is_correct_minus_a_fifth_for_bad_format",
                      control="spec-o3-sft"),
    "jev": Signal("no reward: cross entropy at each question's marker, the generator's label as the target",
                  "arl.decide.decision_datum", "tests/test_jev.py", control="jev-sft"),
    "search-r1-sft": Signal(_SUPERVISED + " (gold search episodes)", "arl.rl.search", "tests/test_recipes.py"),
    "retool-sft": Signal(_SUPERVISED + " (direct answers and tool calls)", "arl.rl.retool", "tests/test_recipes.py"),
    "textworld-sft": Signal(_SUPERVISED + " (the training games' walkthroughs)", "arl.rl.games", "tests/test_recipes.py"),
    "vision-sft": Signal(_SUPERVISED + " (the figures' answers)", "src/arl/recipes/vision_sft.py", "tests/test_recipes.py"),
    "spec-o3-sft": Signal(_SUPERVISED + " (tool-using vetting episodes)", "src/arl/recipes/spec_o3_sft.py", "tests/test_recipes.py"),
    "jev-sft": Signal(_SUPERVISED + " (the answers written out)", "arl.decide.written_example", "tests/test_jev.py"),
}
CORRECT_KEYS = ("correct", "em", "won")
"""Per-episode metrics that say whether the task was done, whatever the shaping added or took away."""
SOURCE_NAMES = {"P": "prompt", "A": "completion (policy)", "T": "template", "O": "observation / tool output"}
IGNORED = {"seed", "threads", "tracker", "start_seed"}
"""Config fields a diff leaves out: they change what is sampled or how fast, not what is compared."""


@dataclass
class Audit:
    reward: list[str]
    tokens: list[str]
    change: list[str]
    controls: list[str]

    def markdown(self, run: RunDir) -> str:
        parts = [f"# Audit of {run.path} ({run.chapter})", ""]
        for title, lines in zip(QUESTIONS, asdict(self).values()):
            parts += [f"## {title}", "", *lines, ""]
        return "\n".join(parts)

    def html(self) -> str:
        out = ['<section id="audit"><h2>The four questions</h2>']
        for title, lines in zip(QUESTIONS, asdict(self).values()):
            items = "".join(f"<li>{_inline(line.removeprefix('- '))}</li>" for line in lines)
            out.append(f"<h3>{html.escape(title)}</h3><ul>{items}</ul>")
        return "".join(out) + "</section>"


QUESTIONS = ("1. Where does the reward come from, and can it be verified?",
             "2. Which tokens or turns carried gradient?",
             "3. What did this run change?",
             "4. Which conclusions still need stronger controls?")


def audit(run: RunDir, recipe, baseline: RunDir | None = None) -> Audit:
    """The four answers for `run`; `recipe` is its chapter's module (its `Config` and `PRESETS`, which the CLI
    hands over: nothing below the recipes imports one)."""
    config = json.loads((run.path / "config.json").read_text(encoding="utf-8"))
    rollouts, metrics, plan = run.read_rollouts(), run.read_metrics(), _plan(run)
    return Audit(_reward(run, rollouts), _tokens(run, rollouts, metrics), _change(run, recipe, config, baseline, plan),
                 _controls(run, config, metrics, plan))


def add_to_report(run: RunDir, recipe) -> None:
    """Put the four answers at the end of the run's report.html (replacing an earlier audit section)."""
    if not run.report_file.is_file():
        return
    page = re.sub(r'<section id="audit">.*?</section>', "", run.report_file.read_text(encoding="utf-8"), flags=re.S)
    section = audit(run, recipe).html()
    page = page.replace("</body>", section + "</body>") if "</body>" in page else page + section
    atomic.write_bytes(run.report_file, page.encode("utf-8"))


# -- 1. the reward ------------------------------------------------------------------------------------

def _correct(r: dict) -> bool | None:
    """Whether a rollout did the task (its correct / em / won metric), None when it does not say."""
    for key in CORRECT_KEYS:
        if key in r.get("metrics", {}):
            return r["metrics"][key] > 0
    return None


def _text(r: dict) -> str:
    return r.get("completion") or " | ".join(t.get("text", "") for t in r.get("turns", []))


def _reward(run: RunDir, rollouts: list[dict]) -> list[str]:
    signal = SIGNALS.get(run.chapter)
    lines = [f"- Source: {signal.what} (`{signal.source}`); its checks: {signal.tests}." if signal
             else f"- Source: not listed for chapter {run.chapter!r} in `arl.audit.SIGNALS`."]
    scored = [r for r in rollouts if isinstance(r.get("reward"), (int, float))]
    if not scored:
        lines.append("- This run logged no scored samples (rollouts.jsonl): it trained on labels, not on a reward."
                     if signal and signal.what.startswith("no reward") else
                     "- This run logged no scored samples one by one (no rollouts.jsonl): its rewards are in its metrics "
                     "(`reward/`, `eval/`).")
        return lines
    values = Counter(round(float(r["reward"]), 3) for r in scored)
    lines.append(f"- {len(scored)} scored samples; reward values (value: count): "
                 + ", ".join(f"{v:g}: {n}" for v, n in sorted(values.items())) + ".")
    positive = [r for r in scored if r["reward"] > 0]
    total = sum(r["reward"] for r in positive)
    correct_flags = [_correct(r) for r in scored]
    if any(c is not None for c in correct_flags) and total > 0:
        on_correct = sum(r["reward"] for r in positive if _correct(r))
        lines.append(f"- Positive reward on samples that did the task: {on_correct / total:.1%}; on samples that did not "
                     f"(format or shaping): {1 - on_correct / total:.1%}.")
    math_rows = [r for r in scored if "completion" in r and "answer" in r]
    if math_rows:
        boxed = sum("\\boxed{" in r["completion"] for r in math_rows)
        independent = [any_format_reward(r["completion"], r["answer"]) > 0 for r in math_rows]
        agree = sum((r["reward"] > 0) == ok for r, ok in zip(math_rows, independent))
        lines.append(f"- Format: {boxed}/{len(math_rows)} samples put an answer in \\boxed{{}}; "
                     f"{sum(r['reward'] > 0 for r in math_rows)} were rewarded.")
        lines.append(f"- Independent check (the last number of the text against the answer, any format): agrees with "
                     f"the reward on {agree}/{len(math_rows)} samples; {sum(ok and r['reward'] <= 0 for r, ok in zip(math_rows, independent))} "
                     f"right in another format got no reward, {sum(not ok and r['reward'] > 0 for r, ok in zip(math_rows, independent))} "
                     "rewarded ones fail it.")
    else:
        lines.append("- Independent check: none for this task beyond the episode's own outcome metrics "
                     f"({', '.join(CORRECT_KEYS)}); read the highest-reward samples below.")
    for r in sorted(scored, key=lambda r: -r["reward"])[:3]:
        lines.append(f"- Highest reward {r['reward']:g} (step {r.get('step')}): `{_short(_text(r))}`")
    return lines


def _short(text: str, n: int = 110) -> str:
    text = " ".join(text.split()).replace("`", "'")
    return text if len(text) <= n else text[:n - 3] + "..."


# -- 2. the tokens ------------------------------------------------------------------------------------

def _metric_sum(metrics: list[dict], key: str) -> float | None:
    values = [m[key] for m in metrics if isinstance(m.get(key), (int, float))]
    return sum(values) if values else None


def _tokens(run: RunDir, rollouts: list[dict], metrics: list[dict]) -> list[str]:
    lines = []
    steps = sum(1 for m in metrics if m.get("step", 0) > 0 and any(k.startswith(("loss/", "train/")) for k in m))
    for key, what in (("train/tokens", "tokens trained"), ("train/masked_tokens", "tokens in the sequences with weight 0"),
                      ("train/datums", "datums (sequences) trained"), ("train/questions", "marker positions trained")):
        total = _metric_sum(metrics, key)
        if total is not None:
            lines.append(f"- {what} (`{key}`, summed over {steps} steps): {total:.0f}")
    if any(k.startswith("critic/") for m in metrics for k in m):
        lines.append("- `train/tokens` also counts the critic's value answers, trained in the same update and not "
                     "logged one by one: the episodes' policy tokens below are the rest.")
    if not rollouts:
        signal = SIGNALS.get(run.chapter)
        lines.append("- No rollouts logged: every trained position is a demonstration's or label's token, none was "
                     "sampled." if signal and signal.what.startswith("no reward") else
                     "- No rollouts.jsonl: this run's samples are not logged one by one; its metrics above count them.")
        return lines
    trained = [r for r in rollouts if r.get("advantage", 0.0) != 0.0]
    if "turns" in rollouts[0]:
        by_source: Counter = Counter()
        per_turn: dict[int, Counter] = {}
        images = 0
        for r in rollouts:
            by_source["P"] += len(r.get("prompt_tokens", []))
            for k, turn in enumerate(r["turns"]):
                counts = Counter(turn["source"])
                by_source.update(counts)
                images += len(turn.get("images", []))
                t = per_turn.setdefault(k + 1, Counter())
                t["A"] += counts["A"]
                t["O"] += counts["O"]
                t["trained"] += counts["A"] if r.get("advantage", 0.0) != 0.0 else 0
        lines.append(f"- The {len(rollouts)} logged episodes' tokens by source: "
                     + ", ".join(f"{SOURCE_NAMES.get(s, s)} {n}" for s, n in sorted(by_source.items()))
                     + f"; observation images: {images}. Only completion (policy) tokens can carry gradient.")
        lines.append("- Per turn (policy tokens / observation tokens / policy tokens of episodes with a non-zero advantage): "
                     + "; ".join(f"turn {k}: {c['A']} / {c['O']} / {c['trained']}" for k, c in sorted(per_turn.items())))
        lines.append(f"- Policy tokens of the {len(trained)} episodes with a non-zero advantage: "
                     f"{sum(t['source'].count('A') for r in trained for t in r['turns'])}")
    else:
        completion = sum(len(r.get("tokens", [])) for r in rollouts)
        lines.append(f"- The {len(rollouts)} logged samples: {completion} completion tokens (the prompt is context "
                     "with weight 0, `rl_datum`); images in the prompt are context too.")
        lines.append(f"- Completion tokens of the {len(trained)} samples with a non-zero advantage: "
                     f"{sum(len(r.get('tokens', [])) for r in trained)}")
    lines.append(f"- Token by token, coloured by source: `arl show {run.path}`")
    return lines


# -- 3. the change ------------------------------------------------------------------------------------

def _diff(a: dict, b: dict) -> list[str]:
    return [f"`{k}`: {b.get(k)!r} -> {a.get(k)!r}" for k in sorted(set(a) | set(b))
            if k not in IGNORED and a.get(k) != b.get(k)]


def _change(run: RunDir, recipe, config: dict, baseline: RunDir | None, plan: dict | None) -> list[str]:
    if baseline is not None:
        other = json.loads((baseline.path / "config.json").read_text(encoding="utf-8"))
        diff = _diff(config, other)
        return [f"- Against the baseline run {baseline.path}: " + ("; ".join(diff) if diff else "no field differs") + "."]
    diffs = {}
    for preset in recipe.PRESETS:
        try:
            diffs[preset] = _diff(config, asdict(resolve(recipe.Config, recipe.PRESETS, preset, {})))
        except (ValueError, TypeError):
            continue  # a preset that needs something this machine lacks (a model file) is not a candidate
    preset = min(diffs, key=lambda p: len(diffs[p]))
    lines = [f"- Nearest preset: `{preset}`; against it: " + ("; ".join(diffs[preset]) if diffs[preset] else
                                                              "no field differs (seeds and threads aside)") + "."]
    if plan is not None:
        arm = _arm(run, plan)
        lines.append(f"- In the comparison {plan['folder']}: arm `{arm}` of {len(plan['arms'])} "
                     f"({', '.join(a['name'] for a in plan['arms'])}), the varied field(s) are the arms' names.")
    return lines


# -- 4. the controls ----------------------------------------------------------------------------------

def _plan(run: RunDir) -> dict | None:
    for folder in run.path.parents:
        if (folder / "compare.json").is_file():
            plan = json.loads((folder / "compare.json").read_text(encoding="utf-8"))
            return {**plan, "folder": str(folder)}
    return None


def _arm(run: RunDir, plan: dict) -> str | None:
    slugs = {a["name"]: re.sub(r"[^A-Za-z0-9_.]+", "-", a["name"]) for a in plan["arms"]}
    matches = [name for name, slug in slugs.items() if run.name.startswith(slug + "-seed")]
    return max(matches, key=len) if matches else None


def _eval_size(run: RunDir) -> tuple[int, float] | None:
    """(items, accuracy-like mean) of the last step evaluation that lists its items."""
    for name in sorted((n for n in run.eval_names() if n.startswith("step-")), reverse=True):
        e = run.read_eval(name)
        items = e.get("items")
        if items:
            values = [float(i.get("reward", i.get("metrics", {}).get("won", 0.0)) > 0) for i in items]
            return len(items), sum(values) / len(values)
    return None


def _controls(run: RunDir, config: dict, metrics: list[dict], plan: dict | None) -> list[str]:
    lines = []
    if plan is None:
        lines.append(f"- One seed and no comparison: the run alone cannot separate an effect from noise; "
                     f"`arl compare {run.chapter} --vary FIELD=A,B --seeds 3`.")
        root = run.path.parent.parent
    else:
        seeds = plan["seeds"]
        lines.append(f"- Seeds: {len(seeds)} ({', '.join(map(str, seeds))}) in {plan['folder']}"
                     + ("; one seed cannot give an interval." if len(seeds) < 2 else "; the report's intervals resample them."))
        root = Path(plan["folder"]).parent.parent
        results = Path(plan["folder"]) / "results.json"
        if results.is_file():
            arm = _arm(run, plan)
            warnings = [w for w in json.loads(results.read_text(encoding="utf-8")).get("ledger_warnings", [])
                        if arm and w.startswith(arm + " ")]
            lines += [f"- Unequal compute: {w}" for w in warnings] or ["- Compute: the ledger flags no difference over "
                                                                       "10% between this arm and its partner."]
        else:
            lines.append("- Compute: the comparison has no results.json yet (its report compares the ledger).")
    signal = SIGNALS.get(run.chapter)
    if signal and signal.control:
        found = local_runs(root).get(signal.control, Counter())
        seconds = _metric_sum(metrics, "time/step")
        budget = f"time_budget_s={seconds:.0f}" if seconds else "time_budget_s=SECONDS"
        lines.append(f"- Control `{signal.control}` (continued SFT for the same wall time; this run's training steps took "
                     + (f"{seconds:.0f} s" if seconds else "an unlogged time") + "): "
                     + (f"{found['finished']} finished run{'s' * (found['finished'] != 1)} of it under {root}; one counts "
                        f"as the control when its `{budget}`." if found.get("finished") else
                        f"none under {root}; `arl compare {signal.control} --set {budget} --seeds 3`."))
    elif signal:
        lines.append("- Control: this chapter's control is an arm of its own comparison (see the chapter's note).")
    size = _eval_size(run)
    if size:
        n, p = size
        z = 1.96  # Wilson's interval: still honest at 0% or 100%, where the normal one has zero width
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        lines.append(f"- Held-out items: {n}; at {p:.1%} the 95% (Wilson) half-width is {half:.1%}, so a difference "
                     f"between two runs under about {math.sqrt(2) * half:.1%} is within item noise alone.")
    else:
        lines.append("- Held-out items: this run's evaluation lists no items (see eval/summary.json for its size).")
    split = config.get("eval_split")
    if split == "test":
        lines.append("- Split: evaluated on test. A setting changed from the preset (question 3) because of these "
                     "numbers is tuned on test: choose it on dev (`eval_split=dev`), then read test once.")
    elif split:
        lines.append(f"- Split: evaluated on {split}: a choice made here is read once on test afterwards.")
    else:
        lines.append("- Split: this chapter's config has no eval_split switch; its held-out splits are fixed.")
    return lines


def _inline(text: str) -> str:
    """Markdown `code` spans to <code>, everything else escaped."""
    parts = text.split("`")
    return "".join(f"<code>{html.escape(p)}</code>" if i % 2 else html.escape(p) for i, p in enumerate(parts))
