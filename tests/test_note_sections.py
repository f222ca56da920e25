"""Every chapter note answers the learning path's four questions, states its boundaries, and gives each learner
question an expected outcome with the command that checks it (issue 23)."""

import re
from pathlib import Path

import pytest

NOTES = sorted((Path(__file__).resolve().parents[1] / "docs" / "chapters").glob("*.md"))
REQUIRED = ("## The four questions", "## Boundaries", "## Questions for the learner")
FOUR = ("reward", "token", "change", "control")
"""A word of each question that its answer's lead must carry (the learning path's wording)."""


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    following = re.search(r"^## ", text[start + len(heading):], flags=re.M)
    return text[start:start + len(heading) + following.start()] if following else text[start:]


def items(block: str) -> list[str]:
    """The top-level list items of a section, each with its continuation lines."""
    return [m.strip() for m in re.split(r"^(?=[-*]|\d+\.)\s?", block.split("\n", 1)[1], flags=re.M)
            if m.strip() and re.match(r"[-*]|\d+\.", m.strip())]


def test_every_chapter_has_a_note():
    assert len(NOTES) >= 15


@pytest.mark.parametrize("note", NOTES, ids=lambda p: p.stem)
def test_a_note_has_the_four_answers_boundaries_and_learner_questions(note):
    text = note.read_text(encoding="utf-8")
    for heading in REQUIRED:
        assert re.search(rf"^{re.escape(heading)}", text, flags=re.M), f"{note.name}: no section {heading!r}"
    answers = items(section(text, "## The four questions"))
    assert len(answers) == 4, f"{note.name}: the four questions section lists {len(answers)} answers"
    for word, answer in zip(FOUR, answers):
        assert word in answer.lower()[:200], f"{note.name}: the answer {answer[:60]!r} does not open on its question ({word})"
        assert len(answer) > 120, f"{note.name}: the answer {answer[:60]!r} is a sentence, not an answer from the runs"
    assert len(section(text, "## Boundaries")) > 300, f"{note.name}: Boundaries is nearly empty"


@pytest.mark.parametrize("note", NOTES, ids=lambda p: p.stem)
def test_every_learner_question_has_an_expected_outcome_and_its_command(note):
    text = note.read_text(encoding="utf-8")
    questions = items(section(text, "## Questions for the learner"))
    assert questions, f"{note.name}: no learner questions"
    for q in questions:
        assert "Expected" in q, f"{note.name}: the question {q[:70]!r} has no expected outcome"
        assert re.search(r"`(arl|make) [^`]+`", q), f"{note.name}: the question {q[:70]!r} has no command that checks it"
