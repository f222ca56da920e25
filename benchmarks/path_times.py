"""How long each chapter comparison took, and how much of it was training: the timing table of the path targets.

    python benchmarks/path_times.py [runs/compare/NAME ...] [--json]

For every comparison folder (default: each one under runs/compare/ that has a results.json), each run's
time is read from its own folder: from its config.json (written when the run starts) to the newest
file it wrote (its report, its last evaluation), so the table can be made after the fact, for
comparisons run by any command (`make path01` ... `path04`, or two lanes by hand). `runs` is the sum
over its runs: the comparison's wall time when it ran one run at a time (`--jobs 1`), more than its
wall time when runs overlapped. `training` is the sum of each run's training-step time from the
comparison's own results.json (what the compute ledger averages); the rest is cold starts not yet
cached, evaluations, checkpoints and reports. A run that was killed and resumed counts the pause too; a run
more than 1.5x its arm's median (a resume, or a cold start trained inside it) is marked.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

RESUMED = 1.5  # a run this many times longer than the median run of its arm is marked as possibly resumed


def run_seconds(run: Path) -> float | None:
    """From config.json to the newest file the run wrote; None for a run that never started."""
    config = run / "config.json"
    if not config.exists():
        return None
    newest = max(p.stat().st_mtime for p in run.rglob("*") if p.is_file())
    return newest - config.stat().st_mtime


def comparison_times(folder: Path) -> dict:
    results = json.loads((folder / "results.json").read_text())
    by_arm: dict[str, list[float]] = {}
    for run in sorted(p for p in (folder / "runs").glob("*/*") if p.is_dir()):
        seconds = run_seconds(run)
        if seconds is not None:
            by_arm.setdefault(run.name.rsplit("-seed", 1)[0], []).append(seconds)
    seconds = [s for arm in by_arm.values() for s in arm]
    training = sum(v for per_seed in results.get("train_seconds", {}).values() for v in per_seed.values())
    resumed = any(s > RESUMED * sorted(arm)[len(arm) // 2] for arm in by_arm.values() if len(arm) > 2 for s in arm)
    return {"comparison": folder.name, "runs": len(seconds), "run_s": sum(seconds), "training_s": training,
            "resumed": resumed}


def table(rows: list[dict]) -> str:
    out = ["| comparison | runs | time of its runs (min) | of which training steps (min) | training share |",
           "|---|---|---|---|---|"]
    for r in rows:
        share = f"{r['training_s'] / r['run_s']:.0%}" if r["run_s"] else "-"
        mark = " (a long run: a cold start trained in it, or a resume)" if r["resumed"] else ""
        out.append(f"| {r['comparison']}{mark} | {r['runs']} | {r['run_s'] / 60:.1f} | {r['training_s'] / 60:.1f} "
                   f"| {share} |")
    total = sum(r["run_s"] for r in rows)
    out.append(f"| all | {sum(r['runs'] for r in rows)} | {total / 60:.1f} | "
               f"{sum(r['training_s'] for r in rows) / 60:.1f} | - |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", type=Path, help="comparison folders (default: runs/compare/*)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON instead of a markdown table")
    args = ap.parse_args(argv)
    folders = args.folders or sorted(p for p in Path("runs/compare").glob("*") if (p / "results.json").exists())
    missing = [str(f) for f in folders if not (f / "results.json").exists()]
    if missing:
        print(f"not a finished comparison (no results.json): {', '.join(missing)}; run `arl compare` to its end "
              "first", file=sys.stderr)
        return 2
    rows = [comparison_times(f) for f in folders]
    print(json.dumps(rows, indent=1) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
