"""The Search-R1 exact-match reward on hand-checked completions."""

import pytest

from arl.rewards import FORMAT_PENALTY, answer_reward, grade_answer, parse_answer, squad_normalize


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("Selva", "selva"),
        ("  The Selva River. ", "selva river"),
        ("a lamp", "lamp"),
        ("An  apple,  the pear!", "apple pear"),
        ("O'Neil", "oneil"),  # deleted, not replaced by a space (SQuAD)
        ("«Dalven»", "dalven"),  # Unicode punctuation too
        ("Theodor", "theodor"),  # only whole-word articles go
        ("1,967", "1967"),
        ("...", ""),
    ],
)
def test_squad_normalize(raw, expected):
    assert squad_normalize(raw) == expected


@pytest.mark.parametrize(
    "text, answer, outcome",
    [
        ("Answer: Selva", "Selva", "answered"),
        ("The town lies on the Selva.\nanswer:   Selva  ", "Selva", "answered"),
        ("Answer: Kora\nWait, I misread.\nAnswer: Selva", "Selva", "answered"),  # the last line counts
        ("  ANSWER: Selva", "Selva", "answered"),
        ("The answer is Selva.", None, "missing"),
        ("", None, "missing"),
        ("Final Answer: Selva", None, "missing"),  # the line must start with Answer:
        ("Answer:", None, "empty"),
        ("Answer: Selva\nAnswer:  .", None, "empty"),
        ('Answer: Selva\n<tool_call>\n{"name": "search", "arguments": {"query": "x"}}\n</tool_call>', None, "tool_call"),
    ],
)
def test_parse_answer(text, answer, outcome):
    parsed = parse_answer(text)
    assert (parsed.answer, parsed.outcome) == (answer, outcome)


def test_rewards_correct_wrong_and_malformed():
    assert answer_reward("Answer: the Selva.", "Selva") == 1.0
    assert answer_reward("Answer: Lake Omra", ["Omra", "Lake Omra"]) == 1.0
    assert answer_reward("Answer: Omra", ("Omra", "Lake Omra")) == 1.0
    assert answer_reward("Answer: Selva river", "Selva") == 0.0  # exact match, not containment
    assert answer_reward("Answer: Kora", "Selva") == 0.0
    assert answer_reward("Selva", "Selva") == FORMAT_PENALTY == -0.1
    assert answer_reward("Answer:", "Selva", penalty=-0.5) == -0.5


def test_grade_reports_the_outcome_for_metrics():
    grade = grade_answer("Answer: selva!", ["x", "Selva"])
    assert (grade.reward, grade.outcome, grade.answer) == (1.0, "correct", "selva!")
    grade = grade_answer("Answer: Kora", "Selva")
    assert (grade.reward, grade.outcome, grade.answer) == (0.0, "wrong", "Kora")
    grade = grade_answer("no answer line", "Selva")
    assert (grade.reward, grade.outcome, grade.answer) == (FORMAT_PENALTY, "missing", None)


def test_empty_gold_is_an_error():
    with pytest.raises(ValueError, match="answers is empty"):
        answer_reward("Answer: Selva", [])
