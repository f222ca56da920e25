"""Group advantage estimators: pure functions from the rewards of a group of samples to advantages.

GRPO samples G completions of the same prompt and uses the group itself as the baseline, instead
of a learned value function (DeepSeekMath, Shao et al. 2024, sec. 4.1). Suffixes carry shapes:
`_G` one group, `_BG` a batch of B groups (groups may differ in size).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

SCALES = ("none", "std")


def _check_scale(scale: str) -> None:
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")


def _check_group(rewards_G: Sequence[float]) -> None:
    if len(rewards_G) == 0:
        raise ValueError("rewards_G is empty: a group needs at least one reward")


def group_advantages(rewards_G: Sequence[float], scale: str = "none", eps: float = 1e-6) -> list[float]:
    """Advantages of one group: A_i = r_i - mean(r), or (r_i - mean(r)) / (std(r) + eps) with scale="std".

    - scale="none": the reference lab's GRPO and Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like
      Training", sec. 3.1), which drop the std because dividing by it up-weights groups that are
      almost all right or almost all wrong (a question-difficulty bias).
    - scale="std": DeepSeekMath GRPO outcome supervision (sec. 4.1.2), A_i = (r_i - mean) / std. The
      std is the sample std (N - 1), as in the reference lab's DAPO and GSPO chapters and TRL; `eps`
      keeps an all-equal group finite.
    """
    _check_scale(scale)
    _check_group(rewards_G)
    n = len(rewards_G)
    mean = math.fsum(rewards_G) / n
    centered_G = [r - mean for r in rewards_G]
    if scale == "none":
        return centered_G
    std = math.sqrt(math.fsum(c * c for c in centered_G) / (n - 1)) if n > 1 else 0.0
    return [c / (std + eps) for c in centered_G]


def is_degenerate(rewards_G: Sequence[float], tol: float = 1e-12) -> bool:
    """True when all rewards are equal (within `tol`): every advantage is zero, so the group adds no
    gradient and only costs compute (DAPO, Yu et al. 2025, sec. 3.2 "dynamic sampling" filters them)."""
    _check_group(rewards_G)
    return max(rewards_G) - min(rewards_G) <= tol


def batch_advantages(rewards_BG: Sequence[Sequence[float]], scale: str = "none") -> tuple[list[list[float]], float]:
    """Advantages of every group, and the fraction of degenerate groups (logged as `frac_degenerate`).

    A degenerate group gets exact zeros rather than its computed values: r - mean carries rounding
    noise (0.1 - mean([0.1, 0.1, 0.1]) = -1.4e-17, -1.4e-11 after dividing by std + eps), and a
    non-zero advantage marks its tokens as active in the losses and their metrics.
    """
    _check_scale(scale)
    if len(rewards_BG) == 0:
        raise ValueError("rewards_BG is empty: a batch needs at least one group")
    advantages_BG = []
    n_degenerate = 0
    for rewards_G in rewards_BG:
        if is_degenerate(rewards_G):
            n_degenerate += 1
            advantages_BG.append([0.0] * len(rewards_G))
        else:
            advantages_BG.append(group_advantages(rewards_G, scale=scale))
    return advantages_BG, n_degenerate / len(rewards_BG)


NORMALIZERS = ("token_mean", "seq_mean", "constant")


def sequence_scales(lengths_K: Sequence[int], normalizer: str, n_rollouts: int, max_tokens: int) -> list[float]:
    """Per-sequence factor c_i that turns the built-in losses' token *sum* into the chosen reduction.

    The loss of a step is sum_i c_i sum_t l_it over the K trained sequences (lengths |y_i|):
    - "token_mean": c_i = 1 / sum_j |y_j|, every trained token weighs the same (DAPO, Yu et al. 2025,
      sec. 3.3 "token-level policy gradient loss"): long answers are not diluted.
    - "seq_mean": c_i = 1 / (|y_i| N), the mean over all N rollouts of each sequence's token mean (the
      GRPO objective, DeepSeekMath eq. 3; zero-advantage rollouts count in N).
    - "constant": c_i = 1 / (N max_tokens), a constant normaliser (Dr. GRPO, Liu et al. 2025, sec. 3.1),
      which removes GRPO's length bias: a wrong answer is not penalised less for being long.
    """
    if normalizer not in NORMALIZERS:
        raise ValueError(f"normalizer must be one of {NORMALIZERS}, got {normalizer!r}")
    if normalizer == "token_mean":
        total = sum(lengths_K)
        return [1.0 / total] * len(lengths_K)
    if normalizer == "seq_mean":
        return [1.0 / (n * n_rollouts) for n in lengths_K]
    return [1.0 / (n_rollouts * max_tokens)] * len(lengths_K)


def keep_group(correct_G: Sequence[bool]) -> bool:
    """DAPO's dynamic-sampling filter (Yu et al. 2025, sec. 3.2): keep a group only if 0 < #correct < G.

    Decided on correctness, not on the shaped reward: an all-wrong group whose answers differ only in
    their overlong penalty still teaches nothing about the task.
    """
    n_correct = sum(bool(c) for c in correct_G)
    return 0 < n_correct < len(correct_G)


def kl_shaped_advantages(adv: float, sampler_logprobs_T: Sequence[float], ref_logprobs_T: Sequence[float],
                         kl_coef: float) -> list[float]:
    """Per-token advantage with a k1 KL penalty in the reward: A_t = A - kl_coef * (logq_t - logref_t).

    The sampled log-ratio is an unbiased estimate of KL(pi || pi_ref) per token; putting it in the
    reward (as tinker-cookbook's `kl_penalty_coef` does) gives the gradient of the KL-regularised
    objective, which a k1 term in the loss would not (see `losses.kl_k1`).
    """
    if len(sampler_logprobs_T) != len(ref_logprobs_T):
        raise ValueError(f"kl_shaped_advantages: {len(sampler_logprobs_T)} sampler vs {len(ref_logprobs_T)} reference logprobs")
    return [adv - kl_coef * (q - r) for q, r in zip(sampler_logprobs_T, ref_logprobs_T)]


def reverse_kl_advantages(student_logprobs_T: Sequence[float], teacher_logprobs_T: Sequence[float], beta: float = 1.0,
                          discount: float = 0.0) -> list[float]:
    """On-policy distillation's per-token advantage (Agarwal et al. 2024, GKD; Thinking Machines' "On-policy
    distillation", 2025): the sampled reverse KL per token, negated and scaled,

        A_t = -beta * (log pi_student(y_t) - log pi_teacher(y_t))          (discount = 0)
        A_t = sum_{k >= t} discount^(k - t) * (-beta * kl_k)               (discount > 0)

    for tokens y_t sampled from the student. Pushing up tokens the teacher finds likelier than the
    student does minimises KL(student || teacher) along the student's own trajectories. With a
    discount each token is also credited with the KL of the tokens it led to (tinker-cookbook's
    `kl_discount_factor`). A single token's value can be positive or negative; only its expectation
    under the student is a KL and non-negative.
    """
    if len(student_logprobs_T) != len(teacher_logprobs_T):
        raise ValueError(f"reverse_kl_advantages: {len(student_logprobs_T)} student vs {len(teacher_logprobs_T)} "
                         "teacher logprobs: score the teacher on exactly the student's sampled tokens")
    if not 0.0 <= discount < 1.0:
        raise ValueError(f"discount={discount}: must be in [0, 1)")
    adv_T = [-beta * (s - t) for s, t in zip(student_logprobs_T, teacher_logprobs_T)]
    if discount:
        running = 0.0
        for i in range(len(adv_T) - 1, -1, -1):
            running = adv_T[i] + discount * running
            adv_T[i] = running
    return adv_T


def belief_credit(adv: float, evidence_T: Sequence[float], b0: float, gamma: float = 0.95, bound: float = 0.2,
                  lam: float = 0.5, b0_eps: float = 0.05, eps: float = 1e-6) -> dict[str, list[float]]:
    """AgentOPSD's turn-level credit (the reference lab's 09-AgentOPSD, after ZethWang/AgentOPSD): one
    trajectory's sequence advantage A spread over its T turns by a privileged self-teacher's evidence.

        e_t        = sum over turn t's action tokens of (log pi_teacher - log pi_student)   (given)
        C_t        = gamma C_{t-1} + e_t,   C_{-1} = 0
        B_t        = sigmoid(logit b0 + C_t),  b0 clipped to [b0_eps, 1 - b0_eps],  B_{-1} = b0
        dB_t       = B_t - B_{t-1}                         (how much turn t moved the belief of success)
        credit_t   = sign(A) dB_t,  z_t = (credit_t - mean_t) / (std_t + eps)  (population std)
        w_t        = clip(1 + bound z_t, 1 - bound, 1 + bound)
        A_t        = A ((1 - lam) + lam w_t)

    `b0` is the group's success rate. A winning trajectory's turns that raised the teacher's belief most
    get more of A, a losing one's turns that lowered it most get more of the blame. With bound <= 1 and
    lam <= 1 the multiplier (1 - lam) + lam w_t lies in [1 - lam bound, 1 + lam bound] >= 0, so a turn's
    advantage never has the opposite sign of A; lam = 0 is sequence-level GRPO (A_t = A).
    Returns {"adv": A_t, "delta_b": dB_t, "weight": w_t, "multiplier": (1 - lam) + lam w_t}.
    """
    if not 0.0 <= bound <= 1.0 or not 0.0 <= lam <= 1.0:
        raise ValueError(f"bound={bound}, lam={lam}: each must be in [0, 1] (so a turn's advantage keeps A's sign)")
    if not 0.0 < b0_eps < 0.5:
        raise ValueError(f"b0_eps={b0_eps}: must be in (0, 0.5)")
    if len(evidence_T) == 0:
        return {"adv": [], "delta_b": [], "weight": [], "multiplier": []}
    b0 = min(max(b0, b0_eps), 1.0 - b0_eps)
    prior = math.log(b0 / (1.0 - b0))
    running, previous, delta_T = 0.0, b0, []
    for e in evidence_T:
        running = gamma * running + e
        belief = 1.0 / (1.0 + math.exp(-(prior + running)))
        delta_T.append(belief - previous)
        previous = belief
    sign = (adv > 0) - (adv < 0)
    credit_T = [sign * d for d in delta_T]
    mean = math.fsum(credit_T) / len(credit_T)
    std = math.sqrt(math.fsum((c - mean) ** 2 for c in credit_T) / len(credit_T))
    weight_T = [min(max(1.0 + bound * (c - mean) / (std + eps), 1.0 - bound), 1.0 + bound) for c in credit_T]
    multiplier_T = [(1.0 - lam) + lam * w for w in weight_T]
    return {"adv": [adv * m for m in multiplier_T], "delta_b": delta_T, "weight": weight_T, "multiplier": multiplier_T}


def tempo_targets(segment_rewards_N: Sequence[float], endpoint_values_N: Sequence[float], terminal_N: Sequence[bool],
                  scale: str = "none") -> tuple[list[float], float, list[float]]:
    """TEMPO's one-macro-step TD signal for the N branches rolled from one start state (the TEMPO blog; the
    reference lab's 09-tempo `tempo.py`): (returns R_n, TD target G, actor advantages A_n), with

        R_n = r_n + V(e_n)          r_n the segment's reward, V(e_n) the critic's value of the branch's
                                    endpoint, V = 0 when the branch ended the episode (terminal_n)
        G   = mean_n R_n            the start state's value target (critic) and the actor's baseline
        A_n = R_n - G               (scale="std": divided by the sample std of R, as `group_advantages`)

    A group whose returns all tie gets exact zeros (as `batch_advantages`): it carries no signal."""
    if not len(segment_rewards_N) == len(endpoint_values_N) == len(terminal_N):
        raise ValueError(f"tempo_targets: {len(segment_rewards_N)} rewards, {len(endpoint_values_N)} endpoint values and "
                         f"{len(terminal_N)} terminal flags: give one of each per branch")
    returns_N = [r + (0.0 if done else v) for r, v, done in zip(segment_rewards_N, endpoint_values_N, terminal_N)]
    _check_group(returns_N)
    target = math.fsum(returns_N) / len(returns_N)
    adv_N = [0.0] * len(returns_N) if is_degenerate(returns_N) else group_advantages(returns_N, scale)
    return returns_N, target, adv_N


def critic_rewards(values_K: Sequence[float | None], target: float, r_max: float = 1.0) -> list[float]:
    """The reward of each of K critic samples at a start state (TEMPO; the reference lab's 09-tempo):

        c_k = -|V_k - G| / R_max        G the start state's TD target, R_max the largest segment return
        c_k = -1                        when sample k has no readable value (V_k None)

    so every readable value, however wrong, scores at least as well as an unreadable one (|V - G| <= R_max)."""
    if r_max <= 0:
        raise ValueError(f"r_max={r_max}: must be > 0 (the largest return a segment can have)")
    return [-1.0 if v is None else -abs(v - target) / r_max for v in values_K]
