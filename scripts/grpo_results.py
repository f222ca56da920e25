"""Regenerate the results of docs/chapters/grpo.md: GRPO `mini` for each loss function and seed, the
SFT control for the same wall time, and the learning-rate sensitivity. Runs one after another (on 2
cores a second busy process slows both), each in its own process, so each reports its own peak memory.

    .venv/bin/python scripts/grpo_results.py [--seeds 0 1 2] [--out runs/grpo-results]

Writes `results.json` and `results.md` (the tables the chapter note quotes) under --out; runs that
already finished there are read back instead of rerun, so an interrupted regeneration resumes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

LOSSES = ("importance_sampling", "ppo", "cispo")


def run(out: Path, chapter: str, name: str, *overrides: str) -> dict:
    """`arl run CHAPTER --preset mini` once (skipped if its summary exists); its eval summary and metrics."""
    folder = out / chapter / name
    summary = folder / "eval" / "summary.json"
    if not summary.is_file():
        if folder.exists():
            cmd = [sys.executable, "-m", "arl.cli", "run", chapter, "--resume", str(folder)]
        else:
            cmd = [sys.executable, "-m", "arl.cli", "run", chapter, "--preset", "mini", "--out", str(out),
                   "--name", name, *overrides]
        print("$", " ".join(cmd[2:]), flush=True)
        subprocess.run(cmd, check=True)
    metrics = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
    result = json.loads(summary.read_text())
    result["train_s"] = sum(m.get("time/step", 0.0) for m in metrics) if chapter == "grpo" else result["trained_s"]
    result["curve"] = [(m["step"], m["eval/accuracy"]) for m in metrics if "eval/accuracy" in m]
    return result


def mean_sd(xs: list[float]) -> str:
    return f"{100 * statistics.mean(xs):.1f} ± {100 * statistics.stdev(xs):.1f}" if len(xs) > 1 else f"{100 * xs[0]:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", type=Path, default=Path("runs/grpo-results"))
    ap.add_argument("--lr-factor", type=float, default=10.0, help="the sensitivity run's learning rate, x the mini one")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from arl.recipes import grpo

    base_lr = grpo.Config().learning_rate
    results: dict = {"grpo": {}, "sft": {}, "lr": {}, "start": {}}
    for loss in LOSSES:
        for seed in args.seeds:
            results["grpo"][f"{loss}/seed{seed}"] = run(args.out, "grpo", f"{loss}-seed{seed}", f"loss_fn={loss}", f"seed={seed}")
    budget = statistics.mean(r["train_s"] for r in results["grpo"].values())
    for labels in ("same", "clean"):
        plain = "-1" if labels == "same" else "0"
        results["sft"][labels] = run(args.out, "sft", f"sft-{labels}-labels", f"time_budget_s={budget:.0f}",
                                     f"plain_fraction={plain}")
    for factor in (args.lr_factor,):
        lr = base_lr * factor
        results["lr"][f"x{factor:g}"] = run(args.out, "grpo", f"lr-x{factor:g}", f"learning_rate={lr:g}")

    # the same RL from a cold start whose labels all box the answer: what RL adds beyond the format
    results["start"]["all boxed"] = run(args.out, "grpo", "all-boxed-cold-start", "sft_plain_fraction=0")

    mini = results["grpo"][f"importance_sampling/seed{args.seeds[0]}"]
    rows = ["| loss_fn | seeds | held-out before | after | change (points) | train time (s) | peak RSS (MB) |",
            "|---|---|---|---|---|---|---|"]
    for loss in LOSSES:
        rs = [results["grpo"][f"{loss}/seed{s}"] for s in args.seeds]
        rows.append(f"| {loss} | {len(rs)} | {mean_sd([r['before'] for r in rs])} | {mean_sd([r['after'] for r in rs])} "
                    f"| {mean_sd([r['after'] - r['before'] for r in rs])} | {statistics.mean(r['train_s'] for r in rs):.0f} "
                    f"| {max(r['peak_rss_mb'] for r in rs):.0f} |")
    rows += ["", "| control (same wall time) | held-out before | after | change (points) | boxed after "
             "| any-format after | SFT steps |", "|---|---|---|---|---|---|---|"]
    for labels, r in results["sft"].items():
        rows.append(f"| continued SFT, {labels} labels | {100 * r['before']:.1f} | {100 * r['after']:.1f} "
                    f"| {100 * (r['after'] - r['before']):+.1f} | {100 * r['format_rate/after']:.0f}% "
                    f"| {100 * r['accuracy_any_format/after']:.1f} | {r['steps']} |")
    rows += ["", "| cold start (importance_sampling, seed 0) | held-out before | after | boxed before / after "
             "| any-format before / after |", "|---|---|---|---|---|"]
    for label, r in [("70% plain labels (mini)", mini)] + list(results["start"].items()):
        rows.append(f"| {label} | {100 * r['before']:.1f} | {100 * r['after']:.1f} "
                    f"| {100 * r['format_rate/before']:.0f}% / {100 * r['format_rate/after']:.0f}% "
                    f"| {100 * r['accuracy_any_format/before']:.1f} / {100 * r['accuracy_any_format/after']:.1f} |")
    rows += ["", "| learning rate | held-out accuracy over training (step: %) |", "|---|---|"]
    for label, r in [(f"{base_lr:g} (mini)", mini)] + [(f"{base_lr * float(k[1:]):g} ({k})", r) for k, r in results["lr"].items()]:
        rows.append(f"| {label} | {', '.join(f'{s}: {100 * a:.1f}' for s, a in r['curve'])} |")
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    (args.out / "results.md").write_text("\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
