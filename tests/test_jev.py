"""The Jev chapter: marker supervision, the restricted softmax, temperature scaling, calibration
metrics against hand-computed values, split disjointness, and reading decisions from one forward pass."""

import json
import math

import numpy as np
import pytest
import torch

from arl.data.decisions import Question, Record, check_disjoint, load_record, make_splits, state_hash
from arl.decide import (
    DecisionFormat, decide, decision_datum, encode_record, read_logprobs, read_written, written_example,
)
from arl.eval.calibration import (
    brier, calibration_metrics, confidence_correct, ece, fit_temperature, nll, reliability_bins, restricted_softmax,
)
from arl.rollout import marker_datum
from conftest import TINY

RECORD = Record("r1", "ticket", "Ticket from Ada (pro plan, via chat): the app crashes when I open it.", (
    Question("team", "choice", "Which team?", ("billing", "technical", "account", "sales"), "B"),
    Question("urgent", "yes_no", "Urgent?", answer="no"),
    Question("priority", "score", "Priority?", answer="2"),
))


@pytest.fixture(scope="module")
def tokenizer():
    from arl import models

    return models.load_model(TINY).tokenizer


# -- tier 1: supervision sits exactly at the markers ----------------------------------------------

def test_supervision_sits_exactly_at_the_marker_positions(tokenizer):
    fmt = DecisionFormat.for_tokenizer(tokenizer)
    tokens, positions = encode_record(tokenizer, fmt, RECORD)
    assert [tokens[p] for p in positions] == [fmt.marker_id] * 3
    assert tokens.count(fmt.marker_id) == 3  # the marker occurs nowhere else in this record
    datum = decision_datum(tokenizer, fmt, RECORD, weight=0.5)
    target_T = datum.loss_fn_inputs["target_tokens"].to_torch().tolist()
    weight_T = datum.loss_fn_inputs["weights"].to_torch().tolist()
    assert datum.model_input.to_ints() == tokens[:-1]
    supervised = [i for i, w in enumerate(weight_T) if w != 0]
    # input position p - 1 predicts token p: the marker's slot, where the answer's symbol is the target
    assert supervised == [p - 1 for p in positions]
    assert [weight_T[i] for i in supervised] == [0.5] * 3
    symbols = [tokenizer.decode([target_T[i]]) for i in supervised]
    assert symbols == ["B", "N", "2"]
    assert sum(t != 0 for t in target_T) == 3


def test_a_record_without_answers_cannot_be_trained_on(tokenizer):
    fmt = DecisionFormat.for_tokenizer(tokenizer)
    unanswered = Record("r", "", "state", (Question("urgent", "yes_no", "Urgent?"),))
    with pytest.raises(ValueError, match="needs an answer"):
        decision_datum(tokenizer, fmt, unanswered)


def test_a_marker_that_is_not_one_token_is_refused(tokenizer):
    with pytest.raises(ValueError, match="marker 'decision' is .* tokens"):
        DecisionFormat.for_tokenizer(tokenizer, marker="decision")


# -- tier 1: restricted softmax, temperature, metrics -----------------------------------------------

def test_restricted_softmax_sums_to_one_over_the_candidates():
    logp_V = torch.log_softmax(torch.randn(50, generator=torch.Generator().manual_seed(0)), 0)
    candidates = [3, 17, 41]
    for t in (0.3, 1.0, 4.0):
        p_C = restricted_softmax(logp_V[candidates].tolist(), t)
        assert p_C.sum() == pytest.approx(1.0)
        # at T = 1 it is the full softmax conditioned on the candidates
        if t == 1.0:
            full = logp_V.exp()[candidates]
            assert p_C == pytest.approx((full / full.sum()).numpy(), rel=1e-5)


def test_temperature_scaling_never_changes_the_argmax():
    rng = np.random.default_rng(0)
    for _ in range(200):
        logp_C = rng.normal(size=rng.integers(2, 6)) * 5
        best = int(np.argmax(restricted_softmax(logp_C, 1.0)))
        for t in (0.05, 0.5, 2.0, 20.0):
            assert int(np.argmax(restricted_softmax(logp_C, t))) == best


def test_ece_and_brier_against_hand_computed_values():
    # confidences 0.9 (right), 0.8 (wrong), 0.6 (right), 0.55 (right); 10 bins:
    # bin (0.8, 0.9]: conf 0.9, acc 1 -> |1 - 0.9| = 0.1; bin (0.7, 0.8]: 0.8 vs 0 -> 0.8;
    # bin (0.5, 0.6]: conf (0.6 + 0.55) / 2 = 0.575, acc 1 -> 0.425 (two questions)
    # ECE = (0.1 + 0.8 + 2 * 0.425) / 4 = 0.4375
    probs = [np.array([0.9, 0.1]), np.array([0.8, 0.2]), np.array([0.6, 0.3, 0.1]), np.array([0.2, 0.55, 0.25])]
    answers = [0, 1, 0, 1]
    conf, correct = confidence_correct(probs, answers)
    assert conf.tolist() == [0.9, 0.8, 0.6, 0.55] and correct.tolist() == [1, 0, 1, 1]
    assert ece(conf, correct) == pytest.approx(0.4375)
    assert [b["n"] for b in reliability_bins(conf, correct)] == [2, 1, 1]
    # Brier: (0.1^2 + 0.1^2) + (0.8^2 + 0.8^2) + (0.4^2 + 0.3^2 + 0.1^2) + (0.2^2 + 0.45^2 + 0.25^2)
    #      = 0.02 + 1.28 + 0.26 + 0.305 = 1.865, / 4 = 0.46625
    assert brier(probs, answers) == pytest.approx(0.46625)


def test_nll_and_the_fitted_temperature():
    logps = [np.log([0.9, 0.1]), np.log([0.8, 0.2])]
    assert nll(logps, [0, 1]) == pytest.approx((-math.log(0.9) - math.log(0.2)) / 2)
    # overconfident logits (right 60% of the time at ~98% confidence): the fit softens them (T > 1),
    # lowers the NLL, and keeps the accuracy
    rng = np.random.default_rng(1)
    answers = [0 if rng.random() < 0.6 else 1 for _ in range(500)]
    logps = [np.array([0.0, -4.0])] * 500
    t = fit_temperature(logps, answers)
    assert t > 1
    # the optimum makes p(first) = 0.6 on these identical questions: 1 / (1 + e^(-4/T)) = share of 0s
    share = answers.count(0) / 500
    assert 1 / (1 + math.exp(-4 / t)) == pytest.approx(share, abs=1e-4)
    before, after = calibration_metrics(logps, answers), calibration_metrics(logps, answers, t)
    assert after["nll"] < before["nll"] and after["accuracy"] == before["accuracy"]
    assert after["ece"] < before["ece"]


# -- tier 1: the data -------------------------------------------------------------------------------

def test_splits_are_disjoint_and_deterministic():
    a, b = make_splits(seed=0, n_train=60, n_dev=10, n_calibration=10, n_test=10, n_hard=10), \
        make_splits(seed=0, n_train=60, n_dev=10, n_calibration=10, n_test=10, n_hard=10)
    assert a == b
    hashes = [state_hash(r.state) for recs in a.values() for r in recs]
    assert len(hashes) == len(set(hashes)) == 100
    for records in a.values():
        for r in records:
            for q in r.questions:
                assert q.answer in q.labels()
    assert {q.type for r in a["train"] for q in r.questions} == {"choice", "yes_no", "score"}
    # the hard split's states are longer
    assert np.mean([len(r.state) for r in a["hard"]]) > 1.4 * np.mean([len(r.state) for r in a["test"]])


def test_the_split_hash_check_catches_a_planted_duplicate():
    splits = make_splits(seed=0, n_train=20, n_dev=4, n_calibration=4, n_test=4, n_hard=4)
    check_disjoint(splits)
    leaked = Record("planted", "ticket", "  " + splits["train"][3].state.upper() + " ", splits["train"][3].questions)
    splits["test"] = splits["test"] + [leaked]
    with pytest.raises(ValueError, match="duplicate state: record planted of 'test'.*'train'"):
        check_disjoint(splits)


def test_a_bad_record_file_names_the_field(tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"state": "x", "questions": [{"name": "q", "type": "maybe", "text": "?"}]}))
    with pytest.raises(ValueError, match=r"questions\[0\].type='maybe'"):
        load_record(f)
    f.write_text(json.dumps({"questions": []}))
    with pytest.raises(ValueError, match="missing field 'state'"):
        load_record(f)


def test_the_written_example_puts_each_answer_where_its_marker_was(tokenizer):
    fmt = DecisionFormat.for_tokenizer(tokenizer)
    prompt, completion = written_example(tokenizer, fmt, RECORD)
    marked, positions = encode_record(tokenizer, fmt, RECORD)
    assert completion[-1] == tokenizer.eos_token_id
    written = prompt + completion[:-1]
    assert len(written) == len(marked) and written[:len(prompt)] == marked[:len(prompt)]
    # the sequences differ exactly at the markers, where the written one holds the answers' symbols (B, N, 2)
    assert [i for i, (a, b) in enumerate(zip(written, marked)) if a != b] == positions
    assert tokenizer.decode([written[p] for p in positions]) == "BN2"


# -- tier 4: one forward pass reads every question ---------------------------------------------------

def test_reading_takes_one_forward_pass_and_matches_the_trainer(service, tokenizer):
    client = service.create_full_training_client(TINY, seed=0)
    sampler = client.save_weights_and_get_sampling_client()
    fmt = DecisionFormat.for_tokenizer(tokenizer)
    before = dict(sampler.get_usage())
    (per_q,), missing = read_logprobs(sampler, tokenizer, fmt, [RECORD], topk=0)
    usage = sampler.get_usage()
    tokens, positions = encode_record(tokenizer, fmt, RECORD)
    assert usage["requests"] - before["requests"] == 1 and usage["prefill_tokens"] - before["prefill_tokens"] == len(tokens)
    assert missing == 0  # the whole vocabulary: every candidate listed
    # the trainer's logprob of each answer symbol at its marker equals the sampler's
    out = client.forward([decision_datum(tokenizer, fmt, RECORD)], "cross_entropy").result()
    logp_T = out.loss_fn_outputs[0]["logprobs"].to_torch()
    for q, p, logp_C in zip(RECORD.questions, positions, per_q):
        assert logp_C[q.labels().index(q.answer)] == pytest.approx(float(logp_T[p - 1]), abs=1e-4)
    (decisions,) = decide(sampler, tokenizer, [RECORD], temperature=2.0, topk=0)
    assert [d.question.name for d in decisions] == ["team", "urgent", "priority"]
    assert all(sum(d.probs.values()) == pytest.approx(1.0) for d in decisions)
    assert decisions[1].p_yes == decisions[1].probs["yes"]
    assert 1 <= decisions[2].expected_score <= 5


def test_written_reading_answers_each_question_after_its_own_earlier_answers(service, tokenizer):
    client = service.create_full_training_client(TINY, seed=0)
    sampler = client.save_weights_and_get_sampling_client()
    fmt = DecisionFormat.for_tokenizer(tokenizer)
    before = dict(sampler.get_usage())
    (per_q,), missing = read_written(sampler, tokenizer, fmt, [RECORD], topk=0)
    assert sampler.get_usage()["requests"] - before["requests"] == len(RECORD.questions)  # one pass per question
    assert missing == 0
    (marked,), _ = read_logprobs(sampler, tokenizer, fmt, [RECORD], topk=0)
    assert per_q[0] == pytest.approx(marked[0], abs=1e-4)  # nothing is written before the first question

    def trainer_logp(first: str) -> float:
        """The trainer's logprob of the second question's gold symbol after `first` written as the first answer."""
        tokens, positions = encode_record(tokenizer, fmt, RECORD, [first])
        gold = fmt.symbol_ids[RECORD.questions[1].answer]
        out = client.forward([marker_datum(tokens, [positions[1]], [gold])], "cross_entropy").result()
        return float(out.loss_fn_outputs[0]["logprobs"].to_torch()[positions[1] - 1])

    own = RECORD.questions[0].labels()[int(np.argmax(per_q[0]))]
    other = next(lb for lb in RECORD.questions[0].labels() if lb != own)
    gold_index = RECORD.questions[1].labels().index(RECORD.questions[1].answer)
    assert per_q[1][gold_index] == pytest.approx(trainer_logp(own), abs=1e-4)  # after its own answer
    assert per_q[1][gold_index] != pytest.approx(trainer_logp(other), abs=1e-4)  # which the reading depends on
