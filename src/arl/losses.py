"""Built-in losses as pure tensor functions (the ones `forward_backward(loss_fn=...)` accepts).

Every function takes flat per-token tensors of one batch (shape `_N`, all datums' positions
concatenated) and returns a `LossTerms`: the per-token loss, whose **sum** is the loss (Tinker's
convention: no normalisation here, the caller's advantages or weights set the scale), and per-token
statistics that the engine averages over the active tokens of the whole call.

Notation: logp = log pi_theta(token) under the weights being trained, logq = the sampler's logprob
(`logprobs` input), ratio rho = exp(logp - logq), A = `advantages`, w = `weights`, sg = stop-gradient.

Besides `loss_fn_inputs`, a loss may take tensors the engine derives from the datums (`LossSpec.engine_inputs`):
`datum_N`, the index within the call of the datum each token belongs to (sequence-level losses), and
`sampled_N`, 1 where the datum's provenance (`Datum.with_provenance`) names a sampled token.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch


@dataclass
class LossTerms:
    loss_N: torch.Tensor
    """Per-token loss; the loss of the call is `loss_N.sum()`."""
    active_N: torch.Tensor
    """Bool mask of tokens that carry signal (non-zero advantage or weight); metrics average over it."""
    stats_N: dict[str, torch.Tensor] = field(default_factory=dict)
    """Per-token quantities reported as their mean over active tokens (e.g. `ratio`, `clip_frac`)."""


def cross_entropy(logp_N: torch.Tensor, target_tokens_N: torch.Tensor, weights_N: torch.Tensor | None = None) -> LossTerms:
    """Weighted negative log-likelihood: L = -sum_t w_t * logp_t (w defaults to 1).

    Supervised fine-tuning; prompt positions carry w = 0.
    """
    w_N = torch.ones_like(logp_N) if weights_N is None else weights_N
    return LossTerms(loss_N=-w_N * logp_N, active_N=w_N != 0)


def importance_sampling(
    logp_N: torch.Tensor, target_tokens_N: torch.Tensor, logprobs_N: torch.Tensor, advantages_N: torch.Tensor
) -> LossTerms:
    """Importance-weighted REINFORCE: L = -sum_t rho_t * A_t, rho_t = exp(logp_t - logq_t).

    Its gradient is -sum_t rho_t A_t grad logp_t, the policy gradient corrected for the sampler being
    a (slightly) different policy than the trainer. With rho = 1 (strictly on-policy) it is REINFORCE.
    """
    ratio_N = torch.exp(logp_N - logprobs_N)
    return LossTerms(
        loss_N=-ratio_N * advantages_N,
        active_N=advantages_N != 0,
        stats_N={"ratio": ratio_N.detach()},
    )


def ppo(
    logp_N: torch.Tensor,
    target_tokens_N: torch.Tensor,
    logprobs_N: torch.Tensor,
    advantages_N: torch.Tensor,
    clip_low_threshold: float = 0.8,
    clip_high_threshold: float = 1.2,
) -> LossTerms:
    """PPO clipped surrogate (Schulman et al. 2017, eq. 7), with absolute ratio bounds:

        L = -sum_t min(rho_t A_t, clip(rho_t, low, high) A_t)

    `clip_low_threshold` / `clip_high_threshold` are the ratio bounds themselves (1 - eps_low,
    1 + eps_high), so DAPO's clip-higher (Yu et al. 2025, sec. 3.1) is `clip_high_threshold=1.28`.
    A token is "clipped" when the clipped branch is the one the min picks and its gradient is zero.
    """
    ratio_N = torch.exp(logp_N - logprobs_N)
    clipped_N = torch.clamp(ratio_N, clip_low_threshold, clip_high_threshold)
    unclipped_obj_N = ratio_N * advantages_N
    clipped_obj_N = clipped_N * advantages_N
    active_N = advantages_N != 0
    clip_low_N = (ratio_N < clip_low_threshold) & (advantages_N < 0)
    clip_high_N = (ratio_N > clip_high_threshold) & (advantages_N > 0)
    return LossTerms(
        loss_N=-torch.minimum(unclipped_obj_N, clipped_obj_N),
        active_N=active_N,
        stats_N={
            "ratio": ratio_N.detach(),
            "clip_frac_low": clip_low_N.float(),
            "clip_frac_high": clip_high_N.float(),
            "clip_frac": (clip_low_N | clip_high_N).float(),
        },
    )


def cispo(
    logp_N: torch.Tensor,
    target_tokens_N: torch.Tensor,
    logprobs_N: torch.Tensor,
    advantages_N: torch.Tensor,
    clip_low_threshold: float = 0.0,
    clip_high_threshold: float = 4.0,
) -> LossTerms:
    """CISPO (MiniMax-M1, Chen et al. 2025, sec. 3.1): clip the importance weight, not the update.

        L = -sum_t sg(clip(rho_t, low, high)) * A_t * logp_t

    sg = stop-gradient. Unlike PPO no token loses its gradient; large ratios only get a bounded weight.
    With one on-policy update per batch (rho = 1 inside the bounds) its gradient equals
    `importance_sampling`'s.
    """
    ratio_N = torch.exp(logp_N - logprobs_N)
    weight_N = torch.clamp(ratio_N, clip_low_threshold, clip_high_threshold).detach()
    clipped_N = (ratio_N < clip_low_threshold) | (ratio_N > clip_high_threshold)
    return LossTerms(
        loss_N=-weight_N * advantages_N * logp_N,
        active_N=advantages_N != 0,
        stats_N={"ratio": ratio_N.detach(), "clipped_ratio": weight_N, "clip_frac": clipped_N.float()},
    )


def dro(
    logp_N: torch.Tensor,
    target_tokens_N: torch.Tensor,
    logprobs_N: torch.Tensor,
    advantages_N: torch.Tensor,
    beta: float = 0.05,
) -> LossTerms:
    """DRO (Richemond et al. 2024, eq. 5; Kimi k1.5 sec. 2.3): policy gradient with a quadratic penalty.

        L = -sum_t [ A_t * logp_t - beta/2 * (logp_t - logq_t)^2 ]

    The penalty keeps the learner near the sampling distribution, which makes off-policy data usable.
    The default beta is the value in Tinker's documentation example.
    """
    log_ratio_N = logp_N - logprobs_N
    return LossTerms(
        loss_N=-(advantages_N * logp_N - 0.5 * beta * log_ratio_N**2),
        active_N=advantages_N != 0,
        stats_N={"ratio": torch.exp(log_ratio_N).detach()},
    )


def gspo_token(
    logp_N: torch.Tensor,
    target_tokens_N: torch.Tensor,
    logprobs_N: torch.Tensor,
    advantages_N: torch.Tensor,
    datum_N: torch.Tensor,
    sequence_ratio_mask_N: torch.Tensor | None = None,
    clip_low_threshold: float = 1 - 3e-4,
    clip_high_threshold: float = 1 + 4e-4,
) -> LossTerms:
    """GSPO-token (Zheng et al. 2025, sec. 4.3), the built-in `gspo` loss, as Tinker documents it:

        s_d   = exp( mean_{t in M_d} (sg(logp_t) - logq_t) )        sequence ratio of datum d (eq. 7)
        s_t   = sg(s_d) * exp(logp_t - sg(logp_t))                   value s_d, gradient of its own token
        L     = -sum_t min( s_t A_t, clip(s_t, low, high) A_t )

    M_d = datum d's positions where `sequence_ratio_mask` != 0 (its sampled tokens); without the mask,
    those with a non-zero advantage. The bounds are absolute ratios like `ppo`'s; the defaults are the
    paper's 1 - 3e-4 / 1 + 4e-4. A clipped sequence gives none of its tokens a gradient. With
    one advantage per sequence the gradient equals GSPO's sequence objective (eq. 5) summed, not averaged,
    over tokens (Tinker's sum convention; `gspo` below is the averaged, custom-loss form).
    """
    mask_N = (advantages_N != 0) if sequence_ratio_mask_N is None else (sequence_ratio_mask_N != 0)
    n_datums = int(datum_N.max()) + 1 if len(datum_N) else 0
    log_ratio_N = (logp_N.detach() - logprobs_N) * mask_N
    sums_D = torch.zeros(n_datums, dtype=logp_N.dtype, device=logp_N.device).index_add_(0, datum_N, log_ratio_N)
    counts_D = torch.zeros(n_datums, dtype=logp_N.dtype, device=logp_N.device).index_add_(0, datum_N, mask_N.to(logp_N.dtype))
    seq_log_ratio_D = sums_D / counts_D.clamp(min=1)
    ratio_N = torch.exp(seq_log_ratio_D[datum_N] + logp_N - logp_N.detach())
    clipped_N = torch.clamp(ratio_N, clip_low_threshold, clip_high_threshold)
    clip_low_N = (ratio_N < clip_low_threshold) & (advantages_N < 0)
    clip_high_N = (ratio_N > clip_high_threshold) & (advantages_N > 0)
    return LossTerms(
        loss_N=-torch.minimum(ratio_N * advantages_N, clipped_N * advantages_N),
        active_N=advantages_N != 0,
        stats_N={"seq_ratio": ratio_N.detach(), "clip_frac": (clip_low_N | clip_high_N).float()},
    )


def stable_reinforce(
    logp_N: torch.Tensor,
    target_tokens_N: torch.Tensor,
    logprobs_N: torch.Tensor,
    advantages_N: torch.Tensor,
    sampled_N: torch.Tensor,
    clip_high_threshold: float = 2.0,
) -> LossTerms:
    """StableReinforce, the Tinker cookbook rl_loop's default: REINFORCE with a truncated importance weight
    on the tokens that provenance marks as sampled.

        L = -sum_t m_t * sg(min(rho_t, C)) * A_t * logp_t,   rho_t = exp(logp_t - logq_t)

    m_t = `sampled_N` (1 where `Datum.with_provenance` names a sampled token), C = `clip_high_threshold`.
    ASSUMED: Tinker documents only the contract (a REINFORCE variant that stays stable when sampler and
    trainer differ, fed by stability info recorded at sampling and named by `sequence_id`), not the math.
    This is the truncated importance sampling correction of Yao, Liu et al. 2025 ("Your efficient RL
    framework secretly brings you off-policy RL training", C = 2), the standard fix for exactly that
    mismatch; the recorded stability info is taken to be the sampler's logprobs, which the local engine
    reads from the `logprobs` input (its sampler and trainer share numerics, so rho is ~1 on-policy).
    Without truncation (C = inf) and on-policy it is REINFORCE.
    """
    rho_N = torch.exp(logp_N - logprobs_N)
    weight_N = torch.clamp(rho_N, max=clip_high_threshold).detach()
    active_N = (advantages_N != 0) & (sampled_N != 0)
    return LossTerms(
        loss_N=-sampled_N * weight_N * advantages_N * logp_N,
        active_N=active_N,
        stats_N={"ratio": rho_N.detach(), "clip_frac": (rho_N > clip_high_threshold).float()},
    )


def sequence_ratio(logp_T: torch.Tensor, logq_T: torch.Tensor) -> torch.Tensor:
    """GSPO's sequence importance ratio (Zheng et al. 2025, eq. 7): the length-normalised likelihood ratio

        s = (pi_theta(y|x) / pi_old(y|x)) ** (1/|y|) = exp( mean_t (logp_t - logq_t) )

    over the completion tokens of one sequence. The 1/|y| keeps s near 1 for any length, so one clip
    range fits short and long answers.
    """
    return torch.exp((logp_T - logq_T).mean())


def gspo(
    logp_KT: list[torch.Tensor],
    logq_KT: list[torch.Tensor],
    adv_K: torch.Tensor,
    n_sequences: int,
    clip_low: float = 3e-4,
    clip_high: float = 4e-4,
) -> tuple[torch.Tensor, dict[str, float]]:
    """GSPO objective (Zheng et al. 2025, eq. 5), sequence-level clipping, for `forward_backward_custom`:

        L = -1/N sum_i min( s_i A_i, clip(s_i, 1 - clip_low, 1 + clip_high) A_i )

    s_i = `sequence_ratio` of sequence i (its completion tokens only), N = `n_sequences`, every
    rollout of the step including those of zero-advantage groups (the reference lab's normaliser).
    Defaults 3e-4 / 4e-4 are the paper's. A clipped sequence contributes no gradient at all, so
    the token clip fraction is the share of trained tokens inside clipped sequences.
    Returns (loss, metrics: `gspo/seq_ratio_mean`, `gspo/seq_clip_frac`, `gspo/token_clip_frac`).
    """
    if not (len(logp_KT) == len(logq_KT) == len(adv_K)):
        raise ValueError(f"gspo: {len(logp_KT)} logprob rows, {len(logq_KT)} sampler rows, {len(adv_K)} advantages")
    s_K = torch.stack([sequence_ratio(lp, lq) for lp, lq in zip(logp_KT, logq_KT)])
    obj_K = torch.minimum(s_K * adv_K, torch.clamp(s_K, 1 - clip_low, 1 + clip_high) * adv_K)
    clipped_K = ((s_K > 1 + clip_high) & (adv_K > 0)) | ((s_K < 1 - clip_low) & (adv_K < 0))
    len_K = torch.tensor([len(lp) for lp in logp_KT], dtype=torch.float32)
    metrics = {
        "gspo/seq_ratio_mean": float(s_K.detach().mean()),
        "gspo/seq_clip_frac": float(clipped_K.float().mean()),
        "gspo/token_clip_frac": float((clipped_K.float() * len_K).sum() / len_K.sum()),
    }
    return -obj_K.sum() / n_sequences, metrics


def kl_k1(logp_N: torch.Tensor, ref_logp_N: torch.Tensor) -> torch.Tensor:
    """k1 = log pi(t) - log pi_ref(t) per sampled token (Schulman 2020, "Approximating KL divergence").

    Unbiased for KL(pi || pi_ref) over samples of pi, but as a *loss* its gradient grad logp has
    expectation zero on on-policy samples, so it belongs in the reward (advantage), not the loss.
    """
    return logp_N - ref_logp_N


def kl_k3(logp_N: torch.Tensor, ref_logp_N: torch.Tensor) -> torch.Tensor:
    """k3 = r - 1 - log r with r = pi_ref(t) / pi(t) (Schulman 2020; the GRPO loss, DeepSeekMath eq. 4).

    Unbiased, always >= 0, and as a loss its gradient pulls pi towards pi_ref: d k3 / d logp = 1 - r.
    """
    log_r_N = ref_logp_N - logp_N
    return torch.exp(log_r_N) - 1 - log_r_N


@dataclass(frozen=True)
class LossSpec:
    fn: Callable[..., LossTerms]
    inputs: tuple[str, ...]
    """Required `loss_fn_inputs`; `fn` takes each as the keyword `<name>_N`."""
    optional_inputs: tuple[str, ...]
    config: dict[str, float]
    """`loss_fn_config` keys with their defaults."""
    engine_inputs: tuple[str, ...] = ()
    """Tensors the engine derives from the datums (`datum`, `sampled`; see the module doc), passed as `<name>_N`."""


_POLICY_INPUTS = ("target_tokens", "logprobs", "advantages")

LOSSES: dict[str, LossSpec] = {
    "cross_entropy": LossSpec(cross_entropy, ("target_tokens",), ("weights",), {}),
    "importance_sampling": LossSpec(importance_sampling, _POLICY_INPUTS, (), {}),
    "ppo": LossSpec(ppo, _POLICY_INPUTS, (), {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}),
    "cispo": LossSpec(cispo, _POLICY_INPUTS, (), {"clip_low_threshold": 0.0, "clip_high_threshold": 4.0}),
    "dro": LossSpec(dro, _POLICY_INPUTS, (), {"beta": 0.05}),
    "gspo": LossSpec(gspo_token, _POLICY_INPUTS, ("sequence_ratio_mask",),
                     {"clip_low_threshold": 1 - 3e-4, "clip_high_threshold": 1 + 4e-4}, ("datum",)),
    "stable_reinforce": LossSpec(stable_reinforce, _POLICY_INPUTS, (), {"clip_high_threshold": 2.0}, ("sampled",)),
}


def get_loss(name: str, config: dict | None) -> tuple[LossSpec, dict[str, float]]:
    """The spec of loss `name` and its full config; unknown names or keys raise a ValueError that lists
    the valid ones."""
    if name not in LOSSES:
        raise ValueError(f"loss_fn={name!r} is not a built-in loss; use one of {sorted(LOSSES)} "
                         "or forward_backward_custom for your own")
    spec = LOSSES[name]
    config = dict(config or {})
    unknown = sorted(set(config) - set(spec.config))
    if unknown:
        valid = sorted(spec.config) or "none"
        raise ValueError(f"loss_fn_config for {name!r} has unknown key(s) {unknown}; valid keys: {valid}")
    for key, value in config.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ValueError(f"loss_fn_config[{key!r}] must be a number, got {value!r}")
    return spec, {**spec.config, **{k: float(v) for k, v in config.items()}}
