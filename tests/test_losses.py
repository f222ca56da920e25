"""Tier 1: every built-in loss against values computed by hand."""

import math

import pytest
import torch

from arl import losses

# Three tokens; the middle one has zero advantage (a prompt position, say).
LOGP = torch.tensor([math.log(0.5), math.log(0.2), math.log(0.9)])
OLD = torch.tensor([math.log(0.4), math.log(0.2), math.log(0.6)])  # ratios 1.25, 1.0, 1.5
ADV = torch.tensor([1.0, 0.0, -2.0])
TARGETS = torch.tensor([5, 6, 7])


def test_cross_entropy_weighted_sum():
    w = torch.tensor([1.0, 0.0, 2.0])
    terms = losses.cross_entropy(LOGP, TARGETS, w)
    expected = -(1 * math.log(0.5) + 2 * math.log(0.9))
    assert terms.loss_N.sum().item() == pytest.approx(expected, rel=1e-6)
    assert terms.active_N.tolist() == [True, False, True]
    assert losses.cross_entropy(LOGP, TARGETS).loss_N.sum().item() == pytest.approx(-LOGP.sum().item())


def test_importance_sampling():
    terms = losses.importance_sampling(LOGP, TARGETS, OLD, ADV)
    # -(1.25 * 1) - (1.5 * -2) = -1.25 + 3 = 1.75
    assert terms.loss_N.sum().item() == pytest.approx(1.75, rel=1e-6)
    assert terms.stats_N["ratio"].tolist() == pytest.approx([1.25, 1.0, 1.5], rel=1e-6)


def test_importance_sampling_gradient_is_ratio_times_advantage():
    logp = LOGP.clone().requires_grad_(True)
    losses.importance_sampling(logp, TARGETS, OLD, ADV).loss_N.sum().backward()
    # d(-rho A)/dlogp = -rho A
    assert logp.grad.tolist() == pytest.approx([-1.25, 0.0, 3.0], rel=1e-6)


def test_ppo_clips_both_sides():
    logp = LOGP.clone().requires_grad_(True)
    terms = losses.ppo(logp, TARGETS, OLD, ADV, clip_low_threshold=0.8, clip_high_threshold=1.2)
    # token 0: A>0, rho 1.25 > 1.2 -> min(1.25, 1.2)*1 = 1.2, clipped (no grad)
    # token 2: A<0, rho 1.5 -> min(1.5*-2, 1.2*-2) = -3.0, the unclipped branch (grad flows)
    assert terms.loss_N.sum().item() == pytest.approx(-1.2 + 3.0, rel=1e-6)
    terms.loss_N.sum().backward()
    assert logp.grad.tolist() == pytest.approx([0.0, 0.0, 3.0], rel=1e-6)
    assert terms.stats_N["clip_frac_high"].tolist() == [1.0, 0.0, 0.0]
    assert terms.stats_N["clip_frac_low"].tolist() == [0.0, 0.0, 0.0]


def test_ppo_low_clip_with_negative_advantage():
    old = torch.tensor([math.log(0.8)])
    logp = torch.tensor([math.log(0.4)], requires_grad=True)  # rho = 0.5 < 0.8
    terms = losses.ppo(logp, TARGETS[:1], old, torch.tensor([-1.0]))
    assert terms.loss_N.item() == pytest.approx(0.8, rel=1e-6)  # -min(-0.5, -0.8) = 0.8
    terms.loss_N.sum().backward()
    assert logp.grad.item() == 0.0
    assert terms.stats_N["clip_frac_low"].item() == 1.0


def test_dapo_clip_higher_is_just_a_bound():
    terms = losses.ppo(LOGP, TARGETS, OLD, ADV, clip_high_threshold=1.28)
    assert terms.loss_N[0].item() == pytest.approx(-1.25, rel=1e-6)  # 1.25 < 1.28: not clipped


def test_cispo_weight_is_clipped_and_detached():
    logp = LOGP.clone().requires_grad_(True)
    terms = losses.cispo(logp, TARGETS, OLD, ADV, clip_low_threshold=0.0, clip_high_threshold=1.3)
    # weights: min(1.25,1.3)=1.25, 1.0, min(1.5,1.3)=1.3
    expected = -(1.25 * 1 * math.log(0.5)) - (1.3 * -2 * math.log(0.9))
    assert terms.loss_N.sum().item() == pytest.approx(expected, rel=1e-6)
    terms.loss_N.sum().backward()
    assert logp.grad.tolist() == pytest.approx([-1.25, 0.0, 2.6], rel=1e-6)  # clipped tokens keep a gradient
    assert terms.stats_N["clip_frac"].tolist() == [0.0, 0.0, 1.0]


def test_cispo_equals_importance_sampling_gradient_on_policy():
    logp = LOGP.clone().requires_grad_(True)
    losses.cispo(logp, TARGETS, LOGP.detach(), ADV).loss_N.sum().backward()
    g_cispo = logp.grad.clone()
    logp.grad = None
    losses.importance_sampling(logp, TARGETS, LOGP.detach(), ADV).loss_N.sum().backward()
    assert torch.allclose(g_cispo, logp.grad)


def test_dro_quadratic_penalty():
    terms = losses.dro(LOGP, TARGETS, OLD, ADV, beta=0.5)
    lr = [math.log(1.25), 0.0, math.log(1.5)]
    expected = -sum(a * lp - 0.25 * r * r for a, lp, r in zip(ADV.tolist(), LOGP.tolist(), lr))
    assert terms.loss_N.sum().item() == pytest.approx(expected, rel=1e-6)


def test_unknown_loss_and_config_key_are_named():
    with pytest.raises(ValueError, match="loss_fn='grpo'"):
        losses.get_loss("grpo", None)
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['clip_ratio'\].*clip_high_threshold"):
        losses.get_loss("ppo", {"clip_ratio": 0.2})
    spec, config = losses.get_loss("ppo", {"clip_high_threshold": 1.28})
    assert config == {"clip_low_threshold": 0.8, "clip_high_threshold": 1.28}


def test_dapo_clip_higher_is_ppo_with_a_wider_upper_bound():
    # ratio 1.25, A = +1: inside DAPO's 1.28, clipped by PPO's 1.2 (the objective stops at 1.2 * A)
    logp, old, adv = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.4)]), torch.tensor([1.0])
    ppo = losses.ppo(logp, None, old, adv)
    dapo = losses.ppo(logp, None, old, adv, clip_high_threshold=1.28)
    assert ppo.loss_N.item() == pytest.approx(-1.2) and ppo.stats_N["clip_frac_high"].item() == 1.0
    assert dapo.loss_N.item() == pytest.approx(-1.25) and dapo.stats_N["clip_frac_high"].item() == 0.0


def test_sequence_ratio_is_the_length_normalised_likelihood_ratio():
    logp = torch.tensor([math.log(0.5), math.log(0.2), math.log(0.9)])
    old = torch.tensor([math.log(0.4), math.log(0.2), math.log(0.6)])
    # (pi(y) / pi_old(y)) ** (1/|y|) = ((0.5 * 0.2 * 0.9) / (0.4 * 0.2 * 0.6)) ** (1/3) = 1.875 ** (1/3)
    assert losses.sequence_ratio(logp, old).item() == pytest.approx(1.875 ** (1 / 3), rel=1e-6)


def test_gspo_objective_by_hand():
    # sequence 1: s = exp(0.001) > 1 + 4e-4 with A = +1 -> clipped at 1.0004; sequence 2: s = 1, A = -2
    lp1, lq1 = torch.tensor([0.001, 0.001]) - 1.0, torch.tensor([-1.0, -1.0])
    lp2, lq2 = torch.tensor([-2.0]), torch.tensor([-2.0])
    logp = [lp1.clone().requires_grad_(True), lp2.clone().requires_grad_(True)]
    loss, m = losses.gspo(logp, [lq1, lq2], torch.tensor([1.0, -2.0]), n_sequences=4)
    assert loss.item() == pytest.approx(-(1.0004 * 1.0 + 1.0 * -2.0) / 4, rel=1e-6)
    assert m["gspo/seq_clip_frac"] == 0.5 and m["gspo/token_clip_frac"] == pytest.approx(2 / 3)
    loss.backward()
    assert logp[0].grad.abs().sum().item() == 0.0  # a clipped sequence gets no gradient at all
    # unclipped: d/dlogp_t of -(s * A) / N = -(s * A / |y|) / N = -(1 * -2 / 1) / 4
    assert logp[1].grad.tolist() == pytest.approx([0.5])


def _gspo_token_batch():
    """Two datums, concatenated: datum 0 = tokens 0-1 (ratios 1.25, 1.0, A = +1), datum 1 = token 2
    (ratio 1.5, A = -2) and token 3, a prompt position outside the ratio mask (its ratio 0.3 must not count)."""
    logp = torch.tensor([math.log(0.5), math.log(0.2), math.log(0.9), math.log(0.3)], requires_grad=True)
    old = torch.tensor([math.log(0.4), math.log(0.2), math.log(0.6), 0.0])
    adv = torch.tensor([1.0, 1.0, -2.0, 0.0])
    return logp, old, adv, torch.tensor([0, 0, 1, 1]), torch.tensor([1.0, 1.0, 1.0, 0.0])


def test_gspo_token_builtin_by_hand():
    logp, old, adv, datum, mask = _gspo_token_batch()
    terms = losses.gspo_token(logp, torch.zeros(4, dtype=torch.long), old, adv, datum, mask,
                              clip_low_threshold=0.8, clip_high_threshold=1.2)
    s0, s1 = math.sqrt(1.25), 1.5  # geometric means of the masked token ratios: (1.25 * 1.0) ** (1/2), 1.5
    assert terms.stats_N["seq_ratio"].tolist() == pytest.approx([s0, s0, s1, s1], rel=1e-6)
    # datum 0: s0 = 1.118 inside [0.8, 1.2] -> -(s0 * 1) per token; datum 1: A = -2, min(-3, -2.4) = -3, unclipped
    assert terms.loss_N.sum().item() == pytest.approx(-2 * s0 + 3.0, rel=1e-6)
    terms.loss_N.sum().backward()
    # each token: the sequence ratio's value times its own logp's gradient, d/dlogp_t = -s A
    assert logp.grad.tolist() == pytest.approx([-s0, -s0, 3.0, 0.0], rel=1e-6)
    assert terms.active_N.tolist() == [True, True, True, False]


def test_gspo_token_clips_whole_sequences():
    logp, old, adv, datum, mask = _gspo_token_batch()
    terms = losses.gspo_token(logp, torch.zeros(4, dtype=torch.long), old, adv, datum, mask,
                              clip_low_threshold=0.8, clip_high_threshold=1.1)
    # datum 0: s0 = 1.118 > 1.1 with A > 0 -> both tokens clipped at 1.1, no gradient
    assert terms.loss_N.sum().item() == pytest.approx(-2 * 1.1 + 3.0, rel=1e-6)
    terms.loss_N.sum().backward()
    assert logp.grad.tolist() == pytest.approx([0.0, 0.0, 3.0, 0.0], rel=1e-6)
    assert terms.stats_N["clip_frac"].tolist() == [1.0, 1.0, 0.0, 0.0]
    # without a mask the ratio runs over the tokens with an advantage: the same here
    no_mask = losses.gspo_token(logp.detach(), torch.zeros(4, dtype=torch.long), old, adv, datum, None, 0.8, 1.1)
    assert no_mask.loss_N.sum().item() == pytest.approx(-2 * 1.1 + 3.0, rel=1e-6)


def test_stable_reinforce_by_hand():
    # ratios 1.25, 1.0, 1.5; provenance marks tokens 0 and 1 as sampled, token 2 as a prompt token
    logp = LOGP.clone().requires_grad_(True)
    terms = losses.stable_reinforce(logp, TARGETS, OLD, ADV, torch.tensor([1.0, 1.0, 0.0]), clip_high_threshold=1.2)
    # only token 0 counts: -min(1.25, 1.2) * 1 * log 0.5
    assert terms.loss_N.sum().item() == pytest.approx(-1.2 * math.log(0.5), rel=1e-6)
    terms.loss_N.sum().backward()
    assert logp.grad.tolist() == pytest.approx([-1.2, 0.0, 0.0], rel=1e-6)  # the weight is detached
    assert terms.active_N.tolist() == [True, False, False]
    assert terms.stats_N["clip_frac"].tolist() == [1.0, 0.0, 1.0]


def test_stable_reinforce_is_truncated_importance_sampling_reinforce():
    logp = LOGP.clone().requires_grad_(True)
    terms = losses.stable_reinforce(logp, TARGETS, OLD, ADV, torch.ones(3), clip_high_threshold=1.4)
    # weights min(rho, 1.4) = 1.25, 1.0, 1.4: L = -(1.25 * 1 * log 0.5 + 1.4 * -2 * log 0.9)
    assert terms.loss_N.sum().item() == pytest.approx(-(1.25 * math.log(0.5) - 2.8 * math.log(0.9)), rel=1e-6)
    terms.loss_N.sum().backward()
    assert logp.grad.tolist() == pytest.approx([-1.25, 0.0, 2.8], rel=1e-6)


def test_new_builtins_are_registered_with_their_config_keys():
    assert losses.get_loss("gspo", {"clip_low_threshold": 0.9})[1] == {"clip_low_threshold": 0.9,
                                                                        "clip_high_threshold": 1 + 4e-4}
    assert losses.get_loss("stable_reinforce", None)[1] == {"clip_high_threshold": 2.0}
    with pytest.raises(ValueError, match="valid keys"):
        losses.get_loss("stable_reinforce", {"beta": 1.0})


def test_kl_estimators_by_hand():
    logp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    assert losses.kl_k1(logp, ref).item() == pytest.approx(math.log(2))
    # r = 0.25 / 0.5 = 0.5: k3 = 0.5 - 1 - log 0.5
    assert losses.kl_k3(logp, ref).item() == pytest.approx(0.5 - 1 - math.log(0.5))
    x = logp.clone().requires_grad_(True)
    losses.kl_k3(x, ref).backward()
    assert x.grad.item() == pytest.approx(1 - 0.5)  # d k3 / d logp = 1 - r
    assert losses.kl_k3(ref, ref).item() == 0.0
