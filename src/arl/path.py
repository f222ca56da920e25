"""The learning path (`arl path`): four stops, their chapters in reading order with each stop's key question,
which chapters have runs on this machine, and the learner questions each pointing to the chapter, the
experiment and the figure that answer it (`arl path --questions`, and docs/questions.md, its printout).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Stop:
    number: str
    title: str
    question: str
    """The key question of the stop (of a direction, for stop 04's three), as docs/index.md's path table has it."""
    chapters: tuple[str, ...]
    """Reading order; a chapter's control (`sft`, `jev-sft`, ...) is listed with the chapter it controls."""


STOPS = (
    Stop("01", "Understand a policy update",
         "How do log probabilities, importance ratios and advantages become a policy update, and what do dynamic "
         "sampling, clipping and a sequence-level objective change in it?",
         ("losses", "grpo", "sft", "dapo", "gspo")),
    Stop("02", "Turn teacher feedback into a learning signal",
         "How do a teacher's token-level scores on the student's own samples become a learning signal?",
         ("opd", "opd-specialist", "opsd")),
    Stop("03", "Let a model interact with the world",
         "How are multi-turn trajectories stored, how do observations enter the context, and how does training "
         "tell the model's actions from observations?",
         ("search-r1", "search-r1-sft", "retool", "retool-sft", "textworld", "textworld-sft")),
    Stop("04a", "Multimodal tool use",
         "How do images and tool outputs enter a training trajectory together?",
         ("vision-grpo", "vision-sft", "spec-o3", "spec-o3-sft")),
    Stop("04b", "Long-horizon learning and credit assignment",
         "Which segment or turn of a long trajectory should receive a learning signal?",
         ("tempo", "agent-opsd")),
    Stop("04c", "Fixed-option classification and decisions",
         "How can one forward pass produce candidate probabilities, and how do we check and calibrate confidence?",
         ("jev", "jev-sft")),
)


@dataclass(frozen=True)
class Question:
    text: str
    chapter: str
    command: str
    """The experiment that answers it."""
    figure: str
    """Where to look: a figure of the chapter's note (a .png path under docs/) or a part of the comparison's report."""
    expected: str
    """What the experiment shows on the mini preset (the note has the numbers)."""


QUESTIONS = (
    Question("Why are my PPO and importance-sampling runs identical?", "losses",
             "arl compare grpo --vary loss_fn=importance_sampling,ppo,cispo --seeds 3",
             "chapters/img/losses-replay-ratio.png",
             "With one update per batch on fresh samples the ratio is 1, the clip never acts, and the three losses "
             "give the same gradient; they part once the data is off-policy (minibatches > 1, the replay)."),
    Question("Why did my reward rise but held-out accuracy not?", "grpo",
             "arl compare grpo --vary learning_rate=0.0001,0.001 --seeds 3",
             "the comparison report's eval/accuracy and reward/mean curves (runs/compare/NAME/report.html)",
             "Training reward scores sampled answers (temperature 1) to the prompts being trained, held-out accuracy "
             "greedy answers to unseen ones; the GRPO note's learning-rate section shows the two moving apart."),
    Question("Would continued SFT on the same labels have done as well as RL?", "sft",
             "arl compare sft --set time_budget_s=SECONDS --vary plain_fraction=-1,0 --seeds 3",
             "the control's report beside the RL comparison's (runs/compare/grpo-sft)",
             "On a labelled task SFT on clean labels is at least as good for the same wall time; RL's edge is a "
             "checker the labels did not follow."),
    Question("Which of DAPO's four switches matters, and does it survive equal compute?", "dapo",
             "arl compare dapo --preset long --set algorithm=grpo --vary algorithm=grpo,dapo --vary overlong_cache=10 "
             "--seeds 3 --equal-compute completions",
             "chapters/img/dapo-long-mechanisms.png",
             "Each switch acts on one mechanism (truncation, entropy, empty groups); the note says which ones are "
             "resolved at equal steps and at equal completions."),
    Question("Does a sequence-level ratio change anything when the data is on-policy?", "gspo",
             "arl compare gspo --vary ratio_level=token,sequence --vary minibatches=1 --seeds 3",
             "chapters/img/gspo-eval.png",
             "Only with several minibatches per batch do token and sequence ratios differ."),
    Question("Is a teacher's per-token signal worth its cost against a reward?", "opd",
             "arl compare opd --set group_size=8 --vary signal=teacher,reward --seeds 3",
             "chapters/img/opd-eval.png",
             "The compute ledger counts the teacher's training and forward tokens next to the accuracy gain."),
    Question("Does the search tool help, or would the demonstrations alone do?", "search-r1",
             "arl compare search-r1-sft --set time_budget_s=SECONDS --seeds 3",
             "chapters/img/search-r1-show.png",
             "In the mini preset continued SFT for the RL runs' wall time ends above RL (EM 64.3 +/- 4.0 against "
             "42.3 +/- 4.4, 3 seeds each): here the reward adds nothing the demonstrations do not give faster."),
    Question("Which turns of a long episode get credit?", "agent-opsd",
             "arl compare agent-opsd --vary reshape_lambda=0.5,0 --vary credit_bound=1.0 --set eval_every=24 --seeds 3",
             "chapters/img/agent-opsd-opsd.png",
             "lambda = 0 is whole-trajectory GRPO credit; lambda > 0 reweights turns by the self-teacher's evidence. In "
             "the mini runs no arm's difference from another, or from the start, is resolved."),
    Question("When does a critic help?", "tempo",
             "arl compare tempo --vary algorithm=tempo,grpo --set steps=40 --set env_steps=1200 --seeds 3",
             "chapters/img/tempo-td.png",
             "TEMPO's critic gives credit per macro-step; in the mini runs, with a store that keeps renewing its "
             "states, TEMPO and whole-trajectory GRPO both end at 21.3% of the test games won at equal environment "
             "steps (GRPO - TEMPO +0.0 points [-5.0, +5.0]: not resolved, minimum detectable difference 6.9), TEMPO "
             "at about twice the training time; its critic, whose endpoint values alone give about half of the "
             "actor's untied groups, shows no information on held-out states."),
    Question("Does the image matter?", "vision-grpo",
             "arl compare vision-grpo --vary view=image,blank,text --seeds 3",
             "chapters/img/vision-grpo-prompts.png",
             "A blank image is the control: the gain over it is what the pixels carry; the facts as text bound it. "
             "Most of the gap is there before GRPO, whose own gain on the image arm is not resolved."),
    Question("Does the zoom tool help the model classify the spectra?", "spec-o3",
             "arl compare spec-o3 --vary tool=true,false --seeds 3",
             "chapters/img/spec-o3-trajectories.png",
             "At equal steps the tool arm ends about 22 macro-F1 points above the no-tool arm on the held-out "
             "spectra, but it also trains twice as long; equal wall time is not measured."),
    Question("Is my model's confidence right, and does one temperature fix it?", "jev",
             "arl compare jev --vary sft_steps=150,0 --seeds 3",
             "chapters/img/jev-reliability-test-seed1.png",
             "In distribution the trained model is already calibrated and the fitted temperature's effect is not "
             "resolved; under shift (hard) the model is overconfident and one temperature does not fix it."),
)


def local_runs(root: Path) -> dict[str, Counter]:
    """Per chapter: how many run folders under `root` (`run.json`), how many finished (`eval/summary.json`), and
    how many comparisons (`compare.json`)."""
    out: dict[str, Counter] = {}
    if not root.is_dir():
        return out
    for meta in root.rglob("run.json"):
        try:
            chapter = json.loads(meta.read_text(encoding="utf-8"))["chapter"]
        except (OSError, ValueError, KeyError):
            continue  # not a run folder's record
        counts = out.setdefault(chapter, Counter())
        counts["runs"] += 1
        counts["finished"] += (meta.parent / "eval" / "summary.json").is_file()
    for plan in root.rglob("compare.json"):
        try:
            chapter = json.loads(plan.read_text(encoding="utf-8"))["chapter"]
        except (OSError, ValueError, KeyError):
            continue
        out.setdefault(chapter, Counter())["comparisons"] += 1
    return out


def questions_text() -> str:
    """The learner questions for the terminal."""
    lines = []
    for q in QUESTIONS:
        where = f"docs/{q.figure}" if q.figure.endswith(".png") else q.figure
        lines += [q.text, f"   chapter   {q.chapter} (docs/chapters/{_note(q.chapter)}.md)", f"   run       {q.command}",
                  f"   look at   {where}", f"   expected  {q.expected}", ""]
    return "\n".join(lines)


def path_text(chapters: dict[str, tuple[str, str]], root: Path) -> str:
    """The path as a terminal table: each stop, its key question and its chapters, with their runs under `root`."""
    runs = local_runs(root)
    lines = []
    for stop in STOPS:
        lines += [f"{stop.number} · {stop.title}", f"   {stop.question}"]
        for name in stop.chapters:
            c = runs.get(name, Counter())
            done = (f"{c['finished']}/{c['runs']} runs finished, {c['comparisons']} comparison{'s' * (c['comparisons'] != 1)}"
                    if c else f"no runs yet: arl run {name} --preset smoke")
            lines.append(f"   {name:15} {done:52} {chapters[name][1].split(': ', 1)[-1][:60]}")
        lines.append("")
    lines.append(f"(runs found under {root}; `arl path --questions` enters through a question)")
    return "\n".join(lines)


def questions_markdown() -> str:
    """docs/questions.md: every learner question with the chapter, the experiment, the figure and what it shows."""
    lines = ["# Enter through a question", "",
             "Each question points to the chapter whose note answers it, the experiment that measures it (run",
             "`--preset smoke` first, then drop it for the mini preset), where to look, and what the mini preset shows.",
             "`arl path --questions` prints this page; `arl path` shows the path and which chapters have runs here.", ""]
    for q in QUESTIONS:
        lines += [f"## {q.text}", "", f"- Chapter: [{q.chapter}](chapters/{_note(q.chapter)}.md)",
                  f"- Experiment: `{q.command}`",
                  f"- Look at: ![{q.chapter}]({q.figure})" if q.figure.endswith(".png") else f"- Look at: {q.figure}",
                  f"- Expected: {q.expected}", ""]
    return "\n".join(lines)


def _note(chapter: str) -> str:
    """The note a chapter's questions are answered in (a control's is its chapter's)."""
    return {"sft": "grpo", "losses": "losses"}.get(chapter, chapter.removesuffix("-sft"))
