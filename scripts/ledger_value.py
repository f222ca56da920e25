"""Print one column of a finished comparison's compute ledger (its results.json), so that a path target
can size a control by it: each continued-SFT control trains for its RL comparison's wall time.

    python scripts/ledger_value.py runs/compare/search-r1 "wall time (s)" [ARM]

ARM defaults to the comparison's first arm; the value is the ledger's (the mean over the arm's seeds of
the column's total), printed rounded to a whole number.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def ledger_value(folder: Path, column: str, arm: str | None = None) -> float:
    """The ledger's `column` for `arm` (default the first arm) of the comparison in `folder`; a ValueError
    that says what is missing and how to make it."""
    results = folder / "results.json"
    if not results.is_file():
        raise ValueError(f"{results}: no such file; run the comparison first (its path target writes it)")
    res = json.loads(results.read_text())
    arms = [a["name"] for a in res["arms"]]
    name = arm or arms[0]
    if name not in res["ledger"]:
        raise ValueError(f"arm {name!r}: not in {folder}; its arms are {', '.join(arms)}")
    value = res["ledger"][name].get(column)
    if value is None:
        columns = [k for k, v in res["ledger"][name].items() if v is not None]
        raise ValueError(f"column {column!r}: not logged by {name} in {folder}; its logged columns are {', '.join(columns)}")
    return float(value)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path)
    p.add_argument("column")
    p.add_argument("arm", nargs="?")
    args = p.parse_args(argv)
    try:
        print(round(ledger_value(args.folder, args.column, args.arm)))
    except ValueError as e:
        print(f"ledger_value: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
