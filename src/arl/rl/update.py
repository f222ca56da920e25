"""The update of one RL step, as pieces a recipe calls in plain sight:

    objective = update.Objective(cfg.loss_fn, cfg.loss_config(), cfg.normalizer, cfg.max_tokens)
    stats = update.StepStats(objective)
    for mb in update.minibatches(kept, objective, n_rollouts, cfg.minibatches, ref):
        datums = [trajectory_datum(r.prompt, r.tokens, r.mask_T(), r.logprobs, a) for r, a in zip(mb.rollouts, mb.advantages)]
        fb = client.forward_backward_custom(datums, mb.loss) if mb.loss else client.forward_backward(datums, *objective.builtin)
        stats.add(mb, fb.result(), client.optim_step(adam).result())

The loss of a step is `step_loss`: the built-in loss (or a chapter's sequence loss, GSPO's) with the
normaliser's per-sequence scales, plus an optional KL penalty against the start weights. It goes
through the built-in `forward_backward` when it can (one pass); a sequence loss or a k3 KL term goes
through `forward_backward_custom`, whose gradient is exactly that of `step_loss`. `same_update` says
when two configs make the same update. Variants (GSPO's sequence ratio, the KL term, the normaliser)
are fields of `Objective`, never methods a library calls back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field

import torch

from .. import advantages, losses
from ..rollout import score_completions

KL_ESTIMATORS = ("k1", "k3")
UPDATE_KEYS = ("loss_fn", "clip_low_threshold", "clip_high_threshold", "normalizer", "kl_coef", "kl_estimator")
"""Config fields that only change the loss of a step: two configs that differ only in these make the
same update when the losses' gradients agree on on-policy data (see `same_update`)."""


@dataclass(frozen=True)
class Objective:
    """What a step minimises (completion tokens only):

        L = sum_i c_i sum_t l(logp_it, logq_it, A_it) [+ kl_coef sum_i c_i sum_t k3_it]

    with c_i from `normalizer` (`advantages.sequence_scales`) and l the built-in `loss_fn` with
    `loss_config`, or `sequence_loss(logp_KT, logq_KT, adv_K, n_rollouts) -> (loss, metrics)` in place
    of the first sum (GSPO). With `kl_coef` > 0 the reference is the start weights: `k3` adds the term
    above, `k1` subtracts kl_coef x (log q - log ref) from each token's advantage."""

    loss_fn: str = "importance_sampling"
    loss_config: dict[str, float] = field(default_factory=dict)
    normalizer: str = "token_mean"
    max_tokens: int = 0
    """The `constant` normaliser's length (Dr. GRPO: / rollouts x max_tokens)."""
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    sequence_loss: Callable | None = None

    @property
    def custom(self) -> bool:
        """Whether the loss needs `forward_backward_custom` (a sequence loss, or the k3 term)."""
        return self.sequence_loss is not None or (self.kl_coef > 0 and self.kl_estimator == "k3")

    @property
    def builtin(self) -> tuple[str, dict[str, float]]:
        """`forward_backward`'s (loss_fn, loss_fn_config)."""
        return self.loss_fn, self.loss_config


@dataclass
class Rollout:
    """One sampled completion (or multi-turn episode) of a step that will be trained on."""

    prompt: list[int]
    tokens: list[int]
    logprobs: list[float]
    advantage: float | list[float]
    """One advantage for the whole completion, or one per token (on-policy distillation)."""
    mask: list[int] | None = None
    """Multi-turn: 1 where the policy sampled the token, 0 at observation and template tokens (which
    are context, never trained on); None = every completion token is the policy's."""
    images: list = field(default_factory=list)
    """Image observations inside `tokens` (their positions hold `image_pad_id`), for `trajectory_datum`."""
    image_pad_id: int | None = None

    def mask_T(self) -> list[int]:
        return self.mask if self.mask is not None else [1] * len(self.tokens)

    def trained_tokens(self) -> int:
        return sum(self.mask_T())


@dataclass
class Minibatch:
    """One optimizer step's share of a step's rollouts, with what its datums carry."""

    rollouts: list[Rollout]
    advantages: list[list[float]]
    """Per rollout, per token: the datum's advantages (scaled by the normaliser on the built-in path)."""
    loss: Callable | None
    """The `forward_backward_custom` loss, or None: the built-in `Objective.builtin` loss."""
    reference: list[torch.Tensor] | None
    """The reference's logprobs of each rollout's policy tokens (for the KL), or None."""


def minibatches(rollouts: Sequence[Rollout], objective: Objective, n_rollouts: float, k: int,
                reference=None) -> Iterator[Minibatch]:
    """`rollouts` (the ones with signal among `n_rollouts` sampled) dealt into `k` mini-batches, one
    optimizer step each (from the second on, training is off-policy and the clipping variants act).
    Each comes with its datum advantages and, on the custom path, the loss; `reference` is the KL's
    reference sampler (None without a KL penalty)."""
    for chunk in (c for c in (list(rollouts[i::k]) for i in range(k)) if c):
        n_chunk = n_rollouts / k
        ref_KT = _reference_logprobs(reference, chunk) if reference is not None else None
        adv_KT = [torch.tensor(token_advantages(objective, r, ref_KT[j] if ref_KT else None)) for j, r in enumerate(chunk)]
        if objective.custom:
            yield Minibatch(chunk, [a.tolist() for a in adv_KT], _custom_loss(objective, chunk, adv_KT, n_chunk, ref_KT), ref_KT)
        else:
            scale_K = advantages.sequence_scales([r.trained_tokens() for r in chunk], objective.normalizer, n_chunk,
                                                 objective.max_tokens)
            yield Minibatch(chunk, [(a * c).tolist() for a, c in zip(adv_KT, scale_K)], None, ref_KT)


def token_advantages(objective: Objective, r: Rollout, ref_T: torch.Tensor | None) -> list[float]:
    """A rollout's advantage per token, with the k1 KL penalty folded in when that is the estimator."""
    adv_T = list(r.advantage) if isinstance(r.advantage, (list, tuple)) else [r.advantage] * len(r.tokens)
    if ref_T is not None and objective.kl_estimator == "k1":
        penalty_T = advantages.kl_shaped_advantages(0.0, r.logprobs, ref_T.tolist(), objective.kl_coef)
        adv_T = [a + p for a, p in zip(adv_T, penalty_T)]
    return adv_T


def step_loss(objective: Objective, logp_KT: list[torch.Tensor], logq_KT: list[torch.Tensor], adv_KT: list[torch.Tensor],
              n_rollouts: float, ref_KT: list[torch.Tensor] | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of one (mini-)batch of K completions (`Objective`'s formula, completion tokens only).
    A_it is the sequence's advantage (k1-shaped per token when that KL is on). The custom path trains
    on exactly this; `same_update` differentiates it."""
    lengths_K = [len(lp) for lp in logp_KT]
    scale_K = advantages.sequence_scales(lengths_K, objective.normalizer, n_rollouts, objective.max_tokens)
    if objective.sequence_loss is not None:
        loss, metrics = objective.sequence_loss(logp_KT, logq_KT, torch.stack([a[0] for a in adv_KT]), n_rollouts)
    else:
        spec, config = losses.get_loss(objective.loss_fn, objective.loss_config)
        adv_N = torch.cat([a * c for a, c in zip(adv_KT, scale_K)])
        terms = spec.fn(torch.cat(logp_KT), None, torch.cat(logq_KT), adv_N, **config)
        loss = terms.loss_N.sum()
        metrics = {f"ratio/{k}": float(v.mean()) for k, v in terms.stats_N.items()}
    if ref_KT is not None and objective.kl_estimator == "k3":
        kl_K = [losses.kl_k3(lp, ref).sum() * c for lp, ref, c in zip(logp_KT, ref_KT, scale_K)]
        loss = loss + objective.kl_coef * torch.stack(kl_K).sum()
    return loss, metrics


class StepStats:
    """A step's update metrics: the mean over its mini-batches of the loss, the optimizer's and the
    loss's statistics (`ratio/...`, `gspo/...`); `train/logprob_gap`, the sampler/trainer logprob gap
    before any update (the on-policy check); `kl/k1`, the sampled KL to the reference per token."""

    def __init__(self, objective: Objective):
        self.loss_fn = objective.loss_fn
        self.sums: dict[str, float] = {}
        self.n = 0
        self.gap = 0.0
        self.kl_sum, self.kl_tokens = 0.0, 0
        self.optim_step = 0.0

    def add(self, mb: Minibatch, out, opt) -> None:
        """Record one mini-batch's `forward_backward` output and `optim_step` response."""
        metrics = {"loss/sum": out.metrics["loss:sum"], **opt.metrics}
        metrics.update({k: v for k, v in out.metrics.items() if k.startswith(("ratio/", "gspo/"))})
        for key, value in out.metrics.items():  # the built-in losses' token statistics
            if key.startswith(f"{self.loss_fn}/"):
                metrics["ratio/" + key.split("/", 1)[1].removesuffix("_mean")] = value
        for key, value in metrics.items():
            self.sums[key] = self.sums.get(key, 0.0) + value
        if self.n == 0:  # on-policy check: the sampler's logprobs against the trainer's, before any update
            self.gap = _logprob_gap(mb.rollouts, out)
        if mb.reference is not None:  # the sampled KL to the reference, log q - log ref, per token
            self.kl_sum += sum(float((torch.tensor(r.logprobs) - rf).sum()) for r, rf in zip(mb.rollouts, mb.reference))
            self.kl_tokens += sum(r.trained_tokens() for r in mb.rollouts)
        self.n += 1
        self.optim_step = opt.metrics["optim/step"]

    def metrics(self) -> dict[str, float]:
        """The step's update metrics; empty when nothing was trained."""
        if not self.n:
            return {}
        result = {k: v / self.n for k, v in self.sums.items()}
        result.update({"train/logprob_gap": self.gap, "optim/step": self.optim_step})
        if self.kl_tokens:
            result["kl/k1"] = self.kl_sum / self.kl_tokens
        return result


def _reference_logprobs(ref, rollouts: Sequence[Rollout]) -> list[torch.Tensor]:
    """The reference's logprobs of each rollout's policy tokens (zero at masked ones, which the
    sampled-KL sums and the losses leave out)."""
    scored = score_completions(ref, [(r.prompt, r.tokens) for r in rollouts])
    return [torch.tensor([x if m else 0.0 for x, m in zip(xs, r.mask_T())]) for xs, r in zip(scored, rollouts)]


def _custom_loss(objective: Objective, chunk: Sequence[Rollout], adv_KT, n_rollouts: float, ref_KT):
    keep_K = [torch.tensor(r.mask_T(), dtype=torch.bool) for r in chunk]

    def loss_fn(data, logprobs_list):
        # the loss sees the policy's tokens only: a multi-turn rollout's observations drop out here
        logp_KT = [lp[len(r.prompt) - 1:][k] for lp, r, k in zip(logprobs_list, chunk, keep_K)]
        logq_KT = [torch.tensor(r.logprobs)[k] for r, k in zip(chunk, keep_K)]
        refs = [rf[k] for rf, k in zip(ref_KT, keep_K)] if ref_KT is not None else None
        return step_loss(objective, logp_KT, logq_KT, [a[k] for a, k in zip(adv_KT, keep_K)], n_rollouts, refs)
    return loss_fn


def _logprob_gap(chunk: Sequence[Rollout], out) -> float:
    gaps = [abs(a - b) for r, o in zip(chunk, out.loss_fn_outputs)
            for a, b, m in zip(o["logprobs"].tolist()[len(r.prompt) - 1:], r.logprobs, r.mask_T()) if m]
    return max(gaps) if gaps else 0.0


def same_update(cfg_a, cfg_b, objective_of: Callable[[object], Objective], extra_keys: Sequence[str] = (),
                n_probes: int = 3) -> bool:
    """Whether two chapter configs make mathematically the same parameter update at every step.

    True when every field outside `UPDATE_KEYS` (and a chapter's `extra_keys`) is equal, training is
    on-policy (one mini-batch, so the sampler's logprobs are the trainer's and every ratio is 1) and
    the two `step_loss` gradients (of `objective_of(cfg)`) with respect to the token logprobs agree on
    random on-policy batches (with mixed lengths, signs and zero-advantage rollouts). Then the
    parameter gradients, the optimizer steps and so the whole runs are the same: e.g. cispo and
    importance_sampling, or ppo with any clip range around 1.
    """
    if type(cfg_a) is not type(cfg_b):
        return False
    keys = (*UPDATE_KEYS, *extra_keys)
    rest_a, rest_b = ({k: v for k, v in asdict(c).items() if k not in keys} for c in (cfg_a, cfg_b))
    if rest_a != rest_b or cfg_a.minibatches != 1:
        return False
    objectives = [objective_of(cfg_a), objective_of(cfg_b)]
    for probe in range(n_probes):
        gen = torch.Generator().manual_seed(probe)
        lengths = [int(n) for n in torch.randint(1, objectives[0].max_tokens + 1, (6,), generator=gen)]
        logq_KT = [-torch.rand(n, generator=gen) * 3 for n in lengths]
        adv_K = [float(a) for a in torch.randn(6, generator=gen)]
        ref_KT = [q - torch.rand(len(q), generator=gen) for q in logq_KT]
        grads = []
        for objective in objectives:
            logp_KT = [q.clone().requires_grad_(True) for q in logq_KT]
            refs = ref_KT if objective.kl_coef > 0 else None
            adv_KT = [torch.tensor(token_advantages(objective, Rollout([0], [0] * len(q), q.tolist(), a), r if refs else None))
                      for q, a, r in zip(logq_KT, adv_K, ref_KT)]
            loss, _ = step_loss(objective, logp_KT, logq_KT, adv_KT, 8, refs)
            grads.append(torch.cat(torch.autograd.grad(loss, logp_KT, allow_unused=True)))
        if not torch.allclose(grads[0], grads[1], rtol=1e-5, atol=1e-9):
            return False
    return True
