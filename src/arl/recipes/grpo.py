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
from ..client import ServiceClient
from ..coldstart import encode_chat
from ..data import format_prompt
from ..eval import evaluate_boxed
from ..policy import PolicyConfig, Rollout
from ..rewards import boxed_reward
from ..settings import configure
from ..track import RunDir, Tracker, progress


@dataclass
class Config(PolicyConfig):
    """GRPO's fields are the policy-update ones (`arl.policy.PolicyConfig`): loss_fn is the variable of
    this chapter; normalizer, adv_scale, kl_coef and minibatches are the switches it shares with DAPO
    and GSPO."""


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=4, max_tokens=12, sft_steps=2,
                  n_train=64, n_test=8, eval_every=1, save_every=1),
    "mini": {},
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-5, data="gsm8k/train.jsonl",
                 max_tokens=512, steps=100, sft_steps=0),
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    if cfg.threads:
        configure(num_threads=cfg.threads)
    train, test = cfg.load_task()
    service = ServiceClient(run_name=run.name, checkpoint_dir=str(run.checkpoints_dir))
    start, client, ref = policy.start_client(cfg, run, service, train, resume)
    tok = client.get_tokenizer()
    stop = [tok.eos_token]
    test_prompts = [encode_chat(tok, format_prompt(p)) for p in test]

    def held_out(step: int, sampler) -> dict[str, float]:
        return evaluate_boxed(run, step, sampler, test_prompts, [p.answer for p in test], cfg.max_tokens, stop)

    tracker = Tracker.create(cfg.tracker, run)
    if start == 0:
        run.log_metrics(0, held_out(0, client.save_weights_and_get_sampling_client()))
    with progress(cfg.steps, "grpo", initial=start) as bar:
        for step in range(start, cfg.steps):
            t0 = time.perf_counter()
            # 1. sample a group per prompt from the current weights (strictly on-policy)
            sampler = client.save_weights_and_get_sampling_client()
            problems = [policy.draw(train, step * cfg.batch_prompts + i) for i in range(cfg.batch_prompts)]
            prompts = [encode_chat(tok, format_prompt(p)) for p in problems]
            groups = policy.sample_groups(sampler, prompts, cfg, step, stop)
            t_sample = time.perf_counter() - t0

            # 2. reward, 3. group-relative advantage (degenerate groups come back all zero)
            rewards_BG = [[boxed_reward(s.text, p.answer) for s in seqs] for p, seqs in zip(problems, groups)]
            adv_BG, frac_degenerate = advantages.batch_advantages(rewards_BG, scale=cfg.adv_scale)

            # 4. the completions that carry signal; 5. one policy-gradient step (cfg.normalizer's reduction)
            kept = [Rollout(p, s.tokens, s.logprobs, a) for p, seqs, advs in zip(prompts, groups, adv_BG)
                    for s, a in zip(seqs, advs) if a != 0]
            lr = cfg.learning_rate * min(1.0, (step + 1) / max(cfg.warmup_steps, 1))
            metrics = policy.policy_step(client, cfg, kept, cfg.batch_prompts * cfg.group_size, lr, ref) if kept else {}
            t_total = time.perf_counter() - t0

            # 6. log
            flat = [r for rs in rewards_BG for r in rs]
            metrics.update({
                "reward/mean": sum(flat) / len(flat),
                "reward/frac_degenerate": frac_degenerate,
                "rollout/len_mean": sum(len(s.tokens) for seqs in groups for s in seqs) / len(flat),
                "train/datums": float(len(kept)),
                "train/tokens": float(sum(len(r.tokens) for r in kept)),
                "time/sample": t_sample,
                "time/train": t_total - t_sample,
                "time/step": t_total,
            })
            if (step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps:
                metrics.update(held_out(step + 1, client.save_weights_and_get_sampling_client()))
            run.log_metrics(step + 1, metrics)
            run.log_rollouts(step + 1, policy.rollout_rows(problems, groups, rewards_BG, adv_BG))
            tracker.log(step + 1, metrics)
            if (step + 1) % cfg.save_every == 0 or step + 1 == cfg.steps:
                policy.save(run, client, step + 1)
            bar.update()
            bar.set_metrics({"reward": metrics["reward/mean"], "degenerate": frac_degenerate})
    tracker.close()
    policy.finish(cfg, run, f"GRPO ({cfg.loss_fn}) on {cfg.data}, {cfg.model}")
    return run


same_update = policy.same_update
