"""DAPO: four changes to GRPO, each its own switch (Yu et al. 2025, "DAPO: an open-source LLM RL system").

- clip-higher (sec. 3.1): PPO's upper ratio bound 1.2 -> `clip_high_threshold` 1.28, so unlikely
  tokens can grow faster than likely ones shrink (against entropy collapse);
- dynamic sampling (sec. 3.2): keep only groups with 0 < correct < G and refill the batch with new
  prompts, within a budget of `max_candidate_multiplier` x `batch_prompts` candidate groups per step;
  a batch that is still short trains as it is (reported), an empty one skips the update;
- token-level loss (sec. 3.3): `normalizer=token_mean` instead of GRPO's mean of sequence means;
- soft overlong punishment (sec. 3.4): `overlong_cache` tokens before `max_tokens` the reward ramps
  down to -1 (`rewards.overlong_penalty`).

`algorithm=grpo|dapo` picks every switch left unset (None); set one to move it alone. Advantages are
z-scored in both presets ((r - mean) / sample std, as the reference lab's chapter). With one on-policy
update per batch the ratio is 1, so clip-higher changes nothing until `minibatches` > 1.

    arl run dapo --preset mini [algorithm=grpo] [dynamic_sampling=true]
    arl run dapo --preset long [algorithm=grpo]      # long, uneven answers that a tight budget truncates
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace

from .. import advantages
from ..rewards import boxed_reward, overlong_penalty
from ..rl import batch, update
from ..rl.config import KLConfig, LossConfig, MathConfig, OptimConfig, RunConfig, SamplingConfig, SessionConfig, objective
from ..rl.session import finish, open_session
from ..rollout import rl_datum
from ..track import RunDir

ALGORITHMS = {
    "grpo": dict(clip_high_threshold=1.2, dynamic_sampling=False, normalizer="seq_mean", overlong_cache=0),
    "dapo": dict(clip_high_threshold=1.28, dynamic_sampling=True, normalizer="token_mean", overlong_cache=10),
}


@dataclass
class Config(RunConfig, SessionConfig, OptimConfig, KLConfig, LossConfig, SamplingConfig, MathConfig):
    algorithm: str = "dapo"
    """grpo or dapo: the value of each of the four switches below that is left unset."""
    loss_fn: str = "ppo"
    """Policy loss (the chapter's clip switches act on ppo)."""
    clip_low_threshold: float | None = 0.8
    """Lower PPO ratio bound."""
    clip_high_threshold: float | None = None
    """Upper PPO ratio bound: 1.2 (grpo) or 1.28 (dapo, clip-higher)."""
    dynamic_sampling: bool | None = None
    """Keep only groups with 0 < correct < G, refilling with new prompts (grpo: off, dapo: on)."""
    max_candidate_multiplier: float = 2.0
    """Dynamic sampling's budget: at most this x batch_prompts candidate groups per step."""
    normalizer: str | None = None
    """Loss reduction: seq_mean (grpo), token_mean (dapo) or constant (Dr. GRPO)."""
    overlong_cache: int | None = None
    """Soft overlong punishment over the last N tokens of max_tokens (grpo: 0 = off, dapo: 10)."""
    adv_scale: str = "std"
    """Group advantage: std ((r - mean) / sample std, both presets) or none."""

    def resolved(self) -> "Config":
        """This config with every unset switch taken from `algorithm`."""
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm={self.algorithm!r}: use grpo or dapo")
        return replace(self, **{k: v for k, v in ALGORITHMS[self.algorithm].items() if getattr(self, k) is None})

    def validate(self) -> None:
        cfg = self.resolved()
        super(Config, cfg).validate()
        if self.max_candidate_multiplier < 1:
            raise ValueError(f"max_candidate_multiplier={self.max_candidate_multiplier}: must be at least 1")
        if not 0 <= cfg.overlong_cache <= cfg.max_tokens:
            raise ValueError(f"overlong_cache={cfg.overlong_cache}: must be between 0 and max_tokens={cfg.max_tokens}")


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=4, max_tokens=32, sft_steps=60,
                  sft_plain_fraction=0.0, n_train=64, n_test=8, eval_every=1, save_every=1, overlong_cache=4),
    "mini": {},
    # DAPO's regime in miniature: half the worked answers written out long, a budget that truncates the longest
    # (a fifth of the cold start's samples), four optimizer steps per batch so that the ratio can leave 1; chosen
    # on the dev split, where learning_rate=5e-4 lost accuracy in every arm (docs/chapters/dapo.md)
    "long": dict(level="long", sft_plain_fraction=0.0, max_tokens=48, minibatches=4, steps=100, eval_every=25),
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-5, data="gsm8k/train.jsonl",
                 max_tokens=1024, overlong_cache=256, steps=100, sft_steps=0),
}


REFILLS = 10**6
"""Where the refill stream starts in the prompt stream (`batch.draw`): a million draws on, in epochs (and
their orders) that no step's own prompts reach."""


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    cfg = cfg.resolved()
    task = cfg.math_task()
    session = open_session(cfg, run, resume, task)
    client, loss, tok = session.client, objective(cfg), session.tokenizer
    ref = session.reference() if cfg.kl_coef else None
    budget, B = int(cfg.batch_prompts * cfg.max_candidate_multiplier), cfg.batch_prompts
    for step in session.steps(f"dapo ({cfg.algorithm})", shown=("reward/mean", "sampling/effective_groups")):
        t0, stats = time.perf_counter(), update.StepStats(loss)
        # 1. sample the step's prompts (as GRPO would); dynamic sampling keeps the groups with 0 < correct < G
        # and refills from a stream of its own until B are kept or `budget` groups were sampled
        sampler = client.save_weights_and_get_sampling_client()
        problems = batch.step_items(task.train, step, B)
        groups = batch.sample_groups(sampler, [task.prompt(tok, p) for p in problems], cfg, step, session.stop)
        t_first = time.perf_counter() - t0
        kept_groups = [b for b, (p, g) in enumerate(zip(problems, groups)) if _mixed(cfg, p, g)]
        while cfg.dynamic_sampling and len(kept_groups) < B and len(problems) < budget:
            new = [batch.draw(task.train, REFILLS + step * budget + len(problems) + i)
                   for i in range(min(B - len(kept_groups), budget - len(problems)))]
            seqs = batch.sample_groups(sampler, [task.prompt(tok, p) for p in new], cfg, step, session.stop, first=len(problems))
            kept_groups += [len(problems) + j for j, (p, g) in enumerate(zip(new, seqs)) if _mixed(cfg, p, g)]
            problems, groups = problems + new, groups + seqs
        t_sample = time.perf_counter() - t0

        # 2. reward: correctness (it decided the filter) with the overlong ramp, 3. advantages (degenerate
        # groups: all zero) and the rollouts with signal in the kept groups
        rewards_BG = [[boxed_reward(s.text, p.answer) + overlong_penalty(len(s.tokens), cfg.max_tokens, cfg.overlong_cache)
                       for s in seqs] for p, seqs in zip(problems, groups)]
        adv_BG, _ = advantages.batch_advantages(rewards_BG, scale=cfg.adv_scale)
        kept = batch.with_signal([task.prompt(tok, problems[b]) for b in kept_groups], [groups[b] for b in kept_groups],
                                 [adv_BG[b] for b in kept_groups])

        # 4. datums (cfg.normalizer's reduction), 5. forward_backward + optim_step (cfg.clip_high_threshold's clip)
        for mb in update.minibatches(kept, loss, len(kept_groups) * cfg.group_size, cfg.minibatches, ref):
            datums = [rl_datum(r.prompt, r.tokens, r.logprobs, a) for r, a in zip(mb.rollouts, mb.advantages)]
            fb = client.forward_backward_custom(datums, mb.loss) if mb.loss else client.forward_backward(datums, *loss.builtin)
            stats.add(mb, fb.result(), client.optim_step(cfg.adam(step)).result())

        # 6. log, with what dynamic sampling cost (rewards and degeneracy of the step's own B prompts)
        metrics = {**stats.metrics(), **batch.group_metrics(rewards_BG[:B], groups[:B], kept, t_sample, time.perf_counter() - t0),
                   **_sampling_metrics(cfg, problems, groups, kept_groups, kept, t_sample - t_first)}
        # a group the filter dropped carried no gradient: its rows log advantage 0 (what `arl show` and `arl audit` read)
        trained_adv_BG = [a if b in kept_groups else [0.0] * len(a) for b, a in enumerate(adv_BG)]
        session.end_step(step + 1, metrics, task.rows(problems, groups, trained_adv_BG, rewards_BG))
    finish(session, f"DAPO chapter ({cfg.algorithm}) on {cfg.data}, {cfg.model}", asdict(cfg))
    return run


def _mixed(cfg: Config, problem, seqs) -> bool:
    """Whether dynamic sampling keeps a group: off, every group; on, those with 0 < correct < G."""
    return not cfg.dynamic_sampling or advantages.keep_group([boxed_reward(s.text, problem.answer) == 1.0 for s in seqs])


def _sampling_metrics(cfg: Config, problems, groups, kept_groups, kept, t_refill: float) -> dict[str, float]:
    """Correctness and overlong share of the step's own prompts, what the refills cost, whether anything trained."""
    B, G = cfg.batch_prompts, cfg.group_size
    return {
        "reward/correct": sum(boxed_reward(s.text, p.answer) for p, g in zip(problems[:B], groups) for s in g) / (B * G),
        "reward/overlong_frac": sum(len(s.tokens) > cfg.max_tokens - cfg.overlong_cache for g in groups[:B] for s in g)
        / (B * G) if cfg.overlong_cache else 0.0,
        "sampling/candidate_groups": float(len(problems)),
        "sampling/effective_groups": float(len(kept_groups)),
        "sampling/partial_batch": float(len(kept_groups) < B),
        "train/update_skipped": float(not kept),
        "time/refill": t_refill,
    }


def same_update(cfg_a: Config, cfg_b: Config) -> bool:
    """`update.same_update` on the resolved switches (dynamic sampling and the overlong ramp change the
    data, so they count as differences)."""
    return update.same_update(cfg_a.resolved(), cfg_b.resolved(), objective)
