"""What each DAPO switch had to act on, per arm of a finished `arl compare dapo` folder: the share of
sampled answers cut at `max_tokens`, the policy's per-token entropy (the sampled tokens' -mean logprob),
the ratio's clip fractions and the overlong ramp's share, early and late in training; and a figure of the
entropy and truncation curves per arm (mean over seeds, smoothed).

    python scripts/dapo_mechanisms.py runs/compare/dapo-long [--png docs/chapters/img/dapo-long-mechanisms.png]
    python scripts/dapo_mechanisms.py runs/compare/gspo --metric gspo/seq_clip_frac --metric optim/grad_norm

Prints a markdown table (the DAPO and GSPO notes quote it): each value is the mean over the arm's seeds of
the metric's mean over the first or the last `--window` training steps. `--metric KEY` (repeatable) reads
any logged metric instead of DAPO's five; a key ending in `frac` is shown in %.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arl.track.compare import Arm  # noqa: E402
METRICS = (("rollout/truncated_frac", "truncated %", 100), ("rollout/entropy", "entropy (nats/token)", 1),
           ("ratio/clip_frac_low", "clipped low %", 100), ("ratio/clip_frac_high", "clipped high %", 100),
           ("reward/overlong_frac", "in the overlong ramp %", 100))


def arm_runs(folder: Path) -> dict[str, list[list[dict]]]:
    """Arm name -> the training-step rows of each finished seed (the comparison's results.json names the arms)."""
    res = json.loads((folder / "results.json").read_text())
    out = {}
    for arm in res["arms"]:
        runs = []
        for seed in arm["finished_seeds"]:
            metrics = folder / "runs" / res["chapter"] / f"{Arm(arm['name'], {}).slug}-seed{seed}" / "metrics.jsonl"
            rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
            runs.append([r for r in rows if "rollout/entropy" in r])
        out[arm["name"]] = runs
    return out


def window_mean(runs: list[list[dict]], key: str, late: bool, window: int) -> float | None:
    per_seed = []
    for rows in runs:
        part = rows[-window:] if late else rows[:window]
        values = [r[key] for r in part if key in r]
        if values:
            per_seed.append(sum(values) / len(values))
    return sum(per_seed) / len(per_seed) if per_seed else None


def metric_spec(key: str) -> tuple[str, str, int]:
    """(key, column label, scale) of a metric named on the command line: fractions are shown in %."""
    return (key, f"{key} %", 100) if key.endswith("frac") else (key, key, 1)


def table(arms: dict[str, list[list[dict]]], window: int, metrics=METRICS) -> str:
    head = ["arm"] + [f"{label}, first / last {window} steps" for _, label, _ in metrics]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for arm, runs in arms.items():
        cells = [arm]
        for key, _, scale in metrics:
            early, late = window_mean(runs, key, False, window), window_mean(runs, key, True, window)
            fmt = "{:.1f}" if scale == 100 else "{:.3f}"
            cells.append("-" if early is None else f"{fmt.format(scale * early)} / {fmt.format(scale * late)}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(arms: dict[str, list[list[dict]]], png: Path, smooth: int = 10) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from arl.atomic import write_bytes
    from arl.report.plots import moving_average, png_bytes

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.4))
    for arm, runs in arms.items():
        for ax, key in zip(axes, ("rollout/entropy", "rollout/truncated_frac")):
            n = min(len(rows) for rows in runs)
            y = np.mean([[r.get(key, np.nan) for r in rows[:n]] for rows in runs], axis=0)
            ax.plot(np.arange(1, n + 1), moving_average(y, smooth), label=arm, lw=1.4)
    axes[0].set(title="policy entropy (sampled tokens' -mean logprob)", xlabel="step", ylabel="nats / token")
    axes[1].set(title="answers cut at max_tokens", xlabel="step", ylabel="share of samples")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.suptitle(f"mean over seeds, moving average of {smooth} steps", fontsize=8)
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    write_bytes(png, png_bytes(fig))
    plt.close(fig)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path)
    p.add_argument("--window", type=int, default=10, help="training steps at the start and at the end that are averaged")
    p.add_argument("--png", type=Path, default=None, help="where to write the entropy and truncation curves")
    p.add_argument("--metric", action="append", default=None,
                   help="a logged metric to tabulate instead of DAPO's five (repeatable)")
    args = p.parse_args(argv)
    if not (args.folder / "results.json").is_file():
        print(f"dapo_mechanisms: {args.folder}/results.json: no such file; run the comparison first", file=sys.stderr)
        return 1
    arms = arm_runs(args.folder)
    print(table(arms, args.window, [metric_spec(k) for k in args.metric] if args.metric else METRICS))
    if args.png:
        plot(arms, args.png)
        print(f"\nfigure: {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
