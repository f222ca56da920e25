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
from dataclasses import dataclass, replace

from .. import advantages, policy
from ..client import ServiceClient
from ..coldstart import ColdStart, encode_chat
from ..data import format_privileged_prompt
from ..distill import DistillConfig, teacher_advantages
from ..eval import evaluate_boxed
from ..policy import Rollout
from ..rewards import boxed_reward
from ..rollout import score_completions
from ..track import RunDir, progress


@dataclass
class Config(DistillConfig):
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

    def cold_start(self) -> ColdStart:
        return replace(super().cold_start(), privileged_fraction=self.sft_privileged_fraction)


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=2, max_tokens=12, sft_steps=2,
                  n_train=64, n_test=8, eval_every=1, save_every=1),
    "mini": {},
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    session = policy.open_session(cfg, run, resume)
    tok, test = session.tokenizer, session.test
    # the teacher: the start weights, frozen (a sampler over the saved state, never a training client)
    teacher = ServiceClient(run_name="teacher").create_sampling_client(model_path=session.start_path)
    probe = (encode_chat(tok, format_privileged_prompt(test[0])), tok.encode(test[0].solution, add_special_tokens=False))
    if session.start == 0:  # the teacher with its privilege, under the same protocol (eval/teacher.json)
        out = evaluate_boxed(run, 0, teacher, [encode_chat(tok, format_privileged_prompt(p)) for p in test],
                             [p.answer for p in test], cfg.max_tokens, session.stop, "teacher")
        run.log_metrics(0, {"eval/teacher/accuracy": out["eval/accuracy"]})
    with progress(cfg.steps, "opsd", initial=session.start) as bar:
        for step in range(session.start, cfg.steps):
            t0 = time.perf_counter()
            # 1. the student samples from the plain prompt
            sampler = session.client.save_weights_and_get_sampling_client()
            problems = policy.step_problems(session.train, step, cfg.batch_prompts)
            prompts = [session.prompt(p) for p in problems]
            groups = policy.sample_groups(sampler, prompts, cfg, step, session.stop)
            t_sample = time.perf_counter() - t0

            # 2. the teacher scores the same tokens after the privileged prompt: per-token reverse-KL advantages
            flat = [(p, problem, s) for p, problem, seqs in zip(prompts, problems, groups) for s in seqs]
            teacher_prompts = [encode_chat(tok, format_privileged_prompt(problem)) for _, problem, _ in flat]
            adv_K, kl_metrics = teacher_advantages(teacher, teacher_prompts, [s for *_, s in flat], cfg.beta, cfg.discount)
            rollouts = [Rollout(p, s.tokens, s.logprobs, a) for (p, _, s), a in zip(flat, adv_K)]

            # 3. importance-sampling step on every sampled token
            metrics = policy.policy_step(session.client, cfg, rollouts, len(rollouts), cfg.learning_rate_at(step), session.ref)
            t_total = time.perf_counter() - t0

            # 4. log: the KL, the probe (teacher constant, student moving), the task reward (not trained on)
            rewards_BG = [[boxed_reward(s.text, p.answer) for s in seqs] for p, seqs in zip(problems, groups)]
            frac_degenerate = sum(map(advantages.is_degenerate, rewards_BG)) / len(rewards_BG)
            metrics.update(policy.group_metrics(rewards_BG, groups, rollouts, frac_degenerate, t_sample, t_total))
            metrics.update(kl_metrics)
            metrics["opsd/teacher_probe_logprob"] = sum(score_completions(teacher, [probe])[0])
            metrics["opsd/student_probe_logprob"] = sum(score_completions(sampler, [(session.prompt(test[0]), probe[1])])[0])
            adv_BG = [adv_K[b * cfg.group_size:(b + 1) * cfg.group_size] for b in range(len(groups))]
            policy.end_step(cfg, run, session, step + 1, metrics, policy.rollout_rows(problems, groups, rewards_BG, adv_BG))
            bar.update()
            bar.set_metrics({"kl": metrics["opd/reverse_kl_mean"], "reward": metrics["reward/mean"]})
    policy.finish(cfg, run, session, f"On-policy self-distillation (privileged teacher = start weights), {cfg.model}")
    return run
