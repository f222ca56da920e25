"""GSPO: importance ratio and clipping per sequence, not per token (Zheng et al. 2025, Qwen team).

A sequence is rewarded as a whole, so GSPO weighs it as a whole: the ratio of a completion is the
length-normalised likelihood ratio s_i = exp(mean_t (logp_it - logq_it)) (`losses.sequence_ratio`),
clipped to [1 - 3e-4, 1 + 4e-4], and the loss is -1/N sum_i min(s_i A_i, clip(s_i) A_i) over all N
rollouts of the step (`losses.gspo`, through `forward_backward_custom`). `ratio_level=token` is the
matched token-level baseline: PPO clipping per token, each rollout's token mean over the same N.

The ratio only moves away from 1 when the weights that are trained are not the ones that sampled:
with `minibatches` = 1 (one on-policy update per batch) both levels make exactly the same update.
The paper trains with several mini-batches per rollout batch; the `mini` preset uses 4.

    arl run gspo --preset mini [ratio_level=token] [minibatches=1]
"""

from __future__ import annotations

import functools
import time
from dataclasses import asdict, dataclass

from .. import advantages, losses
from ..rewards import boxed_reward
from ..rl import batch, update
from ..rl.config import KLConfig, LossConfig, MathConfig, OptimConfig, RunConfig, SamplingConfig, SessionConfig
from ..rl.config import objective as policy_objective
from ..rl.session import finish, open_session
from ..rollout import rl_datum
from ..track import RunDir

RATIO_LEVELS = ("sequence", "token")


@dataclass
class Config(RunConfig, SessionConfig, OptimConfig, KLConfig, LossConfig, SamplingConfig, MathConfig):
    ratio_level: str = "sequence"
    """sequence (GSPO) or token (PPO's per-token ratio and clip: the matched baseline)."""
    gspo_clip_low: float = 3e-4
    """GSPO's lower clip: sequences with s < 1 - this (and A < 0) get no gradient."""
    gspo_clip_high: float = 4e-4
    """GSPO's upper clip: sequences with s > 1 + this (and A > 0) get no gradient."""
    loss_fn: str = "ppo"
    """The token-level loss of ratio_level=token."""
    normalizer: str = "seq_mean"
    """Reduction of the token level and of the KL term: seq_mean matches GSPO's mean over all rollouts."""
    adv_scale: str = "std"
    """Group advantage: std ((r - mean) / sample std, as the reference chapter) or none."""
    minibatches: int = 4
    """Optimizer steps per rollout batch; with 1 the ratio is 1 everywhere and both levels coincide."""

    def validate(self) -> None:
        super().validate()
        if self.ratio_level not in RATIO_LEVELS:
            raise ValueError(f"ratio_level={self.ratio_level!r}: use sequence or token")
        if not (0 < self.gspo_clip_low < 1 and self.gspo_clip_high > 0):
            raise ValueError(f"gspo_clip_low={self.gspo_clip_low}, gspo_clip_high={self.gspo_clip_high}: "
                             "need 0 < low < 1 and high > 0 (the bounds are 1 - low, 1 + high)")
        if self.ratio_level == "sequence" and self.kl_coef > 0 and self.kl_estimator == "k1":
            raise ValueError("kl_estimator=k1 shapes per-token advantages, which GSPO's sequence objective has not; "
                             "use kl_estimator=k3")


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=4, max_tokens=32, sft_steps=60,
                  sft_plain_fraction=0.0, n_train=64, n_test=8, eval_every=1, save_every=1, minibatches=2),
    "mini": {},
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-5, data="gsm8k/train.jsonl",
                 max_tokens=1024, steps=100, sft_steps=0),
}


def objective(cfg: Config) -> update.Objective:
    """The loss of a step: GSPO's sequence objective (`losses.gspo`, its clip band an argument), or at
    ratio_level=token the built-in token-level loss; the normaliser and the KL term either way."""
    gspo = functools.partial(losses.gspo, clip_low=cfg.gspo_clip_low, clip_high=cfg.gspo_clip_high)
    return policy_objective(cfg, sequence_loss=gspo if cfg.ratio_level == "sequence" else None)


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    task = cfg.math_task()
    session = open_session(cfg, run, resume, task)
    client, loss = session.client, objective(cfg)
    ref = session.reference() if cfg.kl_coef else None
    for step in session.steps(f"gspo ({cfg.ratio_level})", shown=("reward/mean", "gspo/seq_clip_frac")):
        t0, stats = time.perf_counter(), update.StepStats(loss)
        # 1. sample a group per prompt from the weights at the start of the step
        problems = batch.step_items(task.train, step, cfg.batch_prompts)
        prompts = [task.prompt(session.tokenizer, p) for p in problems]
        groups = batch.sample_groups(client.save_weights_and_get_sampling_client(), prompts, cfg, step, session.stop)
        t_sample = time.perf_counter() - t0

        # 2. reward (1/0), 3. z-scored group advantage, one per sequence
        rewards_BG = [[boxed_reward(s.text, p.answer) for s in seqs] for p, seqs in zip(problems, groups)]
        adv_BG, _ = advantages.batch_advantages(rewards_BG, scale=cfg.adv_scale)
        kept = batch.with_signal(prompts, groups, adv_BG)

        # 4. datums of the sequences with signal; N counts every rollout (zero-advantage ones too) in the
        # normaliser. 5. `minibatches` updates on the same rollouts: from the second on, the ratio leaves 1
        # and GSPO's sequence loss (forward_backward_custom) clips whole sequences
        for mb in update.minibatches(kept, loss, cfg.batch_prompts * cfg.group_size, cfg.minibatches, ref):
            datums = [rl_datum(r.prompt, r.tokens, r.logprobs, a) for r, a in zip(mb.rollouts, mb.advantages)]
            fb = client.forward_backward_custom(datums, mb.loss) if mb.loss else client.forward_backward(datums, *loss.builtin)
            stats.add(mb, fb.result(), client.optim_step(cfg.adam(step)).result())
        metrics = stats.metrics()  # gspo/seq_clip_frac, gspo/token_clip_frac, gspo/seq_ratio_mean come from the loss

        # 6. log
        metrics.update(batch.group_metrics(rewards_BG, groups, kept, t_sample, time.perf_counter() - t0))
        session.end_step(step + 1, metrics, task.rows(problems, groups, adv_BG, rewards_BG))
    finish(session, f"GSPO chapter ({cfg.ratio_level} level) on {cfg.data}, {cfg.model}", asdict(cfg))
    return run


def same_update(cfg_a: Config, cfg_b: Config) -> bool:
    """`update.same_update` of `objective`, with the ratio level and GSPO's clip counted as loss fields."""
    return update.same_update(cfg_a, cfg_b, objective, extra_keys=("ratio_level", "gspo_clip_low", "gspo_clip_high"))
