"""Check that every number in a chapter note's results tables comes from a comparison report.

    python scripts/check_note_numbers.py [docs/chapters/NOTE.md ...] [--compare ROOT ...]

Run it after the path targets (`make path01` ... `make path04`), which write the reports under
runs/compare/; the reports kept in the repository (results/compare/, `scripts/keep_reports.py`) are read
too, a comparison's folder under runs/ first. A note's results tables are the markdown tables of its "Results" sections (a heading
that starts with "Results", down to the next heading of that level or above). Its reports are the
comparison folders the note names (`runs/compare/NAME`) and those whose name starts with the
chapter's. Each number of a table cell (signs, `%` and thousands separators aside: `+6.2` and `6.2`
match) must occur in one of those reports' `report.md`; the ones that do not are listed per note, and
the exit status is 1 if any note has one (2 if a note names no report that exists).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"(?<![\w.])[-+−]?\d[\d,]*(?:\.\d+)?(?![\w.])")
FOLDER = re.compile(r"runs/compare/([A-Za-z0-9_.+-]+)")


def normalize(token: str) -> str:
    return token.replace("−", "-").lstrip("+-").replace(",", "")


def numbers(text: str) -> set[str]:
    return {normalize(m.group()) for m in NUMBER.finditer(text)}


def results_tables(note: str) -> list[str]:
    """The table lines (header and separator rows aside) of the note's Results sections."""
    lines, out, level = note.splitlines(), [], None
    for i, line in enumerate(lines):
        heading = re.match(r"(#+)\s+(.*)", line)
        if heading:
            depth = len(heading.group(1))
            if level is not None and depth <= level:
                level = None
            if heading.group(2).lower().startswith("results"):
                level = depth
            continue
        if level is None or not line.startswith("|"):
            continue
        is_header = i + 1 < len(lines) and re.fullmatch(r"\|?\s*:?-+.*", lines[i + 1].strip())
        if not is_header and not re.fullmatch(r"\|[\s:|-]+\|?", line.strip()):
            out.append(line)
    return out


def reports_of(note_path: Path, note: str, roots: list[Path]) -> list[Path]:
    """The report of each comparison the note names or its chapter owns, from the first root that has it."""
    chapter = note_path.stem
    names = set(FOLDER.findall(note)) | {p.name for root in roots for p in root.glob(f"{chapter}*") if p.is_dir()}
    found = (next((root / n / "report.md" for root in roots if (root / n / "report.md").is_file()), None) for n in names)
    return sorted((r for r in found if r is not None), key=lambda r: r.parent.name)


def check(note_path: Path, compare: Path | list[Path]) -> tuple[list[Path], list[str]]:
    """(the reports read, the numbers of the results tables found in none of them)."""
    note = note_path.read_text(encoding="utf-8")
    reports = reports_of(note_path, note, compare if isinstance(compare, list) else [compare])
    known = set().union(*(numbers(r.read_text(encoding="utf-8")) for r in reports)) if reports else set()
    missing = []
    for line in results_tables(note):
        for cell in line.strip().strip("|").split("|"):
            missing += [f"{n} (in: {cell.strip()})" for n in sorted(numbers(cell)) if n not in known]
    return reports, missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notes", nargs="*", type=Path, help="chapter notes (default: every docs/chapters/*.md)")
    parser.add_argument("--compare", type=Path, nargs="+", default=[ROOT / "runs" / "compare", ROOT / "results" / "compare"],
                        help="the comparisons' root folders, the first that has a comparison wins")
    args = parser.parse_args(argv)
    status = 0
    for note_path in args.notes or sorted((ROOT / "docs" / "chapters").glob("*.md")):
        reports, missing = check(note_path, args.compare)
        if not reports:
            print(f"{note_path.name}: no report under {' or '.join(map(str, args.compare))} (run its make pathNN target first)")
            status = max(status, 2)
            continue
        if missing:
            print(f"{note_path.name}: {len(missing)} number(s) of its results tables are in none of "
                  f"{', '.join(str(r.parent.name) for r in reports)}:")
            print("\n".join(f"  {m}" for m in missing))
            status = max(status, 1)
        else:
            print(f"{note_path.name}: every results-table number is in {', '.join(r.parent.name for r in reports)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
