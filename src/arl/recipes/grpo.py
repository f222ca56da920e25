"""GRPO: sample a group of answers per prompt, reward them, push up the better-than-average ones.

Group Relative Policy Optimization (Shao et al. 2024, DeepSeekMath sec. 4.1) without a critic: the
baseline of an answer is the mean reward of its group, A_i = r_i - mean(r) (no std scaling, as in the
reference lab). Groups where every answer got the same reward carry no signal and are skipped
(`reward/frac_degenerate`). Loss reduction: token mean over the batch (each datum's advantages are
divided by the number of completion tokens in the step), since the built-in losses are sums.

    arl run grpo --preset mini [loss_fn=ppo] [seed=1]
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from .. import advantages
from ..rewards import boxed_reward
from ..rl import batch, update
from ..rl.config import KLConfig, LossConfig, MathConfig, OptimConfig, RunConfig, SamplingConfig, SessionConfig, objective
from ..rl.session import finish, open_session
from ..rollout import rl_datum
from ..track import RunDir


@dataclass
class Config(RunConfig, SessionConfig, OptimConfig, KLConfig, LossConfig, SamplingConfig, MathConfig):
    """GRPO's fields: the math task and its cold start, group sampling, the loss (`loss_fn` is the variable
    of this chapter) and the switches it shares with DAPO and GSPO (normalizer, adv_scale, kl_coef,
    minibatches)."""


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=4, max_tokens=32, sft_steps=60,
                  sft_plain_fraction=0.0, n_train=64, n_test=8, eval_every=1, save_every=1),
    "mini": {},
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-5, data="gsm8k/train.jsonl",
                 max_tokens=512, steps=100, sft_steps=0),
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    task = cfg.math_task()
    session = open_session(cfg, run, resume, task)
    client, loss = session.client, objective(cfg)
    ref = session.reference() if cfg.kl_coef else None
    for step in session.steps("grpo", shown=("reward/mean", "reward/frac_degenerate")):
        t0, stats = time.perf_counter(), update.StepStats(loss)
        # 1. sample a group per prompt from the current weights (strictly on-policy)
        sampler = client.save_weights_and_get_sampling_client()
        problems = batch.step_items(task.train, step, cfg.batch_prompts)
        prompts = [task.prompt(session.tokenizer, p) for p in problems]
        groups = batch.sample_groups(sampler, prompts, cfg, step, session.stop)
        t_sample = time.perf_counter() - t0

        # 2. reward, 3. group-relative advantage (degenerate groups come back all zero)
        rewards_BG = [[boxed_reward(s.text, p.answer) for s in seqs] for p, seqs in zip(problems, groups)]
        adv_BG, _ = advantages.batch_advantages(rewards_BG, scale=cfg.adv_scale)
        kept = batch.with_signal(prompts, groups, adv_BG)

        # 4. datums of the completions with signal (advantage x the normaliser's scale), 5. one
        # forward_backward + optim_step per mini-batch
        for mb in update.minibatches(kept, loss, len(prompts) * cfg.group_size, cfg.minibatches, ref):
            datums = [rl_datum(r.prompt, r.tokens, r.logprobs, a) for r, a in zip(mb.rollouts, mb.advantages)]
            fb = client.forward_backward_custom(datums, mb.loss) if mb.loss else client.forward_backward(datums, *loss.builtin)
            stats.add(mb, fb.result(), client.optim_step(cfg.adam(step)).result())

        # 6. log (held-out eval and checkpoint when due)
        metrics = {**stats.metrics(), **batch.group_metrics(rewards_BG, groups, kept, t_sample, time.perf_counter() - t0)}
        session.end_step(step + 1, metrics, task.rows(problems, groups, adv_BG, rewards_BG))
    finish(session, f"GRPO ({cfg.loss_fn}) on {cfg.data}, {cfg.model}", asdict(cfg))
    return run


def same_update(cfg_a: Config, cfg_b: Config) -> bool:
    """Whether two GRPO configs make the same update (`update.same_update` of `objective`)."""
    return update.same_update(cfg_a, cfg_b, objective)
