"""The arithmetic mini task (fixed, disjoint, well-formed splits) and the GSM8K loader."""

import hashlib
import json
import re

import pytest

from arl.coldstart import sft_targets
from arl.data import INSTRUCTION, Problem, format_prompt, load_gsm8k, load_math_task, make_split
from arl.data.arithmetic import MAX_VALUE
from arl.rewards import boxed_reward

STEP = re.compile(r"^(\d+) ([+*-]) (\d+) = (\d+)$")


@pytest.fixture(scope="module")
def split():
    return make_split(seed=0)


def test_sizes_and_ids(split):
    train, test = split
    assert (len(train), len(test)) == (2000, 200)
    assert all(isinstance(p, Problem) for p in train + test)
    assert len({p.id for p in train + test}) == 2200
    assert test[7].id == "arith-s0-test-00007"


def test_train_and_test_are_disjoint_and_free_of_repeats(split):
    train, test = split
    train_q, test_q = {p.question for p in train}, {p.question for p in test}
    assert len(train_q) == len(train) and len(test_q) == len(test)
    assert not train_q & test_q


def test_same_seed_same_split_on_every_machine(split):
    # A golden value, not just a second call: it fails if the generator depends on anything but the
    # seed (hash randomisation, platform, dict order). Changing the task on purpose changes it too.
    train, test = split
    assert test[0].question == (
        "Diego saves 8 dollars every week for 4 weeks. Then he spends 14 of them on a cake. "
        "After that, he spends 5 of them on a map. How many dollars does Diego have now?"
    )
    text = "\n".join(f"{p.id}|{p.question}|{p.answer}|{p.solution}" for p in train + test)
    assert hashlib.sha256(text.encode()).hexdigest() == "bb6abbbc6e771a8316dd161d2e1980c8478779397f05678a021b0957ab037c15"
    assert make_split(seed=0) == split
    assert make_split(seed=1)[1] != test


def test_test_split_does_not_depend_on_n_train(split):
    train, test = split
    small_train, same_test = make_split(seed=0, n_train=10)
    assert same_test == test
    assert small_train == train[:10]


def test_every_problem_is_well_formed(split):
    train, test = split
    for p in train + test:
        *lines, last = p.solution.split("\n")
        assert last == f"The answer is \\boxed{{{p.answer}}}"
        assert 2 <= len(lines) <= 4, p
        for line in lines:  # each step is correct arithmetic on small non-negative numbers
            a, op, b, result = STEP.match(line).groups()
            a, b, result = int(a), int(b), int(result)
            assert result == {"+": a + b, "-": a - b, "*": a * b}[op], line
            assert 0 <= result <= MAX_VALUE and a <= MAX_VALUE and b <= MAX_VALUE, line
        assert int(p.answer) == result and 0 <= int(p.answer) <= MAX_VALUE
        assert len(p.question.split()) < 60
        assert boxed_reward(p.solution, p.answer) == 1.0


def test_the_task_is_varied(split):
    train, _ = split
    ops = {STEP.match(line).group(2) for p in train for line in p.solution.split("\n")[:-1]}
    assert ops == {"+", "-", "*"}
    markers = ["have now?", "dollars each", "as many", " than ", "every", "There are"]
    for marker in markers:
        assert sum(marker in p.question for p in train) > 100, marker
    answers = {p.answer for p in train}
    assert len(answers) > 150


def test_bad_sizes_name_the_field():
    with pytest.raises(ValueError, match="n_train"):
        make_split(n_train=-1)
    with pytest.raises(ValueError, match="n_test"):
        make_split(n_test=2.5)


def test_format_prompt(split):
    problem = split[1][0]
    messages = format_prompt(problem)
    assert messages == [{"role": "user", "content": f"{problem.question}\n{INSTRUCTION}"}]
    assert "\\boxed{}" in INSTRUCTION


GSM8K_ROWS = [
    {
        "question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips "
        "to friends in May. How many clips did Natalia sell altogether in April and May?",
        "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
        "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72",
    },
    {"question": "A farm has 1,200 hens and buys 300 more. How many hens now?", "answer": "1200+300=1500\n#### 1,500"},
]


def test_load_gsm8k(tmp_path):
    path = tmp_path / "test.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in GSM8K_ROWS) + "\n\n")
    first, second = load_gsm8k(path)
    assert first.id == "gsm8k-test-0"
    assert first.question == GSM8K_ROWS[0]["question"]
    assert first.answer == "72"
    assert first.solution == (
        "Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether in April and May.\n"
        "The answer is \\boxed{72}"
    )
    assert second.answer == "1500"
    assert boxed_reward(second.solution, second.answer) == 1.0


def test_load_gsm8k_missing_file_says_how_to_get_it(tmp_path):
    missing = tmp_path / "gsm8k" / "test.jsonl"
    with pytest.raises(FileNotFoundError, match="never downloads") as info:
        load_gsm8k(missing)
    message = str(info.value)
    assert str(missing) in message
    assert "grade_school_math/data/test.jsonl" in message and "openai/gsm8k" in message


def test_load_gsm8k_rejects_a_record_without_final_answer(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"question": "1+1?", "answer": "2"}) + "\n")
    with pytest.raises(ValueError, match="record 0"):
        load_gsm8k(path)


def test_small_level_is_easy_disjoint_and_fixed():
    train, test = make_split(seed=0, n_train=500, n_test=50, level="small")
    assert not {p.question for p in train} & {p.question for p in test}
    assert all(0 <= int(p.answer) <= 44 and 2 <= len(p.solution.splitlines()) <= 3 for p in train + test)
    assert make_split(seed=0, n_train=500, n_test=50, level="small") == (train, test)
    with pytest.raises(ValueError, match="level='hard'"):
        make_split(level="hard")


def test_chain_level_needs_two_or_three_steps_on_numbers_below_ten():
    train, test = make_split(seed=0, n_train=500, n_test=50, level="chain")
    assert not {p.question for p in train} & {p.question for p in test}
    for p in train + test:
        *steps, last = p.solution.splitlines()
        assert 2 <= len(steps) <= 3 and last == f"The answer is \\boxed{{{p.answer}}}"
        for line in steps:
            a, op, b, _, result = line.split()
            assert int(b) <= 9 and 0 <= int(result) == (int(a) + int(b) if op == "+" else int(a) - int(b))
    assert make_split(seed=0, n_train=500, n_test=50, level="chain") == (train, test)


def test_long_level_writes_half_the_small_solutions_out_clause_by_clause():
    train, test = make_split(seed=0, n_train=400, n_test=50, level="long")
    verbose = [p for p in train if not p.solution[0].isdigit()]
    assert 150 < len(verbose) < 250
    for p in verbose:
        opening, *steps, last = p.solution.splitlines()
        assert p.question.startswith(opening) and last == f"The answer is \\boxed{{{p.answer}}}"
        assert 1 <= len(steps) <= 2 and all(line.startswith("Then ") for line in steps[1:])
        for line in steps:  # "<the question's clause>, so a op b = r."
            clause, _, equation = line.partition(", so ")
            a, op, b, _, result = equation.rstrip(".").split()
            assert clause.split(" ", 2)[-1] in p.question or clause in p.question
            assert 0 <= int(result) == (int(a) + int(b) if op == "+" else int(a) - int(b))
    assert not {p.question for p in train} & {p.question for p in test}
    assert make_split(seed=0, n_train=400, n_test=50, level="long") == (train, test)


def test_cold_start_targets_drop_the_box_for_a_plain_share():
    train, _ = make_split(seed=0, n_train=400, n_test=0, level="small")
    assert sft_targets(train, 0.0) == [p.solution for p in train]
    mixed = sft_targets(train, 0.6)
    plain = [(t, p) for t, p in zip(mixed, train) if t != p.solution]
    assert 0.52 < len(plain) / len(train) < 0.68
    for t, p in plain:
        assert t == p.solution.replace(f"\\boxed{{{p.answer}}}", p.answer) and boxed_reward(t, p.answer) == 0.0
    assert mixed == sft_targets(train, 0.6, data_seed=0)  # fixed per problem
    assert mixed != sft_targets(train, 0.6, data_seed=1)


def test_missing_gsm8k_file_and_cache_fail_with_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty `datasets` cache
    with pytest.raises(FileNotFoundError, match="neither a local file nor in the `datasets` cache") as e:
        load_math_task("gsm8k/train.jsonl", "small", 10, 10)
    assert "curl -L -o gsm8k/train.jsonl" in str(e.value)
