"""The item-paired numbers of docs/chapters/vision-grpo.md, read from the two comparisons `make path04`
writes: how much each arm moved from its cold start, and GRPO against continued SFT for the same
training time, each paired by held-out figure (item i's difference averaged over the seeds, the 200
figures bootstrapped), with how many figures a difference of that size would need at 80% power.

    .venv/bin/python scripts/vision_grpo_results.py [--grpo runs/compare/vision-grpo] [--sft runs/compare/vision-sft]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from arl.eval.stats import bootstrap_ci, items_to_resolve


def evals(run: Path) -> tuple[dict, dict]:
    """(first, last) held-out evaluation of a run folder: the cold start and the end."""
    names = sorted((run / "eval").glob("step-*.json"))
    return json.loads(names[0].read_text()), json.loads(names[-1].read_text())


def rewards(evaluation: dict, kind: str | None = None) -> dict[str, float]:
    return {it["id"]: it["reward"] for it in evaluation["items"] if kind is None or it["kind"] == kind}


def paired(a_by_seed: list[dict[str, float]], b_by_seed: list[dict[str, float]]) -> str:
    """B - A in points: item-paired bootstrap over the figures, each figure's difference averaged over seeds."""
    ids = sorted(a_by_seed[0])
    diffs = [sum(b[i] - a[i] for a, b in zip(a_by_seed, b_by_seed)) / len(a_by_seed) for i in ids]
    mean, low, high = bootstrap_ci(diffs, n_boot=4000)
    verdict = "not resolved" if low <= 0 <= high else "resolved"
    need = items_to_resolve(diffs)
    return (f"{100 * mean:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}] ({verdict}; "
            f"{f'about {need} figures for 80% power' if need else 'no mean change to size a test for'})")


def runs(folder: Path, prefix: str) -> list[Path]:
    return sorted(p for p in (folder / "runs").glob(f"*/{prefix}*") if (p / "eval" / "summary.json").is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grpo", default="runs/compare/vision-grpo")
    parser.add_argument("--sft", default="runs/compare/vision-sft")
    args = parser.parse_args()
    arms = {view: runs(Path(args.grpo), f"view-{view}-seed") for view in ("image", "blank", "text")}
    arms["continued SFT (image)"] = runs(Path(args.sft), "")
    print("| arm | seeds | kind | start (%) | end, mean of seeds (%) | end - start, points [95% CI] |")
    print("|---|---|---|---|---|---|")
    for name, folders in arms.items():
        if not folders:
            continue
        pairs = [evals(f) for f in folders]
        for kind in (None, "area", "count"):
            starts = [rewards(first, kind) for first, _ in pairs]
            ends = [rewards(last, kind) for _, last in pairs]
            start = 100 * sum(starts[0].values()) / len(starts[0])
            end = 100 * sum(sum(e.values()) / len(e) for e in ends) / len(ends)
            print(f"| {name} | {len(folders)} | {kind or 'all'} | {start:.1f} | {end:.1f} | {paired(starts, ends)} |")
    grpo, sft = arms["image"], arms["continued SFT (image)"]
    if grpo and sft:
        n = min(len(grpo), len(sft))
        for kind in (None, "area", "count"):
            print(f"\nGRPO (image) - continued SFT, {kind or 'all'} figures, seeds paired by index ({n}): "
                  + paired([rewards(evals(f)[1], kind) for f in sft[:n]], [rewards(evals(f)[1], kind) for f in grpo[:n]]))


if __name__ == "__main__":
    main()
