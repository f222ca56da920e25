"""The update step (`arl.rl.update`): the equivalence claims `arl compare` states, checked both through
each chapter's `same_update` and numerically on real runs; DAPO's dynamic sampling; the KL penalty paths."""

from dataclasses import asdict, replace

import pytest

from arl import config
from arl.client import TrainingClient
from arl.recipes import load
from arl.report.compare import NOT_UPDATE
from arl.rewards import boxed_reward
from arl.track import RunDir


def cfg_of(chapter, **overrides):
    recipe = load(chapter)
    return config.resolve(recipe.Config, recipe.PRESETS, "smoke", {k: str(v) for k, v in overrides.items()})


def test_on_policy_losses_are_the_same_update():
    same, base = load("grpo").same_update, cfg_of("grpo")
    assert same(base, replace(base, loss_fn="cispo"))
    assert same(base, replace(base, loss_fn="ppo"))
    assert same(replace(base, loss_fn="ppo"), replace(base, loss_fn="ppo", clip_high_threshold=1.28))


def test_what_is_not_the_same_update():
    same, base = load("grpo").same_update, cfg_of("grpo")
    # off-policy mini-batches: the ratio leaves 1 and the losses differ
    off = replace(base, minibatches=2)
    assert not same(off, replace(off, loss_fn="cispo"))
    # another reduction, a KL term, or anything outside the loss
    assert not same(base, replace(base, normalizer="constant"))
    assert not same(base, replace(base, normalizer="seq_mean"))
    assert not same(base, replace(base, kl_coef=0.1))
    assert not same(base, replace(base, loss_fn="cispo", learning_rate=1e-3))
    # a ppo clip range that excludes 1 clips everything, even on-policy
    assert not same(replace(base, loss_fn="ppo"), replace(base, loss_fn="ppo", clip_high_threshold=0.99))


def test_gspo_sequence_ratio_equals_token_level_with_sequence_means_on_policy():
    same, seq = load("gspo").same_update, cfg_of("gspo", minibatches=1)
    assert same(seq, replace(seq, ratio_level="token"))
    assert not same(replace(seq, minibatches=2), replace(seq, minibatches=2, ratio_level="token"))
    assert not same(seq, replace(seq, ratio_level="token", normalizer="token_mean"))


def test_dapo_clip_higher_alone_is_the_same_update_on_policy():
    same, grpo_preset = load("dapo").same_update, cfg_of("dapo", algorithm="grpo")
    assert same(grpo_preset, replace(grpo_preset, clip_high_threshold=1.28))
    assert not same(grpo_preset, replace(grpo_preset, normalizer="token_mean"))
    assert not same(grpo_preset, replace(grpo_preset, dynamic_sampling=True))
    assert not same(grpo_preset, cfg_of("dapo", algorithm="dapo"))


def run_smoke(chapter, tmp_path, name, **overrides):
    """An in-process smoke run; its rows without what differs between equivalent losses (NOT_UPDATE)."""
    recipe, cfg = load(chapter), cfg_of(chapter, **overrides)
    run = RunDir.create(tmp_path, chapter, name, asdict(cfg))
    recipe.main(cfg, run)
    return run, [{k: v for k, v in r.items() if not k.startswith(NOT_UPDATE)} for r in run.read_metrics()]


def test_equivalent_losses_give_identical_runs(tmp_path):
    runs = {loss: run_smoke("grpo", tmp_path, loss, loss_fn=loss, steps=3)[1]
            for loss in ("importance_sampling", "cispo", "ppo")}
    assert sum(r.get("train/datums", 0) for r in runs["cispo"]) > 0  # the runs did train
    assert runs["importance_sampling"] == runs["cispo"] == runs["ppo"]
    different = run_smoke("grpo", tmp_path, "std", steps=3, adv_scale="std")[1]
    assert different != runs["importance_sampling"]


def test_dynamic_sampling_trains_only_on_mixed_groups_within_its_budget(tmp_path, monkeypatch):
    trained = []  # the completion tokens of every datum the client was asked to train on
    real = TrainingClient.forward_backward

    def recording(self, data, *args, **kwargs):
        trained.extend(tuple(d.loss_fn_inputs["target_tokens"].tolist()) for d in data)
        return real(self, data, *args, **kwargs)
    monkeypatch.setattr(TrainingClient, "forward_backward", recording)
    G = 4
    run, rows = run_smoke("dapo", tmp_path, "ds", steps=4, batch_prompts=3, group_size=G, max_candidate_multiplier=2.0)
    steps = [r for r in rows if r["step"] > 0]
    assert len(steps) == 4
    assert all(r["sampling/candidate_groups"] <= 6 and r["sampling/effective_groups"] <= 3 for r in steps)
    assert any(r["sampling/candidate_groups"] > 3 for r in steps)  # refills happened
    assert trained and sum(r["train/datums"] for r in steps) == len(trained)
    groups = {}  # each sampled completion's group: its step's rows come G at a time, one group after another
    for step in range(1, 5):
        step_rows = run.read_rollouts(step)
        for b in range(0, len(step_rows), G):
            group = step_rows[b:b + G]
            for r in group:
                groups.setdefault(tuple(r["tokens"]), []).append([boxed_reward(x["completion"], x["answer"]) == 1.0
                                                                   for x in group])
    for targets in trained:  # a completion can be sampled in several groups: one of them must be mixed
        candidates = [c for tokens, cs in groups.items() if targets[-len(tokens):] == tokens for c in cs]
        assert any(0 < sum(c) < len(c) for c in candidates)  # only groups with some right and some wrong answers train


def test_without_dynamic_sampling_one_round_and_no_refill(tmp_path):
    _, rows = run_smoke("dapo", tmp_path, "grpo", algorithm="grpo", steps=2)
    steps = [r for r in rows if r["step"] > 0]
    assert len(steps) == 2
    assert all(r["sampling/candidate_groups"] == 2 and r["sampling/partial_batch"] == 0 for r in steps)


@pytest.mark.parametrize("estimator", ["k1", "k3"])
def test_kl_penalty_starts_at_zero_against_the_start_weights(tmp_path, estimator):
    _, rows = run_smoke("grpo", tmp_path, estimator, steps=2, kl_coef=0.1, kl_estimator=estimator)
    first = next(r for r in rows if "kl/k1" in r)
    assert abs(first["kl/k1"]) < 1e-4  # the reference is the policy itself before the first update
    assert first["train/datums"] > 0


def test_request_seeds_by_hand_and_their_ranges():
    from arl.rollout.seeds import branch_request, request_seed

    assert request_seed(0, 0, 0) == 0
    assert request_seed(1, 0, 0) == 2 ** 47 and request_seed(0, 1, 0) == 2 ** 27 and request_seed(0, 0, 5) == 5
    assert request_seed(3, 2, 7) == (3 * 2 ** 20 + 2) * 2 ** 27 + 7
    assert request_seed(2 ** 16 - 1, 2 ** 20 - 1, 2 ** 27 - 1) == 2 ** 63 - 1
    assert branch_request(1, 2, 3) == (1 * 2 ** 10 + 2) * 2 ** 10 + 3
    with pytest.raises(ValueError, match="step=1048576"):
        request_seed(0, 2 ** 20, 0)
    with pytest.raises(ValueError, match="seed=-1"):
        request_seed(-1, 0, 0)
    with pytest.raises(ValueError, match="branch=1024"):
        branch_request(0, 0, 1024)


def test_no_two_requests_of_a_run_share_a_seed():
    """The formula the old one failed: prompt 1000 of step 0 and prompt 0 of step 1 had one seed."""
    from arl.rollout.seeds import branch_request, request_seed

    singles = {request_seed(s, step, i) for s in range(3) for step in range(4) for i in range(1200)}
    assert len(singles) == 3 * 4 * 1200
    turns = {request_seed(0, step) + branch_request(t, g, b) for step in range(3) for t in range(4) for g in range(16)
             for b in range(16)}
    assert len(turns) == 3 * 4 * 16 * 16


@pytest.mark.parametrize("n", [7, 7919, 2000])
def test_draw_visits_every_item_once_per_epoch(n):
    """Each epoch of the prompt stream is a permutation, whatever the length (the old `index * 7919 % n`
    drew one item forever when 7919 divided n)."""
    from arl.rl.batch import draw

    items = list(range(n))
    first, second = [draw(items, i) for i in range(n)], [draw(items, n + i) for i in range(n)]
    assert sorted(first) == items and sorted(second) == items and first != second
    assert [draw(items, i) for i in range(n)] == first  # fixed: the same for every run


def test_group_metrics_by_hand():
    """Truncation is the share stopped at max_tokens; entropy is -mean log pi over every sampled token."""
    import math

    from arl.rl.batch import group_metrics
    from arl.types import SampledSequence

    seqs = [SampledSequence("stop", [1, 2], [math.log(0.5), math.log(0.25)]),
            SampledSequence("length", [3, 4, 5], [math.log(0.5)] * 3),
            SampledSequence("stop", [6], [0.0])]
    m = group_metrics([[1.0, 0.0, 1.0]], [seqs], [], 1.0, 3.0)
    assert m["rollout/truncated_frac"] == pytest.approx(1 / 3)
    assert m["rollout/entropy"] == pytest.approx((math.log(2) + math.log(4) + 3 * math.log(2) + 0.0) / 6)
    assert m["rollout/len_mean"] == 2.0 and m["reward/mean"] == pytest.approx(2 / 3)
