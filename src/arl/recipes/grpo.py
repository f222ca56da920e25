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
from dataclasses import dataclass

from .. import advantages, policy
from ..policy import PolicyConfig, Rollout
from ..rewards import boxed_reward
from ..track import RunDir, progress


@dataclass
class Config(PolicyConfig):
    """GRPO's fields are the policy-update ones (`arl.policy.PolicyConfig`): loss_fn is the variable of
    this chapter; normalizer, adv_scale, kl_coef and minibatches are the switches it shares with DAPO
    and GSPO."""


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=4, max_tokens=32, sft_steps=60,
                  sft_plain_fraction=0.0, n_train=64, n_test=8, eval_every=1, save_every=1),
    "mini": {},
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-5, data="gsm8k/train.jsonl",
                 max_tokens=512, steps=100, sft_steps=0),
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    session = policy.open_session(cfg, run, resume)
    client, train = session.client, session.train
    with progress(cfg.steps, "grpo", initial=session.start) as bar:
        for step in range(session.start, cfg.steps):
            t0 = time.perf_counter()
            # 1. sample a group per prompt from the current weights (strictly on-policy)
            sampler = client.save_weights_and_get_sampling_client()
            problems = policy.step_problems(train, step, cfg.batch_prompts)
            prompts = [session.prompt(p) for p in problems]
            groups = policy.sample_groups(sampler, prompts, cfg, step, session.stop)
            t_sample = time.perf_counter() - t0

            # 2. reward, 3. group-relative advantage (degenerate groups come back all zero)
            rewards_BG = [[boxed_reward(s.text, p.answer) for s in seqs] for p, seqs in zip(problems, groups)]
            adv_BG, frac_degenerate = advantages.batch_advantages(rewards_BG, scale=cfg.adv_scale)

            # 4. the completions that carry signal; 5. one policy-gradient step (cfg.normalizer's reduction)
            kept = [Rollout(p, s.tokens, s.logprobs, a) for p, seqs, advs in zip(prompts, groups, adv_BG)
                    for s, a in zip(seqs, advs) if a != 0]
            lr = cfg.learning_rate_at(step)
            metrics = policy.policy_step(client, cfg, kept, cfg.batch_prompts * cfg.group_size, lr, session.ref) if kept else {}
            t_total = time.perf_counter() - t0

            # 6. log (held-out eval and checkpoint when due)
            metrics.update(policy.group_metrics(rewards_BG, groups, kept, frac_degenerate, t_sample, t_total))
            policy.end_step(cfg, run, session, step + 1, metrics,
                            policy.rollout_rows(problems, groups, rewards_BG, adv_BG))
            bar.update()
            bar.set_metrics({"reward": metrics["reward/mean"], "degenerate": frac_degenerate})
    policy.finish(cfg, run, session, f"GRPO ({cfg.loss_fn}) on {cfg.data}, {cfg.model}")
    return run


same_update = policy.same_update
