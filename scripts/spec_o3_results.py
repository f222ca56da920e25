"""The numbers of docs/chapters/spec-o3.md, read from the two comparisons `make path04` writes: each
arm's macro-F1 and accuracy at its start (the cold start) and end, and the differences that matter,
paired by held-out question: GRPO's own change, the tool against no tool, GRPO against continued SFT
for the same wall time.

Accuracy differences: each question's difference averaged over the seeds, the questions bootstrapped.
Macro-F1 is not a mean over questions, so its differences are bootstrapped by resampling the questions
(the same resample for both arms, within each task) and recomputing both arms' macro-F1, averaged over
the seeds. Each interval is conditional on the arm's one cached cold start.

    .venv/bin/python scripts/spec_o3_results.py [--grpo runs/compare/spec-o3] [--sft runs/compare/spec-o3-sft]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from arl.eval.stats import bootstrap_ci, items_to_resolve, macro_f1

OTHER = {"YES": "NO", "NO": "YES"}


def evals(run: Path) -> tuple[dict, dict]:
    """(first, last) held-out evaluation of a run folder: the cold start and the end."""
    names = sorted((run / "eval").glob("step-*.json"))
    return json.loads(names[0].read_text()), json.loads(names[-1].read_text())


def answers(evaluation: dict) -> list[tuple[str, str, str | None, float]]:
    """(task, gold, prediction, correct) per question: the prediction is the gold when correct, the other
    label when answered wrongly, None when the episode ended without a readable answer."""
    out = []
    for it in evaluation["items"]:
        m = it["metrics"]
        correct, answered = m.get("correct", 0.0), m.get("answered", 0.0)  # an episode without an answer logs neither
        pred = it["answer"] if correct else (OTHER[it["answer"]] if answered else None)
        out.append((it["task"], it["answer"], pred, float(correct)))
    return out


def runs(folder: Path, prefix: str) -> list[Path]:
    return sorted(p for p in (folder / "runs").glob(f"*/{prefix}*") if (p / "eval" / "summary.json").is_file())


def f1_of(rows, index) -> float:
    picked = [rows[i] for i in index]
    return macro_f1([r[0] for r in picked], [r[1] for r in picked], [r[2] for r in picked])[0]


def paired(a_by_seed: list[list], b_by_seed: list[list], n_boot: int = 2000) -> str:
    """B - A in points, accuracy and macro-F1, paired by question (see the module's docstring)."""
    n = len(a_by_seed[0])
    diffs = [sum(b[i][3] - a[i][3] for a, b in zip(a_by_seed, b_by_seed)) / len(a_by_seed) for i in range(n)]
    mean, low, high = bootstrap_ci(diffs, n_boot=4000)
    need = items_to_resolve(diffs)
    accuracy = (f"accuracy {100 * mean:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"
                f" ({'not resolved' if low <= 0 <= high else 'resolved'}"
                f"{f'; about {need} questions for 80% power' if need and low <= 0 <= high else ''})")
    by_task: dict[str, list[int]] = {}
    for i, row in enumerate(a_by_seed[0]):
        by_task.setdefault(row[0], []).append(i)
    rng, full = random.Random(0), list(range(n))

    def delta(index) -> float:
        return sum(f1_of(b, index) - f1_of(a, index) for a, b in zip(a_by_seed, b_by_seed)) / len(a_by_seed)

    boots = sorted(delta([rng.choice(ix) for ix in by_task.values() for _ in ix]) for _ in range(n_boot))
    f_mean, f_low, f_high = delta(full), boots[int(0.025 * n_boot)], boots[int(0.975 * n_boot)]
    return (f"macro-F1 {100 * f_mean:+.1f} [{100 * f_low:+.1f}, {100 * f_high:+.1f}]"
            f" ({'not resolved' if f_low <= 0 <= f_high else 'resolved'}); {accuracy}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grpo", default="runs/compare/spec-o3")
    parser.add_argument("--sft", default="runs/compare/spec-o3-sft")
    args = parser.parse_args()
    arms = {"tool, GRPO": runs(Path(args.grpo), "tool-true-seed"), "no tool, GRPO": runs(Path(args.grpo), "tool-false-seed"),
            "tool, continued SFT": runs(Path(args.sft), "")}
    starts, ends = {}, {}
    print("| arm | seeds | macro-F1 start | macro-F1 end (seeds) | accuracy start | accuracy end | answered start -> end |")
    print("|---|---|---|---|---|---|---|")
    for arm, folders in arms.items():
        if not folders:
            print(f"| {arm} | 0 | (no finished runs) | | | | |")
            continue
        pairs = [evals(f) for f in folders]
        starts[arm], ends[arm] = [answers(s) for s, _ in pairs], [answers(e) for _, e in pairs]
        f1s = [100 * e["macro_f1"] for _, e in pairs]
        print(f"| {arm} | {len(folders)} | {100 * pairs[0][0]['macro_f1']:.1f} | {sum(f1s) / len(f1s):.1f} "
              f"({', '.join(f'{v:.1f}' for v in f1s)}) | {100 * pairs[0][0]['correct']:.1f} | "
              f"{100 * sum(e['correct'] for _, e in pairs) / len(pairs):.1f} | {100 * pairs[0][0]['answered']:.0f} -> "
              f"{100 * sum(e['answered'] for _, e in pairs) / len(pairs):.0f} |")
    print()
    for arm in ends:
        print(f"- {arm}, end - start: {paired(starts[arm], ends[arm])}")
    for a, b in (("tool, GRPO", "no tool, GRPO"), ("tool, continued SFT", "tool, GRPO")):
        if a in ends and b in ends:
            print(f"- {b} - {a}, at the end: {paired(ends[a], ends[b])}")


if __name__ == "__main__":
    main()
