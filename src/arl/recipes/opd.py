"""General OPD: on-policy distillation, the teacher's logprobs as a per-token learning signal.

The student samples; the teacher scores exactly the student's tokens (`distill.teacher_advantages`);
each token's advantage is the negated sampled reverse KL, A_t = -beta * (log pi_s(y_t) - log pi_t(y_t))
(`advantages.reverse_kl_advantages`, optionally discounted over later tokens), and the update is
`importance_sampling` with a token-mean reduction. No reward and no group baseline: `group_size` is
only more samples per prompt. The task reward is logged for information, never trained on.

`signal=reward` is the chapter's control: the same loop, data, samples and step, with GRPO's
group-relative reward advantage in place of the teacher's (the teacher still scores the samples, so
both arms log how far the student is from it).

Mini setting: the student is the math chapters' cold start (2M parameters, labels that box the answer
only 30% of the time); the teacher a 5M model given an SFT of its own on all-boxed labels (cached).

    arl run opd --preset mini [beta=1.0] [discount=0.0] [signal=reward]
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from .. import advantages
from ..coldstart import ColdStart, run_cold_start, training_seconds
from ..distill import teacher_advantages
from ..rewards import boxed_reward
from ..rl import batch, update
from ..rl.config import DistillConfig, KLConfig, MathConfig, OptimConfig, RunConfig, SamplingConfig, SessionConfig
from ..rl.session import finish, open_session
from ..rollout import rl_datum
from ..track import RunDir

SIGNALS = ("teacher", "reward")


@dataclass
class Config(RunConfig, SessionConfig, OptimConfig, KLConfig, DistillConfig, SamplingConfig, MathConfig):
    teacher_model: str = "arl/tiny-qwen3-5m"
    """The teacher's base model (same tokenizer as the student's)."""
    teacher_sft_steps: int = 1200
    """SFT steps that make the teacher (cached like the student's cold start); 0 = the base model."""
    teacher_sft_learning_rate: float = 2e-3
    """The teacher's SFT learning rate."""
    signal: str = "teacher"
    """What the advantage is: teacher (per-token reverse KL, OPD) or reward (GRPO's group-relative
    boxed reward: the plain-RL control from the same start)."""
    adv_scale: str = "none"
    """The reward control's group advantage: none (r - mean) or std ((r - mean) / std)."""

    def validate(self) -> None:
        super().validate()
        if self.signal not in SIGNALS:
            raise ValueError(f"signal={self.signal!r}: use teacher (OPD) or reward (the GRPO control)")
        if self.adv_scale not in advantages.SCALES:
            raise ValueError(f"adv_scale={self.adv_scale!r}: use one of {', '.join(advantages.SCALES)}")
        if self.signal == "reward" and self.group_size < 2:
            raise ValueError(f"group_size={self.group_size}: the reward control's group baseline needs at least 2 samples")

    def teacher_start(self) -> ColdStart:
        return ColdStart(self.teacher_model, self.teacher_sft_steps, learning_rate=self.teacher_sft_learning_rate,
                         seed=self.start_seed, data_seed=self.start_seed, plain_fraction=0.0,
                         task=f"{self.data}-{self.level}-{self.n_train}")


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", teacher_model="arl/tiny-qwen3-0.5m", teacher_sft_steps=2, steps=2,
                  batch_prompts=2, group_size=2, max_tokens=12, sft_steps=2, n_train=64, n_test=8, eval_every=1,
                  save_every=1),
    "mini": {},
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-5, data="gsm8k/train.jsonl",
                 max_tokens=512, steps=100, sft_steps=0, teacher_model="HuggingFaceTB/SmolLM2-135M-Instruct",
                 teacher_sft_steps=0),
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    task = cfg.math_task()
    session = open_session(cfg, run, resume, task)
    client, tok = session.client, session.tokenizer
    loss = update.Objective("importance_sampling", {}, cfg.normalizer, cfg.max_tokens, cfg.kl_coef, cfg.kl_estimator)
    ref = session.reference() if cfg.kl_coef else None
    # a frozen sampler over the teacher: its own cached SFT, or the base model with teacher_sft_steps=0
    teacher = session.service.create_sampling_client(
        base_model=cfg.teacher_model, model_path=run_cold_start(cfg.teacher_start(), task.train) if cfg.teacher_sft_steps else None)
    if session.start == 0:  # the teacher's own held-out score, under the same protocol (eval/teacher.json)
        # the teacher's SFT is OPD's cost (the compute ledger's), not the reward control's, which only logs its distance
        made = training_seconds(cfg.teacher_start()) if cfg.teacher_sft_steps else 0.0
        cost = {} if made is None else {"time/teacher_sft": made if cfg.signal == "teacher" else 0.0}
        run.log_metrics(0, {"eval/teacher/accuracy": session.held_out(0, teacher, "teacher")["eval/accuracy"], **cost})
    for step in session.steps("opd", shown=("opd/reverse_kl_mean", "reward/mean")):
        t0, stats = time.perf_counter(), update.StepStats(loss)
        # 1. the student samples
        problems = batch.step_items(task.train, step, cfg.batch_prompts)
        prompts = [task.prompt(tok, p) for p in problems]
        groups = batch.sample_groups(client.save_weights_and_get_sampling_client(), prompts, cfg, step, session.stop)
        t_sample = time.perf_counter() - t0

        # 2. the teacher scores the same tokens (per-token reverse-KL advantages); the task reward
        flat = [(p, s) for p, seqs in zip(prompts, groups) for s in seqs]
        kl_adv_K, kl_metrics = teacher_advantages(teacher, [p for p, _ in flat], [s for _, s in flat], cfg.beta, cfg.discount)
        rewards_BG = [[boxed_reward(s.text, p.answer) for s in seqs] for p, seqs in zip(problems, groups)]

        # 3. the advantage: -beta * sampled reverse KL per token (signal=reward: GRPO's group advantage)
        if cfg.signal == "teacher":
            adv_BG = batch.by_group(kl_adv_K, cfg.group_size)
        else:
            adv_BG, _ = advantages.batch_advantages(rewards_BG, scale=cfg.adv_scale)
        kept = batch.with_signal(prompts, groups, adv_BG)

        # 4. datums of the completions with signal (every one, under the teacher), 5. importance-sampling steps
        for mb in update.minibatches(kept, loss, len(flat), cfg.minibatches, ref):
            datums = [rl_datum(r.prompt, r.tokens, r.logprobs, a) for r, a in zip(mb.rollouts, mb.advantages)]
            fb = client.forward_backward_custom(datums, mb.loss) if mb.loss else client.forward_backward(datums, *loss.builtin)
            stats.add(mb, fb.result(), client.optim_step(cfg.adam(step)).result())

        # 6. log: the KL the student is pushed down, both models' logprobs, the task reward
        metrics = {**stats.metrics(), **batch.group_metrics(rewards_BG, groups, kept, t_sample, time.perf_counter() - t0),
                   **kl_metrics}
        session.end_step(step + 1, metrics, task.rows(problems, groups, adv_BG, rewards_BG))
    title = f"On-policy distillation from {cfg.teacher_model} into {cfg.model}" if cfg.signal == "teacher" else \
        f"GRPO control (reward signal) from the OPD chapter's start, {cfg.model}"
    finish(session, title, asdict(cfg))
    return run
