"""Keep the finished comparisons' reports in the repository, so a note's numbers stay checkable after the
machine that ran them is gone.

    python scripts/keep_reports.py [--from runs/compare] [--to results/compare] [NAME ...]

`runs/` is not committed, and a path target (`make path01` ... `path04`) takes longer than one working
session: what one session ran is lost to the next unless its reports are kept. For every comparison folder
under --from whose report is written (report.md and results.json: every arm and seed finished), this copies
report.md (the tables a note quotes, the config diff, the checks and the compute ledger) and compare.json (the
arms, seeds and command that made it) to --to/NAME/. `scripts/check_note_numbers.py` reads both roots, the
runs first. Commit what it kept with the note that quotes it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arl import atomic  # noqa: E402

KEPT = ("report.md", "compare.json")


def finished(folder: Path) -> bool:
    """A comparison whose report covers every arm and seed: `arl compare` writes results.json last."""
    return all((folder / name).is_file() for name in (*KEPT, "results.json"))


def keep(source: Path, target: Path, names: list[str] | None = None) -> list[str]:
    """Copy each finished comparison's report.md and compare.json from `source` to `target`; returns the
    names of the comparisons whose kept copy changed."""
    changed = []
    for folder in sorted(p for p in source.iterdir() if p.is_dir()) if source.is_dir() else []:
        if (names and folder.name not in names) or not finished(folder):
            continue
        json.loads((folder / "compare.json").read_text(encoding="utf-8"))  # a torn plan fails here, not in a commit
        new = {name: (folder / name).read_bytes() for name in KEPT}
        if all((target / folder.name / n).is_file() and (target / folder.name / n).read_bytes() == b for n, b in new.items()):
            continue
        (target / folder.name).mkdir(parents=True, exist_ok=True)
        for name, data in new.items():
            atomic.write_bytes(target / folder.name / name, data)
        changed.append(folder.name)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="comparison folders to keep (default: every finished one)")
    parser.add_argument("--from", dest="source", type=Path, default=ROOT / "runs" / "compare")
    parser.add_argument("--to", dest="target", type=Path, default=ROOT / "results" / "compare")
    args = parser.parse_args(argv)
    missing = [n for n in args.names if not finished(args.source / n)]
    if missing:
        print(f"not finished or not there under {args.source}: {', '.join(missing)} (rerun its arl compare to resume)",
              file=sys.stderr)
        return 2
    changed = keep(args.source, args.target, args.names or None)
    print(f"kept under {args.target}: {', '.join(changed) if changed else 'nothing new'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
