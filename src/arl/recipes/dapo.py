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
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from .. import advantages, policy
from ..policy import PolicyConfig, Rollout
from ..rewards import boxed_reward, overlong_penalty
from ..track import RunDir, progress

ALGORITHMS = {
    "grpo": dict(clip_high_threshold=1.2, dynamic_sampling=False, normalizer="seq_mean", overlong_cache=0),
    "dapo": dict(clip_high_threshold=1.28, dynamic_sampling=True, normalizer="token_mean", overlong_cache=10),
}


@dataclass
class Config(PolicyConfig):
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
        PolicyConfig.validate(cfg)
        if self.max_candidate_multiplier < 1:
            raise ValueError(f"max_candidate_multiplier={self.max_candidate_multiplier}: must be at least 1")
        if not 0 <= cfg.overlong_cache <= cfg.max_tokens:
            raise ValueError(f"overlong_cache={cfg.overlong_cache}: must be between 0 and max_tokens={cfg.max_tokens}")


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=4, max_tokens=32, sft_steps=60,
                  sft_plain_fraction=0.0, n_train=64, n_test=8, eval_every=1, save_every=1, overlong_cache=4),
    "mini": {},
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-5, data="gsm8k/train.jsonl",
                 max_tokens=1024, overlong_cache=256, steps=100, sft_steps=0),
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    cfg = cfg.resolved()
    session = policy.open_session(cfg, run, resume)
    client, train = session.client, session.train
    budget = int(cfg.batch_prompts * cfg.max_candidate_multiplier)
    with progress(cfg.steps, f"dapo ({cfg.algorithm})", initial=session.start) as bar:
        for step in range(session.start, cfg.steps):
            t0 = time.perf_counter()
            # 1. sample: the step's prompts, then (dynamic sampling) refills until the batch is full or the budget spent
            sampler = client.save_weights_and_get_sampling_client()
            problems, groups, kept_groups = [], [], []
            while not problems or (cfg.dynamic_sampling and len(kept_groups) < cfg.batch_prompts and len(problems) < budget):
                # round 1 reads the same prompts as GRPO would; refills come from a stream of their own
                new = (policy.step_problems(train, step, cfg.batch_prompts) if not problems
                       else [policy.draw(train, 10**6 + step * budget + len(problems) + i)
                             for i in range(min(cfg.batch_prompts - len(kept_groups), budget - len(problems)))])
                seqs = policy.sample_groups(sampler, [session.prompt(p) for p in new], cfg, step, session.stop,
                                            first=len(problems))
                for j, (p, g) in enumerate(zip(new, seqs)):
                    # 2. reward: correctness decides the filter; the overlong ramp only shapes the reward
                    if not cfg.dynamic_sampling or advantages.keep_group([boxed_reward(s.text, p.answer) == 1.0 for s in g]):
                        kept_groups.append(len(problems) + j)
                if not problems:
                    t_first = time.perf_counter() - t0
                problems += new
                groups += seqs
            t_sample = time.perf_counter() - t0
            rewards_BG = [[boxed_reward(s.text, p.answer) + overlong_penalty(len(s.tokens), cfg.max_tokens, cfg.overlong_cache)
                           for s in seqs] for p, seqs in zip(problems, groups)]

            # 3. advantages (degenerate groups are all zero), 4. the rollouts with signal in the kept groups
            adv_BG, _ = advantages.batch_advantages(rewards_BG, scale=cfg.adv_scale)
            kept = [Rollout(session.prompt(problems[b]), s.tokens, s.logprobs, a)
                    for b in kept_groups for s, a in zip(groups[b], adv_BG[b]) if a != 0]

            # 5. the update (cfg.normalizer's reduction, cfg.clip_high_threshold's clip)
            lr = cfg.learning_rate_at(step)
            n_rollouts = len(kept_groups) * cfg.group_size
            metrics = policy.policy_step(client, cfg, kept, n_rollouts, lr, session.ref) if kept else {}
            t_total = time.perf_counter() - t0

            # 6. log, with what dynamic sampling cost (rewards and degeneracy of the step's first B prompts)
            B = cfg.batch_prompts
            metrics.update(policy.group_metrics(rewards_BG[:B], groups[:B], kept, sum(map(advantages.is_degenerate, rewards_BG[:B])) / B,
                                                t_sample, t_total))
            metrics.update({
                "reward/correct": sum(boxed_reward(s.text, p.answer) for p, g in zip(problems[:B], groups) for s in g) / (B * cfg.group_size),
                "reward/overlong_frac": sum(len(s.tokens) > cfg.max_tokens - cfg.overlong_cache for g in groups[:B] for s in g)
                / (B * cfg.group_size) if cfg.overlong_cache else 0.0,
                "sampling/candidate_groups": float(len(problems)),
                "sampling/effective_groups": float(len(kept_groups)),
                "sampling/partial_batch": float(len(kept_groups) < B),
                "train/update_skipped": float(not kept),
                "time/refill": t_sample - t_first,
            })
            policy.end_step(cfg, run, session, step + 1, metrics,
                            policy.rollout_rows(problems, groups, rewards_BG, adv_BG))
            bar.update()
            bar.set_metrics({"reward": metrics["reward/mean"], "groups": f"{len(kept_groups)}/{len(problems)}"})
    policy.finish(cfg, run, session, f"DAPO chapter ({cfg.algorithm}) on {cfg.data}, {cfg.model}")
    return run


def same_update(cfg_a: Config, cfg_b: Config) -> bool:
    """`policy.same_update` on the resolved switches (dynamic sampling and the overlong ramp change the
    data, so they count as differences)."""
    return policy.same_update(cfg_a.resolved(), cfg_b.resolved())
