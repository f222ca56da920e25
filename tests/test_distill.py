"""The distillation chapters' shared pieces: the interleaved schedule, the teacher's signal, the
specialist domain's data and the multi-stage table."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from arl.distill import interleaved_schedule, parse_ratio, teacher_advantages


def test_interleaved_schedule_ratio_and_cursors():
    ratio = parse_ratio("2:1", ("specialist", "general"))
    assert ratio == [("specialist", 2), ("general", 1)]
    sched = interleaved_schedule(ratio, 9)
    assert [d for d, _ in sched] == ["specialist", "specialist", "general"] * 3
    assert [c for d, c in sched if d == "specialist"] == [0, 1, 2, 3, 4, 5]  # each domain its own cursor
    assert [c for d, c in sched if d == "general"] == [0, 1, 2]
    assert interleaved_schedule(parse_ratio("1:0", ("a", "b")), 3) == [("a", 0), ("a", 1), ("a", 2)]


@pytest.mark.parametrize("text", ["1", "1:x", "0:0", "1:1:1", "-1:2"])
def test_bad_ratio_names_the_fix(text):
    with pytest.raises(ValueError, match="schedule"):
        parse_ratio(text, ("specialist", "general"))


class _FixedTeacher:
    """A teacher whose logprob of every token is -1, whatever the prompt."""

    def compute_logprobs(self, model_input):
        return _Done([None] + [-1.0] * (model_input.length - 1))


class _Done:
    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


def test_teacher_advantages_by_hand():
    seqs = [SimpleNamespace(tokens=[5, 6], logprobs=[-0.5, -2.0]), SimpleNamespace(tokens=[7], logprobs=[-1.0])]
    adv_K, metrics = teacher_advantages(_FixedTeacher(), [[1, 2, 3], [4]], seqs, beta=2.0)
    # A_t = -beta * (student - teacher): -2 * (-0.5 + 1) = -1, -2 * (-2 + 1) = 2, -2 * 0 = 0
    assert adv_K == [pytest.approx([-1.0, 2.0]), pytest.approx([0.0])]
    assert metrics["opd/reverse_kl_mean"] == pytest.approx((0.5 - 1.0 + 0.0) / 3)
    assert metrics["opd/teacher_logprob_mean"] == pytest.approx(-1.0)
    assert metrics["opd/student_logprob_mean"] == pytest.approx(-3.5 / 3)
    with pytest.raises(ValueError):  # one teacher prompt per completion
        teacher_advantages(_FixedTeacher(), [[1]], seqs)


def test_dosage_split_is_deterministic_disjoint_and_checked():
    from arl.data import dosage
    from arl.rewards import boxed_reward

    train, test = dosage.make_split(0, 300, 50)
    assert (train, test) == dosage.make_split(0, 300, 50)
    assert not {p.question for p in train} & {p.question for p in test}
    for p in train + test:
        assert 0 <= int(p.answer) <= 199 and boxed_reward(p.solution, p.answer) == 1.0
        for line in p.solution.splitlines()[:-1]:  # every worked step is exact integer arithmetic
            a, op, b, _, r = line.split()
            assert {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b),
                    "/": int(a) / int(b)}[op] == int(r)
    assert any("/" in p.solution for p in train) and any("*" in p.solution for p in train)


def test_stage_rows_align_seeds_and_keep_each_stage_end():
    from arl.report.stages import format_rows, stage_rows

    seed0 = [{"stage": "base", "step": 0, "a": 0.1, "b": 0.5}, {"stage": "opd", "step": 10, "a": 0.2, "b": 0.4},
             {"stage": "opd", "step": 20, "a": 0.4, "b": 0.3}]
    seed1 = [{"stage": "base", "step": 0, "a": 0.1, "b": 0.5}, {"stage": "opd", "step": 10, "a": 0.4, "b": 0.4},
             {"stage": "opd", "step": 20, "a": 0.6, "b": 0.5}]
    rows = stage_rows([seed0, seed1], ["a", "b"])
    assert [(r["stage"], r["step"]) for r in rows] == [("base", 0), ("opd", 10), ("opd", 20)]
    assert rows[2]["a"] == [0.4, 0.6]
    ends = stage_rows([seed0, seed1], ["a", "b"], final_only=True)
    assert [(r["stage"], r["step"]) for r in ends] == [("base", 0), ("opd", 20)]
    # mean 50.0, t_{0.975,1} = 12.706, sd = 0.1414 -> half-width 12.706 * 0.1 = 127.1 points
    assert format_rows(ends, ["a", "b"])[1]["a"] == "50.0 ± 127.1"
    assert format_rows(ends, ["a", "b"])[0]["b"] == "50.0 ± 0.0"


def test_privileged_cold_start_examples_show_the_solution():
    from arl.coldstart import ColdStart, privileged_mask, sft_examples, sft_targets
    from arl.data import make_split
    from arl.models import load_tokenizer

    train, _ = make_split(0, 200, 0, "small")
    mask = privileged_mask(train, 0.5, data_seed=0)
    assert 70 < sum(mask) < 130 and mask == privileged_mask(train, 0.5, data_seed=0)
    tok = load_tokenizer("arl/tiny-qwen3-0.5m")
    targets = sft_targets(train, 1.0)  # every plain target unboxed
    examples = sft_examples(tok, train, targets, mask)
    for p, priv, (prompt, target) in zip(train, mask, examples):
        shown = tok.decode(prompt)
        assert ("Reference solution:" in shown and p.solution in shown) == priv
        assert tok.decode(target[:-1]) == (p.solution if priv else targets[train.index(p)])
    # an unset new field leaves the cache key of every existing cold start as it was
    spec = ColdStart("arl/tiny-qwen3-0.5m", 10)
    assert spec.key() == ColdStart("arl/tiny-qwen3-0.5m", 10, privileged_fraction=0.0, init=None).key()
    assert spec.key() != ColdStart("arl/tiny-qwen3-0.5m", 10, privileged_fraction=0.5).key()


def test_a_cold_start_records_how_long_its_sft_took():
    """The teacher's training time enters OPD's compute ledger: it is written beside the cached state."""
    from arl.coldstart import ColdStart, run_cold_start, training_seconds
    from arl.data import make_split

    train, _ = make_split(0, 16, 0, "small")
    spec = ColdStart("arl/tiny-qwen3-0.5m", 2, batch_size=4, task="timing-probe")
    assert training_seconds(spec) is None
    run_cold_start(spec, train)
    assert 0 < training_seconds(spec) < 600
    assert training_seconds(ColdStart("arl/tiny-qwen3-0.5m", 3, batch_size=4, task="timing-probe")) is None
