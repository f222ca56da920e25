"""`arl path`: the learning path covers every chapter once, counts the runs it finds, and docs/questions.md is
the printout of its learner questions (each pointing to a chapter, a note and a figure that exist)."""

import json
from pathlib import Path

from arl.path import QUESTIONS, STOPS, _note, local_runs, path_text, questions_markdown
from arl.recipes import CHAPTERS

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_every_chapter_is_on_the_path_once():
    listed = [c for stop in STOPS for c in stop.chapters]
    assert sorted(listed) == sorted(CHAPTERS)


def test_the_key_questions_are_the_home_pages():
    home = (DOCS / "index.md").read_text()
    assert all(f"| {stop.question} |" in home for stop in STOPS)


def test_every_question_points_to_a_chapter_note_and_figure_that_exist():
    for q in QUESTIONS:
        assert q.chapter in CHAPTERS, q.text
        assert (DOCS / "chapters" / f"{_note(q.chapter)}.md").is_file(), q.text
        assert not q.figure.endswith(".png") or (DOCS / q.figure).is_file(), q.figure
        assert q.command.startswith(("arl compare", "arl run")) and q.command.split()[2] in CHAPTERS, q.command


def test_docs_questions_page_is_the_printout():
    assert (DOCS / "questions.md").read_text() == questions_markdown(), "regenerate docs/questions.md: " \
        "python -c \"from arl.path import questions_markdown; print(questions_markdown(), end='')\" > docs/questions.md"


def _run(root: Path, chapter: str, name: str, finished: bool) -> None:
    folder = root / chapter / name
    (folder / "eval").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"chapter": chapter}))
    if finished:
        (folder / "eval" / "summary.json").write_text("{}")


def test_local_runs_counts_run_folders_finished_runs_and_comparisons(tmp_path):
    _run(tmp_path, "grpo", "a", True)
    _run(tmp_path, "grpo", "b", False)
    _run(tmp_path / "compare" / "dapo-x" / "runs", "dapo", "s0", True)
    (tmp_path / "compare" / "dapo-x" / "compare.json").write_text(json.dumps({"chapter": "dapo"}))
    (tmp_path / "stray").mkdir()
    (tmp_path / "stray" / "run.json").write_text("not json")
    runs = local_runs(tmp_path)
    assert runs["grpo"] == {"runs": 2, "finished": 1}
    assert runs["dapo"] == {"runs": 1, "finished": 1, "comparisons": 1}
    text = path_text(CHAPTERS, tmp_path)
    assert "grpo            1/2 runs finished, 0 comparisons" in text
    assert "dapo            1/1 runs finished, 1 comparison " in text
    assert "no runs yet: arl run gspo --preset smoke" in text
    assert local_runs(tmp_path / "missing") == {}


def test_arl_path_prints_the_path_and_the_questions(tmp_path, capsys):
    from arl.cli import main

    assert main(["path", "--runs", str(tmp_path)]) == 0
    assert "04c · Fixed-option classification and decisions" in capsys.readouterr().out
    assert main(["path", "--questions"]) == 0
    assert QUESTIONS[0].command in capsys.readouterr().out
