"""The policy-update chapters' shared step: the equivalence claims `arl compare` states, checked both
through `same_update` and numerically on real runs; DAPO's dynamic sampling; the KL penalty paths."""

from dataclasses import replace

import pytest

from arl import config, policy
from arl.recipes import load
from arl.report.compare import NOT_UPDATE
from arl.track import RunDir


def cfg_of(chapter, **overrides):
    recipe = load(chapter)
    return config.resolve(recipe.Config, recipe.PRESETS, "smoke", {k: str(v) for k, v in overrides.items()})


def test_on_policy_losses_are_the_same_update():
    base = cfg_of("grpo")
    assert policy.same_update(base, replace(base, loss_fn="cispo"))
    assert policy.same_update(base, replace(base, loss_fn="ppo"))
    assert policy.same_update(replace(base, loss_fn="ppo"), replace(base, loss_fn="ppo", clip_high_threshold=1.28))


def test_what_is_not_the_same_update():
    base = cfg_of("grpo")
    # off-policy mini-batches: the ratio leaves 1 and the losses differ
    off = replace(base, minibatches=2)
    assert not policy.same_update(off, replace(off, loss_fn="cispo"))
    # another reduction, a KL term, or anything outside the loss
    assert not policy.same_update(base, replace(base, normalizer="constant"))
    assert not policy.same_update(base, replace(base, normalizer="seq_mean"))
    assert not policy.same_update(base, replace(base, kl_coef=0.1))
    assert not policy.same_update(base, replace(base, loss_fn="cispo", learning_rate=1e-3))
    # a ppo clip range that excludes 1 clips everything, even on-policy
    assert not policy.same_update(replace(base, loss_fn="ppo"), replace(base, loss_fn="ppo", clip_high_threshold=0.99))


def test_gspo_sequence_ratio_equals_token_level_with_sequence_means_on_policy():
    gspo = load("gspo")
    seq = cfg_of("gspo", minibatches=1)
    assert gspo.same_update(seq, replace(seq, ratio_level="token"))
    assert not gspo.same_update(replace(seq, minibatches=2), replace(seq, minibatches=2, ratio_level="token"))
    assert not gspo.same_update(seq, replace(seq, ratio_level="token", normalizer="token_mean"))


def test_dapo_clip_higher_alone_is_the_same_update_on_policy():
    dapo = load("dapo")
    grpo_preset = cfg_of("dapo", algorithm="grpo")
    assert dapo.same_update(grpo_preset, replace(grpo_preset, clip_high_threshold=1.28))
    assert not dapo.same_update(grpo_preset, replace(grpo_preset, normalizer="token_mean"))
    assert not dapo.same_update(grpo_preset, replace(grpo_preset, dynamic_sampling=True))
    assert not dapo.same_update(grpo_preset, cfg_of("dapo", algorithm="dapo"))


def mixed_reward(text, answer):
    """A stand-in verifier that gives the smoke model's groups both right and wrong answers."""
    return float(len(text) % 3 == 0)


def run_smoke(chapter, tmp_path, name, monkeypatch, **overrides):
    recipe = load(chapter)
    monkeypatch.setattr(recipe, "boxed_reward", mixed_reward)
    cfg = cfg_of(chapter, **overrides)
    from dataclasses import asdict
    run = RunDir.create(tmp_path, chapter, name, asdict(cfg))
    recipe.main(cfg, run)
    return [{k: v for k, v in r.items() if not k.startswith(NOT_UPDATE)} for r in run.read_metrics()]


def test_equivalent_losses_give_identical_runs(tmp_path, monkeypatch):
    runs = {loss: run_smoke("grpo", tmp_path, loss, monkeypatch, loss_fn=loss, steps=3, group_size=6)
            for loss in ("importance_sampling", "cispo", "ppo")}
    assert sum(r.get("train/datums", 0) for r in runs["cispo"]) > 0  # the runs did train
    assert runs["importance_sampling"] == runs["cispo"] == runs["ppo"]
    different = run_smoke("grpo", tmp_path, "std", monkeypatch, steps=3, group_size=6, adv_scale="std")
    assert different != runs["importance_sampling"]


def test_dynamic_sampling_trains_only_on_mixed_groups_within_its_budget(tmp_path, monkeypatch):
    trained, sampled = [], []
    real_step, real_rows = policy.policy_step, policy.rollout_rows
    monkeypatch.setattr(policy, "policy_step", lambda client, cfg, rollouts, *a: trained.append(list(rollouts)) or
                        real_step(client, cfg, rollouts, *a))
    monkeypatch.setattr(policy, "rollout_rows", lambda problems, groups, *a: sampled.append((problems, groups)) or
                        real_rows(problems, groups, *a))
    rows = run_smoke("dapo", tmp_path, "ds", monkeypatch, steps=4, batch_prompts=3, group_size=4,
                     max_candidate_multiplier=2.0)
    steps = [r for r in rows if r["step"] > 0]
    assert all(r["sampling/candidate_groups"] <= 6 and r["sampling/effective_groups"] <= 3 for r in steps)
    assert any(r["sampling/candidate_groups"] > 3 for r in steps)  # refills happened
    assert trained
    for batch in trained:
        step = next(i for i, (_, groups) in enumerate(sampled)
                    if any(s.tokens == batch[0].tokens for g in groups for s in g))
        problems, groups = sampled[step]
        for r in batch:
            group = next(g for g in groups if any(s.tokens == r.tokens and s.logprobs == r.logprobs for s in g))
            correct = [mixed_reward(s.text, None) == 1.0 for s in group]
            assert 0 < sum(correct) < len(correct)


def test_without_dynamic_sampling_one_round_and_no_refill(tmp_path, monkeypatch):
    rows = run_smoke("dapo", tmp_path, "grpo", monkeypatch, algorithm="grpo", steps=2)
    assert all(r["sampling/candidate_groups"] == 2 and r["sampling/partial_batch"] == 0
               for r in rows if r["step"] > 0)


@pytest.mark.parametrize("estimator", ["k1", "k3"])
def test_kl_penalty_starts_at_zero_against_the_start_weights(tmp_path, monkeypatch, estimator):
    rows = run_smoke("grpo", tmp_path, estimator, monkeypatch, steps=2, group_size=6, kl_coef=0.1, kl_estimator=estimator)
    first = next(r for r in rows if "kl/k1" in r)
    assert abs(first["kl/k1"]) < 1e-4  # the reference is the policy itself before the first update
    assert first["train/datums"] > 0
