"""On-policy distillation's shared pieces: the teacher's signal on the student's own samples, and the
interleaved schedule of a multi-teacher run.

Path 02's three chapters (General OPD, specialist/general OPD, OPSD) differ in who the teacher is and
what it sees (another model; the base model or an SFT specialist; the student's own start weights with
the reference solution in its prompt); the signal is the same sampled-token reverse KL.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from . import advantages
from .rollout import forward_tokens, score_completions


def teacher_advantages(teacher, teacher_prompts: Sequence[list[int]], seqs: Sequence, beta: float = 1.0,
                       discount: float = 0.0) -> tuple[list[list[float]], dict[str, float]]:
    """(per-token advantages A_t = -beta * (log pi_s(y_t) - log pi_t(y_t)) of each completion, `opd/` metrics).

    `seqs` are the student's sampled completions (tokens and sampler logprobs); completion k is scored
    by `teacher` after `teacher_prompts[k]`, which is the student's prompt in OPD and a privileged one
    in OPSD: only the completion's tokens are compared, each at its own position
    (`rollout.score_completions`). Metrics: the sampled reverse KL's mean and spread over tokens, and
    both models' mean logprob of the student's tokens, and the tokens the teacher read (for the compute ledger).
    """
    teacher_KT = score_completions(teacher, [(p, s.tokens) for p, s in zip(teacher_prompts, seqs, strict=True)])
    adv_K = [advantages.reverse_kl_advantages(s.logprobs, t_T, beta, discount) for s, t_T in zip(seqs, teacher_KT)]
    kl_N = [s - t for seq, t_T in zip(seqs, teacher_KT) for s, t in zip(seq.logprobs, t_T)]
    metrics = {
        "opd/reverse_kl_mean": statistics.fmean(kl_N),
        "opd/reverse_kl_std": statistics.pstdev(kl_N),
        "opd/student_logprob_mean": statistics.fmean(x for s in seqs for x in s.logprobs),
        "opd/teacher_logprob_mean": statistics.fmean(x for t_T in teacher_KT for x in t_T),
        "teacher/forward_tokens": forward_tokens(teacher_prompts, [[s.tokens] for s in seqs]),
    }
    return adv_K, metrics


def parse_ratio(text: str, names: Sequence[str]) -> list[tuple[str, int]]:
    """`"2:1"` for names (a, b) -> [(a, 2), (b, 1)]: steps of each domain per cycle, every count >= 0
    and at least one positive."""
    parts = text.split(":")
    if len(parts) != len(names) or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"schedule {text!r}: write {len(names)} whole numbers separated by ':' "
                         f"(steps of {', '.join(names)} per cycle), for example {':'.join('1' * len(names))}")
    counts = [int(p) for p in parts]
    if sum(counts) == 0:
        raise ValueError(f"schedule {text!r}: at least one domain needs a step per cycle")
    return list(zip(names, counts))


def parse_stages(text: str, starts: dict[str, str]) -> list[str]:
    """`"opd,sar-opd"` as a list of stages, checked: each one of `starts` (stage -> the stage whose final
    weights it starts from), none twice, and each one's start, when it is itself a stage, listed before it."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    for i, name in enumerate(names):
        if name not in starts:
            raise ValueError(f"stages: unknown stage {name!r}; choose from {', '.join(starts)}")
        if name in names[:i]:
            raise ValueError(f"stages: {name!r} is listed twice")
        if starts[name] in starts and starts[name] not in names[:i]:
            raise ValueError(f"stages: {name!r} starts from {starts[name]!r}; list {starts[name]!r} before it")
    if not names:
        raise ValueError(f"stages: name at least one of {', '.join(starts)}")
    return names


def interleaved_schedule(ratio: Sequence[tuple[str, int]], steps: int) -> list[tuple[str, int]]:
    """The domain of each of `steps` steps, with that domain's own batch index (its data cursor):
    cycles of `count` consecutive steps per domain, in the order given (IDT-OPD's fixed schedule).

    ratio [("specialist", 1), ("general", 1)], steps 4 ->
        [("specialist", 0), ("general", 0), ("specialist", 1), ("general", 1)]
    """
    cycle = [name for name, count in ratio for _ in range(count)]
    cursors: dict[str, int] = {}
    out = []
    for step in range(steps):
        name = cycle[step % len(cycle)]
        out.append((name, cursors.get(name, 0)))
        cursors[name] = cursors.get(name, 0) + 1
    return out
