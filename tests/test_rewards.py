"""The boxed-answer verifier on the strings that trip up simple extractors."""

import threading

import pytest

from arl.rewards import boxed_reward, extract_boxed, normalize_answer


@pytest.mark.parametrize(
    "text, expected",
    [
        (r"The answer is \boxed{42}.", "42"),
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{\frac{\sqrt{3}}{2}} done", r"\frac{\sqrt{3}}{2}"),
        (r"first \boxed{1}, then \boxed{2}, finally \boxed{3}", "3"),
        (r"\boxed{ 42 }", " 42 "),
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),  # escaped braces do not close the box
        (r"\boxed{}", ""),
        ("no box here", None),
        ("", None),
        (r"\boxed{12", None),
        (r"\boxed{\frac{1}{2}", None),
        (r"\boxed{7} and then \boxed{8", None),  # the last box decides, even when unfinished
        (r"\boxed 5", None),
    ],
)
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("42", "42"),
        ("  42 ", "42"),
        ("42.", "42"),
        ("3.50", "3.50"),
        ("1,000", "1000"),
        ("1,234,567", "1234567"),
        ("12,34", "12,34"),  # not a thousands separator
        ("(1, 2)", "(1, 2)"),
        ("$5$", "5"),
        ("\\$18", "18"),
        ("+7", "7"),
        ("-7", "-7"),
        ("x = 5", "x = 5"),
        (r"\frac{1}{2}", r"\frac{1}{2}"),
    ],
)
def test_normalize_answer(raw, expected):
    assert normalize_answer(raw) == expected


@pytest.mark.parametrize(
    "completion, answer, reward",
    [
        (r"12 + 7 = 19. The answer is \boxed{19}", "19", 1.0),
        (r"\boxed{ 42 }", "42", 1.0),
        (r"\boxed{42.}", "42", 1.0),
        (r"\boxed{1,000}", "1000", 1.0),
        (r"\boxed{$1,000$}", "1,000", 1.0),
        (r"\boxed{+3}", "3", 1.0),
        (r"\boxed{41}", "42", 0.0),
        (r"\boxed{42} no wait \boxed{41}", "42", 0.0),
        (r"\boxed{41} no wait \boxed{42}", "42", 1.0),
        (r"\boxed{42} no wait \boxed{4", "42", 0.0),
        ("42", "42", 0.0),  # no box, no reward: the format is part of the task
        (r"\boxed{}", "42", 0.0),
    ],
)
def test_boxed_reward(completion, answer, reward):
    assert boxed_reward(completion, answer) == reward


def test_math_verify_decides_equivalent_forms():
    pytest.importorskip("math_verify")
    assert boxed_reward(r"\boxed{\frac{1}{2}}", "0.5") == 1.0
    assert boxed_reward(r"\boxed{0.5}", r"\frac{1}{2}") == 1.0
    assert boxed_reward(r"\boxed{14.0}", "14") == 1.0
    assert boxed_reward(r"\boxed{\frac{1}{3}}", "0.5") == 0.0


def test_without_math_verify_only_exact_matches_count(monkeypatch):
    import arl.rewards.boxed as boxed

    monkeypatch.setattr(boxed, "math_verify", None)
    assert boxed_reward(r"\boxed{\frac{1}{2}}", "0.5") == 0.0
    assert boxed_reward(r"\boxed{1,000.}", "1000") == 1.0


def test_math_verify_runs_in_worker_threads():
    # math-verify's default timeout uses signal.alarm, which raises outside the main thread
    pytest.importorskip("math_verify")
    rewards = []
    worker = threading.Thread(target=lambda: rewards.append(boxed_reward(r"\boxed{0.5}", "1/2")))
    worker.start()
    worker.join()
    assert rewards == [1.0]


def test_overlong_ramp_matches_its_formula_at_the_boundaries():
    from arl.rewards import overlong_penalty

    # max 40, cache 10: 0 up to 30 tokens, then -(L - 30) / 10, -1 at 40, -1 beyond
    assert overlong_penalty(0, 40, 10) == 0.0
    assert overlong_penalty(30, 40, 10) == 0.0
    assert overlong_penalty(31, 40, 10) == pytest.approx(-0.1)
    assert overlong_penalty(35, 40, 10) == pytest.approx(-0.5)
    assert overlong_penalty(40, 40, 10) == pytest.approx(-1.0)
    assert overlong_penalty(41, 40, 10) == -1.0
    assert overlong_penalty(40, 40, 0) == 0.0
    with pytest.raises(ValueError, match="cache"):
        overlong_penalty(5, 40, 50)


def test_choice_reward_reads_the_last_boxed_letter():
    from arl.rewards import choice_reward, extract_choice

    assert choice_reward("It is red, so \\boxed{B}", "B") == 1.0
    assert choice_reward("\\boxed{ b }", "B") == 1.0  # case and spaces, as the reference lab's parser
    assert choice_reward("\\boxed{A} no wait \\boxed{C}", "A") == 0.0  # the last box counts
    assert extract_choice("\\boxed{E}") is None and extract_choice("\\boxed{AB}") is None
    assert extract_choice("B") is None and choice_reward("The answer is B", "B") == 0.0


@pytest.mark.parametrize("text, expected", [
    ("Emission lines. <answer>\\boxed{YES} narrow He II</answer>", "YES"),
    ("<answer>\\boxed{YES}</answer> then again <answer>\\boxed{NO}</answer>", "NO"),  # the last block counts
    ("<answer>\\boxed{ NO }</answer>", "NO"),
    ("\\boxed{YES}", None),  # no answer block
    ("<answer>\\boxed{YES}", None),  # the block never closes
    ("<answer>yes</answer>", None),  # no box
    ("<answer>\\boxed{MAYBE}</answer>", None),
])
def test_extract_vetting(text, expected):
    from arl.rewards import extract_vetting

    assert extract_vetting(text) == expected


def test_vetting_reward_is_correct_minus_a_fifth_for_bad_format():
    from arl.rewards import vetting_reward

    assert vetting_reward("<answer>\\boxed{YES}</answer>", "YES") == 1.0
    assert vetting_reward("<answer>\\boxed{NO}</answer>", "YES") == 0.0
    assert vetting_reward("YES", "YES") == -0.2
