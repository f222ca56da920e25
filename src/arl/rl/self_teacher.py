"""A privileged self-teacher for multi-turn episodes (AgentOPSD): the policy's own frozen snapshot,
shown skill text the student never sees, scores the student's actions turn by turn.

    teacher prompt   the episode's opening with "[Privileged Skill Information]\\n<skills>\\n\\n" before
                     the system prompt (the reference lab's 09-AgentOPSD layout)
    teacher tokens   teacher prompt + the student's whole stream after its own prompt (actions,
                     template, observations), scored in one `compute_logprobs` per episode
    evidence e_t     sum over turn t's action tokens of (log pi_teacher - log pi_student), the student's
                     being the sampler's logprobs the episode was played with

`arl.advantages.belief_credit` turns the evidence into each turn's share of the episode's advantage.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean

from ..rollout import score_completions
from ..rollout.multiturn import POLICY, ChatTokens, Trajectory

PRIVILEGED = "[Privileged Skill Information]\n{skills}\n\n"


def privileged_opening(opening: list[dict], skills: str) -> list[dict]:
    """The opening's messages with the skills prepended to its system message (the first message)."""
    if not opening or opening[0]["role"] != "system":
        raise ValueError("privileged_opening: the opening must start with a system message to prepend the skills to")
    return [{**opening[0], "content": PRIVILEGED.format(skills=skills) + opening[0]["content"]}, *opening[1:]]


def teacher_prompt(chat: ChatTokens, opening: list[dict], tools: Sequence, skills: str) -> list[int]:
    """The opening's tokens with the skills prepended to its system message (`privileged_opening`)."""
    return chat.prompt(privileged_opening(opening, skills), tools)


def teacher_logprobs(sampler, prompts: Sequence[list[int]], trajectories: Sequence[Trajectory]) -> list[list[float]]:
    """The teacher's logprob of every token of each trajectory after its prompt, given its teacher prompt."""
    return score_completions(sampler, [(p, t.tokens) for p, t in zip(prompts, trajectories, strict=True)])


def turn_evidence(trajectory: Trajectory, teacher_lp_T: Sequence[float]) -> list[float]:
    """e_t per turn: the teacher's minus the student's logprob, summed over the turn's action tokens
    (template and observation tokens are the game's and the template's, not the student's choice)."""
    if len(teacher_lp_T) != len(trajectory.tokens):
        raise ValueError(f"turn_evidence: {len(teacher_lp_T)} teacher logprobs for {len(trajectory.tokens)} tokens")
    evidence_T, i = [], 0
    for turn in trajectory.turns:
        evidence_T.append(sum(teacher_lp_T[i + j] - lp for j, (s, lp) in enumerate(zip(turn.source, turn.logprobs))
                              if s == POLICY))
        i += len(turn.tokens)
    return evidence_T


def per_token(trajectory: Trajectory, per_turn: Sequence[float]) -> list[float]:
    """A per-turn value spread over each turn's tokens (the datum keeps it at the action tokens only)."""
    if len(per_turn) != len(trajectory.turns):
        raise ValueError(f"per_token: {len(per_turn)} values for {len(trajectory.turns)} turns")
    return [v for turn, v in zip(trajectory.turns, per_turn) for _ in turn.tokens]


def credit_metrics(evidence_BG, credit_BG, adv_BG, teacher_BG) -> dict[str, float]:
    """A step's `opsd/...` metrics: the evidence per turn over every episode; the belief moves, turn weights
    and advantage multipliers (`advantages.belief_credit`'s outputs) over the trained episodes (A != 0);
    the teacher's requests and scored tokens."""
    evidence = [e for e_G in evidence_BG for e_T in e_G for e in e_T]
    out = {"opsd/teacher_requests": float(sum(map(len, teacher_BG))),
           "opsd/teacher_tokens": float(sum(len(lp) for lp_G in teacher_BG for lp in lp_G))}
    if evidence:
        out.update({"opsd/evidence_mean": fmean(evidence), "opsd/evidence_abs_mean": fmean(map(abs, evidence))})
    trained = [c for c_G, adv_G in zip(credit_BG, adv_BG) for c, a in zip(c_G, adv_G) if a and c["adv"]]
    if trained:
        delta = [d for c in trained for d in c["delta_b"]]
        weight = [w for c in trained for w in c["weight"]]
        mult = [m for c in trained for m in c["multiplier"]]
        out.update({"opsd/delta_b_mean": fmean(delta), "opsd/delta_b_abs_mean": fmean(map(abs, delta)),
                    "opsd/weight_mean": fmean(weight), "opsd/weight_min": min(weight), "opsd/weight_max": max(weight),
                    "opsd/adv_multiplier_min": min(mult), "opsd/adv_multiplier_max": max(mult)})
    return out
