"""GRPO: sample a group of answers per prompt, reward them, push up the better-than-average ones.

Group Relative Policy Optimization (Shao et al. 2024, DeepSeekMath sec. 4.1) without a critic: the
baseline of an answer is the mean reward of its group, A_i = r_i - mean(r) (no std scaling, as in the
reference lab). Groups where every answer got the same reward carry no signal and are skipped
(`reward/frac_degenerate`). Loss reduction: token mean over the batch (each datum's advantages are
divided by the number of completion tokens in the step), since the built-in losses are sums.

    arl run grpo --preset mini [loss_fn=ppo] [seed=1]
"""

from __future__ import annotations

import json
import resource
import time
from dataclasses import asdict, dataclass

from .. import advantages, checkpoints, report
from ..client import ServiceClient
from ..config import require_positive
from ..coldstart import MathTask, encode_chat, run_cold_start
from ..data import format_prompt
from ..eval import before_after, evaluate_boxed, summary_rows
from ..rewards import boxed_reward
from ..rollout import rl_datum
from ..settings import configure
from ..track import RunDir, Tracker, progress
from ..types import AdamParams, ModelInput, SamplingParams

LOSS_FNS = ("importance_sampling", "ppo", "cispo")


@dataclass
class Config(MathTask):
    loss_fn: str = "importance_sampling"
    """Policy loss: importance_sampling, ppo or cispo. Nothing else changes with it."""
    steps: int = 150
    """GRPO steps (one optimizer step each)."""
    batch_prompts: int = 8
    """Prompts per step."""
    group_size: int = 8
    """Samples per prompt; the group mean is each sample's baseline."""
    max_tokens: int = 40
    """Max new tokens per sample."""
    temperature: float = 1.0
    """Sampling temperature for training rollouts."""
    learning_rate: float = 1e-4
    """AdamW learning rate of the RL phase."""
    warmup_steps: int = 0
    """Linear learning-rate warm-up over the first N steps (a fresh Adam's first updates are full-size)."""
    grad_clip_norm: float = 1.0
    """Global gradient-norm clip (0 = off)."""
    lora_rank: int = 0
    """0 = full fine-tuning (the tiny models), else a LoRA rank."""
    eval_every: int = 25
    """Evaluate on the held-out set every N steps (and before and after)."""
    save_every: int = 10
    """Checkpoint every N steps (what --resume restarts from)."""
    seed: int = 0
    """Seed of the model, the sampling and the prompt order (the data split is fixed)."""
    threads: int = 0
    """torch threads (0 = the default, min(2, cores))."""
    tracker: str | None = None
    """Optional external tracker: tensorboard, swanlab or wandb."""

    def validate(self) -> None:
        super().validate()
        if self.loss_fn not in LOSS_FNS:
            raise ValueError(f"loss_fn={self.loss_fn!r}: use one of {', '.join(LOSS_FNS)}")
        require_positive(self, "steps", "batch_prompts", "group_size", "max_tokens", "eval_every", "save_every")
        if self.group_size < 2:
            raise ValueError(f"group_size={self.group_size}: GRPO needs at least 2 samples per prompt")


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
    start, client = _start(cfg, run, service, train, resume)
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
            problems = [train[(step * cfg.batch_prompts + i) * 7919 % len(train)] for i in range(cfg.batch_prompts)]
            prompts = [encode_chat(tok, format_prompt(p)) for p in problems]
            futures = [sampler.sample(ModelInput.from_ints(p), cfg.group_size,
                                      SamplingParams(max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                                                     seed=cfg.seed * 1_000_003 + step * 1000 + i, stop=stop))
                       for i, p in enumerate(prompts)]
            groups = [f.result().sequences for f in futures]
            t_sample = time.perf_counter() - t0

            # 2. reward, 3. group-relative advantage (degenerate groups come back all zero)
            rewards_BG = [[boxed_reward(s.text, p.answer) for s in seqs] for p, seqs in zip(problems, groups)]
            adv_BG, frac_degenerate = advantages.batch_advantages(rewards_BG)

            # 4. datums: token-mean normalisation over the completions that carry signal
            kept = [(p, s, a) for p, seqs, advs in zip(prompts, groups, adv_BG) for s, a in zip(seqs, advs) if a != 0]
            n_tokens = sum(len(s.tokens) for _, s, _ in kept)
            datums = [rl_datum(p, s.tokens, s.logprobs, a / n_tokens) for p, s, a in kept]

            # 5. one policy-gradient step
            metrics = {}
            if datums:
                fb = client.forward_backward(datums, cfg.loss_fn)
                lr = cfg.learning_rate * min(1.0, (step + 1) / max(cfg.warmup_steps, 1))
                optim = client.optim_step(AdamParams(learning_rate=lr, grad_clip_norm=cfg.grad_clip_norm))
                out, opt = fb.result(), optim.result()
                metrics.update(_train_metrics(cfg.loss_fn, out, kept, opt.metrics))
            t_total = time.perf_counter() - t0

            # 6. log
            flat = [r for rs in rewards_BG for r in rs]
            metrics.update({
                "reward/mean": sum(flat) / len(flat),
                "reward/frac_degenerate": frac_degenerate,
                "rollout/len_mean": sum(len(s.tokens) for seqs in groups for s in seqs) / len(flat),
                "train/datums": float(len(datums)),
                "train/tokens": float(n_tokens),
                "time/sample": t_sample,
                "time/train": t_total - t_sample,
                "time/step": t_total,
            })
            if (step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps:
                metrics.update(held_out(step + 1, client.save_weights_and_get_sampling_client()))
            run.log_metrics(step + 1, metrics)
            run.log_rollouts(step + 1, _rollout_rows(problems, groups, rewards_BG, adv_BG))
            tracker.log(step + 1, metrics)
            if (step + 1) % cfg.save_every == 0 or step + 1 == cfg.steps:
                _save(run, client, step + 1)
            bar.update()
            bar.set_metrics({"reward": metrics["reward/mean"], "degenerate": frac_degenerate})
    tracker.close()
    _finish(cfg, run)
    return run


def _start(cfg: Config, run: RunDir, service: ServiceClient, train, resume: bool):
    """(first step, training client): the last checkpoint of a resumed run, else the cold start."""
    if resume:
        latest = run.checkpoints_dir / "latest.json"
        if latest.is_file():
            saved = json.loads(latest.read_text())
            run.truncate_after(saved["step"])  # steps logged after the checkpoint are redone identically
            return saved["step"], service.create_training_client_from_state_with_optimizer(saved["path"])
        run.truncate_after(-1)
    if cfg.sft_steps > 0:
        # a fresh optimizer for the RL phase
        client = service.create_training_client_from_state(run_cold_start(cfg.cold_start(), train))
    elif cfg.lora_rank:
        client = service.create_lora_training_client(cfg.model, rank=cfg.lora_rank, seed=cfg.seed)
    else:
        client = service.create_full_training_client(cfg.model, seed=cfg.seed)
    return 0, client


def _save(run: RunDir, client, step: int) -> None:
    path = client.save_state(f"step-{step:04d}").result().path
    checkpoints.write_json(run.checkpoints_dir / "latest.json", {"step": step, "path": path})


def _train_metrics(loss_fn: str, out, kept, optim_metrics) -> dict[str, float]:
    """Trainer-side metrics, and how far the sampler's logprobs are from the trainer's for the same
    tokens (should be ~0 on the local engine; large gaps mean off-policy data)."""
    gaps = []
    for (p, s, _), o in zip(kept, out.loss_fn_outputs):
        trainer_lp = o["logprobs"].tolist()[len(p) - 1:]
        gaps += [abs(a - b) for a, b in zip(trainer_lp, s.logprobs)]
    m = {"loss/sum": out.metrics["loss:sum"], "train/active_tokens": out.metrics["tokens/active"],
         "train/logprob_gap": max(gaps) if gaps else 0.0, **{f"optim/{k.split('/')[-1]}": v for k, v in optim_metrics.items()}}
    for key, value in out.metrics.items():
        if key.startswith(f"{loss_fn}/"):
            m["ratio/" + key.split("/", 1)[1].removesuffix("_mean")] = value
    return m


def _rollout_rows(problems, groups, rewards_BG, adv_BG) -> list[dict]:
    return [{"prompt": p.question, "answer": p.answer, "completion": s.text, "tokens": s.tokens, "logprobs": s.logprobs,
             "reward": r, "advantage": a, "stop_reason": s.stop_reason}
            for p, seqs, rs, advs in zip(problems, groups, rewards_BG, adv_BG) for s, r, a in zip(seqs, rs, advs)]


def _finish(cfg: Config, run: RunDir) -> None:
    keys = ("accuracy", "format_rate", "accuracy_given_format", "accuracy_any_format")
    evals, summary = before_after(run, keys)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    run.write_eval("summary", {**summary, "peak_rss_mb": peak_mb, "config": asdict(cfg)})
    report.plot_metrics(run)
    report.write_report(
        run, f"GRPO ({cfg.loss_fn}) on {cfg.data}, {cfg.model}",
        summary_rows=summary_rows(summary, keys) + [{"metric": "peak memory (MB)", "before": "", "after": round(peak_mb)}],
        eval_table=[{"step": int(n.split("-")[1]), "accuracy": e["accuracy"], "format": e.get("format_rate"),
                     "truncated": e["truncated"]} for n, e in sorted(evals.items())],
        rollouts_sample=run.read_rollouts(cfg.steps)[:6],
    )
