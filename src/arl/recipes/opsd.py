"""OPSD: on-policy self-distillation, the student's own start weights as a teacher that sees the solution.

No second model: the teacher is the student's fixed step-0 weights, given privileged information (the
reference solution) in its prompt; the student's prompt has none. The student samples; the teacher
scores exactly the student's tokens after its own privileged prompt (`distill.teacher_advantages`); each
token's advantage is the negated sampled reverse KL, A_t = -beta * (log pi_s(y_t | x) - log pi_0(y_t |
x, solution)); the update is `importance_sampling` (the reference lab's sampled-token objective, not
the paper's full-vocabulary divergence).

Mini setting: a tiny model cannot read a solution it was never shown, so the cold start shows a share
of its SFT problems with their reference solution in the prompt (`sft_privileged_fraction`) and the
solution as target; the rest are the math chapters' plain problems (answers boxed 30% of the time).
With the solution in its prompt the start model answers most held-out problems; without it, few.

    arl run opsd --preset mini [beta=1.0] [seed=1]

The teacher's weights never change: every step logs the teacher's logprob of one fixed probe
(`opsd/teacher_probe_logprob`, constant) beside the student's (`opsd/student_probe_logprob`, moving).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace

from ..coldstart import encode_chat
from ..data import format_privileged_prompt
from ..distill import teacher_advantages
from ..eval import evaluate_boxed
from ..rewards import boxed_reward
from ..rl import batch, update
from ..rl.config import DistillConfig, KLConfig, MathConfig, OptimConfig, RunConfig, SamplingConfig, SessionConfig
from ..rl.session import finish, open_session
from ..rollout import rl_datum, score_completions
from ..track import RunDir


@dataclass
class Config(RunConfig, SessionConfig, OptimConfig, KLConfig, DistillConfig, SamplingConfig, MathConfig):
    sft_privileged_fraction: float = 0.5
    """Share of cold-start problems shown with their reference solution in the prompt (so that the
    start model, OPSD's teacher, can use one)."""

    def validate(self) -> None:
        super().validate()
        if not 0.0 < self.sft_privileged_fraction < 1.0:
            raise ValueError(f"sft_privileged_fraction={self.sft_privileged_fraction}: must be between 0 and 1 "
                             "(some problems with a solution to read, some without)")
        if self.sft_steps < 1:
            raise ValueError("sft_steps: OPSD's teacher is the cold start; it needs at least 1 SFT step")
        if self.backend != "local":
            raise ValueError(f"backend={self.backend}: OPSD's teacher is its cold start, trained on this machine, "
                             "which a remote service cannot load; run OPSD with backend=local")


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=2, max_tokens=12, sft_steps=2,
                  n_train=64, n_test=8, eval_every=1, save_every=1),
    "mini": {},
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    task = cfg.math_task(replace(cfg.cold_start(), privileged_fraction=cfg.sft_privileged_fraction))
    session = open_session(cfg, run, resume, task)
    client, tok, test = session.client, session.tokenizer, task.test
    loss = update.Objective("importance_sampling", {}, cfg.normalizer, cfg.max_tokens, cfg.kl_coef, cfg.kl_estimator)
    ref = session.reference() if cfg.kl_coef else None
    # the teacher: the start weights, frozen (a sampler over the saved state, never a training client)
    teacher = session.service.create_sampling_client(model_path=session.start_path)
    probe = (encode_chat(tok, format_privileged_prompt(test[0])), tok.encode(test[0].solution, add_special_tokens=False))
    if session.start == 0:  # the teacher with its privilege, under the same protocol (eval/teacher.json)
        out = evaluate_boxed(run, 0, teacher, [encode_chat(tok, format_privileged_prompt(p)) for p in test],
                             [p.answer for p in test], cfg.max_tokens, session.stop, "teacher")
        run.log_metrics(0, {"eval/teacher/accuracy": out["eval/accuracy"]})
    for step in session.steps("opsd", shown=("opd/reverse_kl_mean", "reward/mean")):
        t0, stats = time.perf_counter(), update.StepStats(loss)
        # 1. the student samples from the plain prompt
        sampler = client.save_weights_and_get_sampling_client()
        problems = batch.step_items(task.train, step, cfg.batch_prompts)
        prompts = [task.prompt(tok, p) for p in problems]
        groups = batch.sample_groups(sampler, prompts, cfg, step, session.stop)
        t_sample = time.perf_counter() - t0

        # 2. the teacher scores the same tokens after the privileged prompt: per-token reverse-KL advantages
        privileged = [encode_chat(tok, format_privileged_prompt(p)) for p, seqs in zip(problems, groups) for _ in seqs]
        adv_K, kl_metrics = teacher_advantages(teacher, privileged, [s for seqs in groups for s in seqs], cfg.beta, cfg.discount)
        adv_BG = batch.by_group(adv_K, cfg.group_size)
        rollouts = batch.with_signal(prompts, groups, adv_BG)

        # 3. datums of every sampled token, importance-sampling steps
        for mb in update.minibatches(rollouts, loss, cfg.batch_prompts * cfg.group_size, cfg.minibatches, ref):
            datums = [rl_datum(r.prompt, r.tokens, r.logprobs, a) for r, a in zip(mb.rollouts, mb.advantages)]
            fb = client.forward_backward_custom(datums, mb.loss) if mb.loss else client.forward_backward(datums, *loss.builtin)
            stats.add(mb, fb.result(), client.optim_step(cfg.adam(step)).result())
        t_total = time.perf_counter() - t0

        # 4. log: the KL, the probe (teacher constant, student moving), the task reward (not trained on)
        rewards_BG = [[boxed_reward(s.text, p.answer) for s in seqs] for p, seqs in zip(problems, groups)]
        metrics = {**stats.metrics(), **batch.group_metrics(rewards_BG, groups, rollouts, t_sample, t_total), **kl_metrics,
                   "opsd/teacher_probe_logprob": sum(score_completions(teacher, [probe])[0]),
                   "opsd/student_probe_logprob": sum(score_completions(sampler, [(task.prompt(tok, test[0]), probe[1])])[0])}
        session.end_step(step + 1, metrics, task.rows(problems, groups, adv_BG, rewards_BG))
    finish(session, f"On-policy self-distillation (privileged teacher = start weights), {cfg.model}", asdict(cfg))
    return run
