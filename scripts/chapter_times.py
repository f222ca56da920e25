"""Measure every chapter's smoke and mini wall time and write them into the chapter table of Getting Started
(between its `<!-- chapter-times:begin -->` and `<!-- chapter-times:end -->` markers).

    python scripts/chapter_times.py [--chapters C ...] [--runs runs] [--no-smoke] [--doc docs/getting-started.md]

Smoke: `arl run CHAPTER --preset smoke` in a temporary folder, one chapter at a time, with ARL_NUM_THREADS=1;
the wall time of the whole command (start-up, cold start and evaluations included; models and cold starts
already cached under ARL_HOME are reused, as in any second run). Run it on a machine with nothing else busy.

Mini: read, never run, from the finished runs under --runs: a run folder (its run.json names the chapter, its
eval/summary.json is written) whose config.json is the chapter's mini preset (seed, start_seed, threads and
tracker aside), `arl run CHAPTER --preset mini` as it is, alone or as an arm of `arl compare`. A run's time is
its compute ledger's wall time (`arl.report.compare.ledger_of`: the sum of its logged `time/step`, the training
steps only); a chapter that logs no step time (losses) is timed by its folder, from config.json to
eval/summary.json (its cold start included when that run trained it). The cell gives the median over the runs found.

A chapter whose smoke run is not measured this time, or that has no finished mini run under --runs, keeps the
value the table had; a value that is missing is written as "not measured yet".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arl import atomic  # noqa: E402
from arl.recipes import CHAPTERS, NEEDS  # noqa: E402

BEGIN, END = "<!-- chapter-times:begin -->", "<!-- chapter-times:end -->"
MISSING = "not measured yet"
IGNORED = ("seed", "start_seed", "threads", "tracker")
"""Config fields in which a run may differ from the mini preset and still count as a mini run: they change
neither the work a run does nor its size."""
NEEDS_TEXT = {"search": "`search` extra", "textworld": "`textworld` extra (Linux, macOS)",
              "linux": "Linux (the sandbox)"}
HEADER = ("| chapter | what | needs beyond `pip install agentic-rl-lab` | smoke | mini |\n"
          "|---|---|---|---|---|")


def mini_config(chapter: str) -> dict:
    """The config a plain `arl run CHAPTER --preset mini` saves in its config.json."""
    from arl import config
    from arl.recipes import load

    recipe = load(chapter)
    return json.loads(json.dumps(asdict(config.resolve(recipe.Config, recipe.PRESETS, "mini", []))))


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def run_wall_time(run: Path) -> float | None:
    """A finished run's wall time in seconds: the ledger's (summed `time/step`), else config.json to
    eval/summary.json by the folder's timestamps; None for a run that did not finish."""
    from arl.report.compare import ledger_of

    summary = run / "eval" / "summary.json"
    if not summary.is_file():
        return None
    rows = []
    for line in (run / "metrics.jsonl").read_text().splitlines() if (run / "metrics.jsonl").is_file() else []:
        if line.strip():
            rows.append(json.loads(line))
    wall = ledger_of({0: rows}, {0: _json(run / "config.json") or {}})["wall time (s)"]
    if wall is not None:
        return wall
    return summary.stat().st_mtime - (run / "config.json").stat().st_mtime


def mini_times(runs: Path, chapter: str, expected: dict) -> list[float]:
    """The wall times of the finished mini runs of `chapter` anywhere under `runs` (`expected`: the config
    of the mini preset)."""
    keep = {k: v for k, v in expected.items() if k not in IGNORED}
    times = []
    for meta in sorted(runs.rglob("run.json")) if runs.is_dir() else []:
        run = meta.parent
        if (_json(meta) or {}).get("chapter") != chapter:
            continue
        saved = _json(run / "config.json")
        if not isinstance(saved, dict) or {k: v for k, v in saved.items() if k not in IGNORED} != keep:
            continue
        wall = run_wall_time(run)
        if wall is not None:
            times.append(wall)
    return times


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 100 else f"{seconds / 60:.1f} min"


def mini_cell(times: list[float]) -> str | None:
    """The median of `times` and their count; None without any (the table keeps what it had)."""
    if not times:
        return None
    return f"{duration(statistics.median(times))} ({len(times)} run{'s' if len(times) > 1 else ''})"


def measure_smoke(chapter: str) -> str | None:
    """`arl run CHAPTER --preset smoke`'s wall time, or None (with the error printed) if it failed."""
    env = {**os.environ, "ARL_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    with tempfile.TemporaryDirectory(prefix=f"arl-smoke-{chapter}-") as out:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "arl.cli", "run", chapter, "--preset", "smoke", "--out", out],
                              env=env, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
    if done.returncode != 0:
        print(f"{chapter}: the smoke run failed (exit {done.returncode}), its time is left as it was:\n"
              f"{done.stderr[-2000:]}", file=sys.stderr)
        return None
    return duration(elapsed)


def previous_cells(block: str) -> dict[str, dict[str, str]]:
    """The smoke and mini cells of the table as the document has it now, by chapter."""
    cells = {}
    for line in block.splitlines():
        parts = [p.strip() for p in line.strip().strip("|").split("|")]
        if len(parts) == 5 and parts[0].startswith("`") and parts[0].endswith("`"):
            cells[parts[0].strip("`")] = {"smoke": parts[3], "mini": parts[4]}
    return cells


def table(smoke: dict[str, str], mini: dict[str, str], cores: int) -> str:
    """The chapter table with its legend, every chapter of `arl list` in order; a missing value is MISSING."""
    rows = [HEADER]
    for chapter, (_, description) in CHAPTERS.items():
        needs = ", ".join(NEEDS_TEXT[n] for n in NEEDS.get(chapter, ())) or "nothing"
        rows.append(f"| `{chapter}` | {description.split(':')[0]} | {needs} | {smoke.get(chapter) or MISSING} "
                    f"| {mini.get(chapter) or MISSING} |")
    legend = ("\nSmoke: the whole `arl run CHAPTER --preset smoke` command, one chapter at a time at one torch "
              f"thread (the table last written on a machine with {cores} cores). Mini: the training steps' wall time "
              "(the compute ledger's, summed `time/step`; the cold start and evaluations come on top; for `losses`, which "
              "logs no step time, its folder's, from config.json to eval/summary.json, its cold start included when that "
              "run trained it) of the finished "
              "mini runs under `runs/`, the median over them; runs of `arl compare --jobs 2` shared the cores with "
              "another run. Written by `python scripts/chapter_times.py`.")
    return "\n".join(rows) + "\n" + legend


def rewrite(doc: Path, smoke: dict[str, str | None], mini: dict[str, str | None], cores: int) -> None:
    """Replace the table between the markers of `doc`, keeping the smoke and mini cells of chapters without a
    new value; atomically, so a reader never sees half a file."""
    text = doc.read_text()
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError(f"{doc}: needs one {BEGIN} line and, after it, one {END} line around the chapter table; "
                         f"add them where the table belongs")
    head, rest = text.split(BEGIN)
    block, tail = rest.split(END)
    before = previous_cells(block)
    kept = {kind: {c: new.get(c) or before.get(c, {}).get(kind) for c in CHAPTERS}
            for kind, new in (("smoke", smoke), ("mini", mini))}
    kept = {kind: {c: v for c, v in cells.items() if v and v != MISSING} for kind, cells in kept.items()}
    atomic.write_bytes(doc, (head + BEGIN + "\n" + table(kept["smoke"], kept["mini"], cores) + "\n" + END
                             + tail).encode())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chapters", nargs="+", default=list(CHAPTERS), help="chapters to measure (default: all)")
    ap.add_argument("--runs", type=Path, default=ROOT / "runs", help="where the mini runs are read from")
    ap.add_argument("--no-smoke", action="store_true", help="only read the mini times; keep the smoke column")
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "getting-started.md")
    args = ap.parse_args(argv)
    unknown = [c for c in args.chapters if c not in CHAPTERS]
    if unknown:
        ap.error(f"--chapters: unknown {', '.join(unknown)}; `arl list` shows the chapters")
    smoke, mini = {}, {}
    for chapter in args.chapters:
        mini[chapter] = mini_cell(mini_times(args.runs, chapter, mini_config(chapter)))
        print(f"{chapter}: mini {mini[chapter] or 'no finished mini run under ' + str(args.runs)}", flush=True)
        if not args.no_smoke:
            smoke[chapter] = measure_smoke(chapter)
            print(f"{chapter}: smoke {smoke[chapter] or 'failed'}", flush=True)
    rewrite(args.doc, smoke, mini, os.cpu_count() or 1)
    print(f"wrote the table of {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
