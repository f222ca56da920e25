"""Group advantages against hand-computed values."""

import math

import pytest

from arl.advantages import batch_advantages, belief_credit, group_advantages, is_degenerate


def test_group_advantages_center_on_the_group_mean():
    # mean = 0.5 -> r - 0.5
    assert group_advantages([1.0, 0.0, 0.0, 1.0]) == [0.5, -0.5, -0.5, 0.5]
    # mean = 0.25
    assert group_advantages([1, 0, 0, 0]) == [0.75, -0.25, -0.25, -0.25]
    # non-binary rewards: mean = 2 -> [-1, 0, 1]
    assert group_advantages([1.0, 2.0, 3.0]) == [-1.0, 0.0, 1.0]


def test_group_advantages_std_scale_uses_sample_std():
    # centered +-0.5, sample std = sqrt(4 * 0.25 / 3) = 1/sqrt(3) -> A = 0.5 * sqrt(3) = 0.8660...
    a_G = group_advantages([1.0, 0.0, 0.0, 1.0], scale="std", eps=0.0)
    assert a_G == pytest.approx([0.8660254, -0.8660254, -0.8660254, 0.8660254])
    # [1, 2, 3]: centered [-1, 0, 1], sample std = sqrt(2 / 2) = 1, eps = 1e-6
    assert group_advantages([1.0, 2.0, 3.0], scale="std") == pytest.approx([-1 / (1 + 1e-6), 0.0, 1 / (1 + 1e-6)])


def test_group_advantages_sum_to_zero():
    a_G = group_advantages([0.3, 0.9, 0.1, 0.7, 0.7])
    assert math.fsum(a_G) == pytest.approx(0.0, abs=1e-12)


def test_single_sample_and_equal_rewards_give_zero():
    assert group_advantages([1.0]) == [0.0]
    assert group_advantages([1.0], scale="std") == [0.0]
    assert group_advantages([1.0, 1.0, 1.0], scale="std") == [0.0, 0.0, 0.0]


def test_bad_arguments_name_the_field():
    with pytest.raises(ValueError, match="scale"):
        group_advantages([1.0, 0.0], scale="mean")
    with pytest.raises(ValueError, match="rewards_G"):
        group_advantages([])
    with pytest.raises(ValueError, match="rewards_BG"):
        batch_advantages([])
    with pytest.raises(ValueError, match="scale"):
        batch_advantages([[1.0, 1.0]], scale="z")


def test_is_degenerate():
    assert is_degenerate([1.0, 1.0, 1.0, 1.0])
    assert is_degenerate([0.0, 0.0])
    assert is_degenerate([0.5])
    assert not is_degenerate([1.0, 0.0, 1.0])
    assert is_degenerate([0.1, 0.1 + 1e-15])
    assert not is_degenerate([0.1, 0.1 + 1e-15], tol=0.0)


def test_batch_advantages_zero_degenerate_groups_and_count_them():
    rewards_BG = [[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [0.0, 1.0]]
    advantages_BG, frac_degenerate = batch_advantages(rewards_BG)
    assert advantages_BG == [[0.75, -0.25, -0.25, -0.25], [0.0] * 4, [0.0] * 4, [-0.5, 0.5]]
    assert frac_degenerate == 0.5


def test_batch_advantages_give_exact_zeros_for_equal_rewards():
    # 0.1 - mean([0.1] * 3) is rounding noise (-1.4e-17), larger still once divided by std + eps
    assert batch_advantages([[0.1, 0.1, 0.1]])[0] == [[0.0, 0.0, 0.0]]
    advantages_BG, frac_degenerate = batch_advantages([[0.1, 0.1, 0.1], [0.0, 2.0]], scale="std")
    assert advantages_BG[0] == [0.0, 0.0, 0.0]
    # [0, 2]: centered [-1, 1], sample std = sqrt(2) -> -+1/sqrt(2)
    assert advantages_BG[1] == pytest.approx([-1 / math.sqrt(2), 1 / math.sqrt(2)])
    assert frac_degenerate == 0.5


def test_sequence_scales_by_hand():
    from arl.advantages import sequence_scales

    assert sequence_scales([2, 3, 5], "token_mean", n_rollouts=8, max_tokens=10) == pytest.approx([0.1, 0.1, 0.1])
    assert sequence_scales([2, 4], "seq_mean", n_rollouts=8, max_tokens=10) == pytest.approx([1 / 16, 1 / 32])
    assert sequence_scales([2, 4], "constant", n_rollouts=8, max_tokens=10) == pytest.approx([1 / 80, 1 / 80])
    with pytest.raises(ValueError, match="normalizer"):
        sequence_scales([2], "sum", 1, 1)


def test_keep_group_needs_some_right_and_some_wrong():
    from arl.advantages import keep_group

    assert keep_group([True, False, False]) and not keep_group([True, True]) and not keep_group([False, False])


def test_kl_shaped_advantages_subtract_the_log_ratio():
    from arl.advantages import kl_shaped_advantages

    assert kl_shaped_advantages(1.0, [-1.0, -2.0], [-1.5, -2.0], kl_coef=0.2) == pytest.approx([0.9, 1.0])


def test_reverse_kl_advantages_by_hand():
    from arl.advantages import reverse_kl_advantages

    student, teacher = [-1.0, -2.0, -0.5], [-0.5, -2.5, -0.5]
    # -beta * (s - t) = -(s - t): [0.5, -0.5, 0.0]
    assert reverse_kl_advantages(student, teacher) == pytest.approx([0.5, -0.5, 0.0])
    assert reverse_kl_advantages(student, teacher, beta=2.0) == pytest.approx([1.0, -1.0, 0.0])
    # discount 0.5: A_2 = 0, A_1 = -0.5 + 0.5 * 0 = -0.5, A_0 = 0.5 + 0.5 * -0.5 = 0.25
    assert reverse_kl_advantages(student, teacher, discount=0.5) == pytest.approx([0.25, -0.5, 0.0])
    with pytest.raises(ValueError, match="score the teacher on exactly"):
        reverse_kl_advantages([-1.0], [-1.0, -2.0])


def test_belief_credit_by_hand():
    # b0 = 0.5 (logit 0), gamma 0.5, evidence [2, -1, 0]: C = [2, 0, 0], B = [sigmoid(2), 0.5, 0.5],
    # dB = [0.3808, -0.3808, 0], credit (A > 0) z-scored = [1.2247, -1.2247, 0] -> w = [1.2, 0.8, 1.0] (clipped)
    out = belief_credit(1.0, [2.0, -1.0, 0.0], b0=0.5, gamma=0.5, bound=0.2, lam=0.5)
    s2 = 1 / (1 + math.exp(-2))
    assert out["delta_b"] == pytest.approx([s2 - 0.5, 0.5 - s2, 0.0])
    assert out["weight"] == pytest.approx([1.2, 0.8, 1.0])
    assert out["adv"] == pytest.approx([1.1, 0.9, 1.0])
    # a losing trajectory: the turn that lowered the belief gets more of the blame
    assert belief_credit(-2.0, [2.0, -1.0, 0.0], b0=0.5, gamma=0.5)["adv"] == pytest.approx([-1.8, -2.2, -2.0])
    # |z| = sqrt(3/2) > 1 is clipped whatever the bound: lam 1, bound 0.1 gives w = [1.1, 0.9, 1.0]
    assert belief_credit(1.0, [2.0, -1.0, 0.0], b0=0.5, gamma=0.5, bound=0.1, lam=1.0)["adv"] == \
        pytest.approx([1.1, 0.9, 1.0])
    # evidence [2, -2, 0, 2], gamma 0: B = [s(2), s(-2), 1/2, s(2)], dB = [d, -2d, d, d] (d = s(2) - 1/2),
    # mean d/4, population std d sqrt(27)/4: z = [1/sqrt(3), -sqrt(3), 1/sqrt(3), 1/sqrt(3)]; bound 0.2 clips the second
    w = 1 + 0.2 / math.sqrt(3)
    assert belief_credit(1.0, [2.0, -2.0, 0.0, 2.0], b0=0.5, gamma=0.0, bound=0.2, lam=1.0)["weight"] == \
        pytest.approx([w, 0.8, w, w], rel=1e-5)


def test_belief_credit_b0_is_clipped_and_gamma_carries_evidence():
    # b0 = 0 is clipped to b0_eps = 0.05; a single turn has z = 0: its weight is 1
    out = belief_credit(1.0, [1.0], b0=0.0)
    prior = math.log(0.05 / 0.95)
    assert out["delta_b"] == pytest.approx([1 / (1 + math.exp(-(prior + 1.0))) - 0.05])
    assert out["adv"] == [1.0] and out["weight"] == [1.0]
    # gamma 1: C_t is the running sum; evidence [1, 1] gives B = sigmoid(1), sigmoid(2) from b0 = 0.5
    d = belief_credit(1.0, [1.0, 1.0], b0=0.5, gamma=1.0)["delta_b"]
    s1, s2 = (1 / (1 + math.exp(-x)) for x in (1.0, 2.0))
    assert d == pytest.approx([s1 - 0.5, s2 - s1])


def test_belief_credit_never_flips_the_sign_and_lambda_zero_is_grpo():
    rng = __import__("random").Random(0)
    for _ in range(200):
        adv = rng.uniform(-3, 3)
        evidence = [rng.gauss(0, 5) for _ in range(rng.randint(1, 12))]
        for bound, lam in ((0.2, 0.5), (1.0, 1.0), (1.0, 0.5)):
            out = belief_credit(adv, evidence, b0=rng.random(), bound=bound, lam=lam)
            assert all(a * adv >= 0 for a in out["adv"])
            assert all(1 - lam * bound - 1e-12 <= m <= 1 + lam * bound + 1e-12 for m in out["multiplier"])
        assert belief_credit(adv, evidence, b0=0.3, lam=0.0)["adv"] == pytest.approx([adv] * len(evidence))
    assert belief_credit(0.0, [1.0, -1.0], b0=0.5)["adv"] == [0.0, 0.0]


@pytest.mark.parametrize("kw", [dict(bound=1.5), dict(lam=-0.1), dict(lam=1.2), dict(b0_eps=0.0)])
def test_belief_credit_rejects_ranges_that_could_flip_the_sign(kw):
    with pytest.raises(ValueError, match="must be in"):
        belief_credit(1.0, [0.5], b0=0.5, **kw)


def test_tempo_targets_by_hand():
    from arl.advantages import tempo_targets

    # branches: won (terminal), boundary with V=0.5, boundary with V=0.25, lost-by-budget terminal (V ignored)
    returns_N, target, adv_N = tempo_targets([1.0, 0.0, 0.0, 0.0], [0.9, 0.5, 0.25, 0.75], [True, False, False, True])
    assert returns_N == [1.0, 0.5, 0.25, 0.0]
    assert target == 0.4375  # (1 + 0.5 + 0.25 + 0) / 4
    assert adv_N == [0.5625, 0.0625, -0.1875, -0.4375]
    # all terminal: plain r - mean (the whole-trajectory GRPO control)
    assert tempo_targets([1.0, 0.0], [0.3, 0.3], [True, True]) == ([1.0, 0.0], 0.5, [0.5, -0.5])
    # returns that tie: exact zeros, target still their value
    assert tempo_targets([0.0, 0.0], [0.3, 0.3], [False, False]) == ([0.3, 0.3], 0.3, [0.0, 0.0])
    with pytest.raises(ValueError, match="one of each per branch"):
        tempo_targets([1.0], [0.0, 0.0], [True])


def test_critic_rewards_by_hand():
    from arl.advantages import critic_rewards

    # G = 0.5: |0.75 - 0.5| = 0.25, |0.5 - 0.5| = 0, unreadable -> -1, |0 - 0.5| = 0.5
    assert critic_rewards([0.75, 0.5, None, 0.0], 0.5) == [-0.25, 0.0, -1.0, -0.5]
    # R_max = 2 halves every readable error
    assert critic_rewards([1.0, None], 0.0, r_max=2.0) == [-0.5, -1.0]
    with pytest.raises(ValueError, match="r_max"):
        critic_rewards([0.5], 0.5, r_max=0.0)
