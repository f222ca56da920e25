"""Exact match of a final `Answer:` line: the Search-R1 chapter's reward.

Rule: the LAST line of the final assistant turn that starts with `Answer:` (any case) holds the
answer; it is compared with every gold alias after SQuAD normalisation. Rewards:
    1.0 correct; 0.0 wrong but well formed; `penalty` (default -0.1) when malformed:
    no `Answer:` line ("missing"), nothing after it ("empty"), or a turn that still contains a
    `<tool_call>` ("tool_call": the answer turn must not call a tool).
The penalty makes a formatted wrong answer worth more than no answer, so that early in training the
format is learnt before the facts (the reference lab's -0.1). The reference took exactly one
`Answer:` line; here the last one counts, as `\\boxed{}` answers do (`arl.rewards.boxed`), so a
policy that corrects itself is not penalised.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

FORMAT_PENALTY = -0.1
_ANSWER_LINE = re.compile(r"^[ \t]*answer:(.*)$", re.I | re.M)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def squad_normalize(s: str) -> str:
    """SQuAD's answer normalisation: lowercase, drop punctuation (ASCII and Unicode), drop the
    articles a/an/the, squeeze whitespace. "The Selva River." -> "selva river"; "O'Neil" -> "oneil"
    (punctuation is deleted, not replaced by a space, as in SQuAD's evaluation script)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in string.punctuation and not unicodedata.category(ch).startswith("P"))
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


@dataclass(frozen=True)
class ParsedAnswer:
    answer: str | None
    """The text after the last `Answer:`, stripped; None unless `outcome` is "answered"."""
    outcome: str
    """"answered", or why not: "missing", "empty", "tool_call"."""


def parse_answer(text: str) -> ParsedAnswer:
    """Read the final answer of an assistant turn (see the module docstring for the rule)."""
    if "<tool_call>" in text:
        return ParsedAnswer(None, "tool_call")
    lines = _ANSWER_LINE.findall(text)
    if not lines:
        return ParsedAnswer(None, "missing")
    answer = lines[-1].strip()
    if not squad_normalize(answer):
        return ParsedAnswer(None, "empty")
    return ParsedAnswer(answer, "answered")


@dataclass(frozen=True)
class AnswerGrade:
    reward: float
    outcome: str
    """"correct", "wrong", or the malformed outcome of `parse_answer` ("missing", "empty", "tool_call")."""
    answer: str | None


def grade_answer(text: str, answers: str | Sequence[str], penalty: float = FORMAT_PENALTY) -> AnswerGrade:
    """Reward and outcome of a final assistant turn against the gold `answers` (one or aliases)."""
    golds = [answers] if isinstance(answers, str) else list(answers)
    if not golds:
        raise ValueError("answers is empty: give the gold answer (a string or a list of aliases)")
    parsed = parse_answer(text)
    if parsed.answer is None:
        return AnswerGrade(penalty, parsed.outcome, None)
    correct = squad_normalize(parsed.answer) in {squad_normalize(g) for g in golds}
    return AnswerGrade(1.0 if correct else 0.0, "correct" if correct else "wrong", parsed.answer)


def answer_reward(text: str, answers: str | Sequence[str], penalty: float = FORMAT_PENALTY) -> float:
    """1.0 / 0.0 / `penalty`: `grade_answer(...).reward`."""
    return grade_answer(text, answers, penalty).reward
