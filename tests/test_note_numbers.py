"""scripts/check_note_numbers.py: a note's results-table numbers must come from its comparison reports."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "check_note_numbers.py"
spec = importlib.util.spec_from_file_location("check_note_numbers", SCRIPT)
check_note_numbers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_note_numbers)

NOTE = """# 01 · Toy

| not results | 99.9 |
|---|---|
| x | 12.5 |

## Results

Made by `make path01` (runs/compare/toy-extra).

| arm | after | change |
|---|---|---|
| a=x | 56.0 ± 7.8 | +6.2 [+5.5, +6.5] |
| a=y | 1,234 | −0.4% |

### Results by seed

| seed | 0 |
|---|---|
| a=x | 53.5 |

## Boundaries

| outside | 77.7 |
|---|---|
| y | 88.8 |
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_every_results_number_must_be_in_a_report_the_note_names_or_its_chapter_owns(tmp_path):
    note = write(tmp_path / "docs" / "toy.md", NOTE)
    compare = tmp_path / "compare"
    write(compare / "toy-loss" / "report.md", "| a=x | 56.0 ± 7.8 | 6.2 [5.5, 6.5] | seed 0: 53.5 |\n")
    write(compare / "toy-extra" / "report.md", "total 1234 and -0.4 points\n")
    write(compare / "other" / "report.md", "12.5 99.9 77.7 88.8\n")  # not this note's: never read
    reports, missing = check_note_numbers.check(note, compare)
    assert [r.parent.name for r in reports] == ["toy-extra", "toy-loss"]
    assert missing == []
    # a number no report holds is named with its cell; tables outside the Results sections are not checked
    write(compare / "toy-extra" / "report.md", "total 1234\n")
    assert check_note_numbers.check(note, compare)[1] == ["0.4 (in: −0.4%)"]
    assert check_note_numbers.main([str(note), "--compare", str(compare)]) == 1


def test_a_note_without_its_reports_says_which_target_to_run(tmp_path, capsys):
    note = write(tmp_path / "toy.md", NOTE)
    assert check_note_numbers.main([str(note), "--compare", str(tmp_path / "nothing")]) == 2
    assert "run its make pathNN target first" in capsys.readouterr().out


def _load(name: str):
    path = SCRIPT.parent / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


keep_reports = _load("keep_reports")
KEPT_ROOT = SCRIPT.parents[1] / "results" / "compare"


def test_keep_copies_only_finished_comparisons_and_the_runs_copy_is_read_first(tmp_path):
    runs, kept = tmp_path / "runs", tmp_path / "kept"
    write(runs / "toy-loss" / "report.md", "| a=x | 56.0 ± 7.8 | 6.2 [5.5, 6.5] | seed 0: 53.5 |\n")
    write(runs / "toy-loss" / "compare.json", '{"arms": []}')
    write(runs / "toy-extra" / "compare.json", '{"arms": []}')  # planned, still running: no report yet
    assert keep_reports.keep(runs, kept) == []
    write(runs / "toy-loss" / "results.json", "{}")
    assert keep_reports.keep(runs, kept) == ["toy-loss"]
    assert (kept / "toy-loss" / "report.md").read_text() == (runs / "toy-loss" / "report.md").read_text()
    assert not (kept / "toy-extra").exists() and not (kept / "toy-loss" / "results.json").exists()
    assert keep_reports.keep(runs, kept) == []  # unchanged: nothing rewritten
    assert keep_reports.main(["toy-extra", "--from", str(runs), "--to", str(kept)]) == 2
    # the note reads toy-loss from runs/ (first root) and toy-extra from the kept copy when only that has it
    note = write(tmp_path / "docs" / "toy.md", NOTE)
    write(kept / "toy-extra" / "report.md", "total 1234 and -0.4 points\n")
    write(kept / "toy-loss" / "report.md", "nothing\n")
    reports, missing = check_note_numbers.check(note, [runs, kept])
    assert reports == [kept / "toy-extra" / "report.md", runs / "toy-loss" / "report.md"] and missing == []


@pytest.mark.parametrize("note", sorted((SCRIPT.parents[1] / "docs" / "chapters").glob("*.md")), ids=lambda p: p.stem)
def test_a_note_agrees_with_the_reports_kept_in_the_repository(note):
    """Every results-table number of a note whose comparisons are kept (results/compare) is in them."""
    if not check_note_numbers.reports_of(note, note.read_text(encoding="utf-8"), [KEPT_ROOT]):
        pytest.skip(f"no report of {note.stem} kept under results/compare yet (make pathNN, then scripts/keep_reports.py)")
    reports, missing = check_note_numbers.check(note, [KEPT_ROOT])
    assert missing == [], f"{note.name}: numbers in none of {[r.parent.name for r in reports]}: {missing}"
