"""Vision GRPO: GRPO whose prompts hold an image: 4-choice questions about rendered figures.

The loop is the GRPO chapter's (Shao et al. 2024, DeepSeekMath sec. 4.1, as the reference lab runs
it): a group of answers per prompt, reward 1 if the last `\\boxed{A-D}` is the gold letter, advantage
A_i = r_i - mean(r) (no std scaling), groups whose rewards all tie skipped, importance-sampling loss,
token-mean reduction. What is new is the prompt: text / `ImageChunk(expected_tokens=N)` / text, so the
image's N positions sit in the context of every sample and every datum, with weight 0: only the
answer's tokens are trained, and the vision tower learns only through them. `view=blank` and
`view=text` are the controls that ask whether the image mattered.

    arl run vision-grpo --preset mini [view=blank|text] [seed=1]
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from .. import advantages
from ..rewards import choice_reward
from ..rl import batch, update
from ..rl.config import LossConfig, OptimConfig, RunConfig, SamplingConfig, SessionConfig, defaults, objective
from ..rl.session import finish, open_session
from ..rl.vision import FigureConfig
from ..rollout import rl_datum
from ..track import RunDir


@defaults(batch_prompts=8, group_size=8, max_tokens=24, learning_rate=1e-4, steps=100, eval_every=20)
@dataclass
class Config(RunConfig, SessionConfig, OptimConfig, LossConfig, SamplingConfig, FigureConfig):
    """Vision GRPO's fields: the figure task and the view of it (`view` is the variable of this chapter),
    its cold start, group sampling and the loss."""


PRESETS = {
    "smoke": dict(steps=2, batch_prompts=2, group_size=4, max_tokens=24, sft_steps=40, n_train=64, n_dev=8,
                  n_test=8, eval_every=1, save_every=1),
    "mini": {},
    "full": dict(model="Qwen/Qwen2.5-VL-3B-Instruct", kinds="count,relation,length,area,angle", lora_rank=32, learning_rate=4e-5, max_tokens=1024,
                 sft_steps=0, batch_prompts=8, group_size=8, steps=100, eval_every=25, save_every=25),
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    task = cfg.figure_task(cfg.max_tokens)
    session = open_session(cfg, run, resume, task)
    client, loss = session.client, objective(cfg)
    for step in session.steps("vision-grpo", shown=("reward/mean", "reward/frac_degenerate")):
        t0, stats = time.perf_counter(), update.StepStats(loss)
        # 1. sample a group per image prompt from the current weights (one image prefill per group)
        sampler = client.save_weights_and_get_sampling_client()
        figs = batch.step_items(task.train, step, cfg.batch_prompts)
        prompts = [task.prompt(session.tokenizer, f) for f in figs]
        groups = batch.sample_groups(sampler, prompts, cfg, step, session.stop)
        t_sample = time.perf_counter() - t0

        # 2. reward (the boxed letter), 3. group-relative advantage (degenerate groups come back all zero)
        rewards_BG = [[choice_reward(s.text, f.answer) for s in seqs] for f, seqs in zip(figs, groups)]
        adv_BG, _ = advantages.batch_advantages(rewards_BG, scale=cfg.adv_scale)
        kept = batch.with_signal(prompts, groups, adv_BG)

        # 4. datums: image chunk + text in context (weight 0), the answer's tokens carry the advantage;
        # 5. forward_backward + optim_step per mini-batch
        for mb in update.minibatches(kept, loss, len(prompts) * cfg.group_size, cfg.minibatches):
            datums = [rl_datum(r.prompt, r.tokens, r.logprobs, a) for r, a in zip(mb.rollouts, mb.advantages)]
            fb = client.forward_backward_custom(datums, mb.loss) if mb.loss else client.forward_backward(datums, *loss.builtin)
            stats.add(mb, fb.result(), client.optim_step(cfg.adam(step)).result())

        # 6. log (held-out eval and checkpoint when due)
        metrics = {**stats.metrics(), **batch.group_metrics(rewards_BG, groups, kept, t_sample, time.perf_counter() - t0)}
        session.end_step(step + 1, metrics, task.rows(run, session.tokenizer, figs, groups, adv_BG, rewards_BG))
    finish(session, f"Vision GRPO ({cfg.view} view) on generated figures, {cfg.model}", asdict(cfg))
    return run


def same_update(cfg_a: Config, cfg_b: Config) -> bool:
    """Whether two configs make the same update (`update.same_update` of `objective`)."""
    return update.same_update(cfg_a, cfg_b, objective)
