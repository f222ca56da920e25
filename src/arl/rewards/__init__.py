"""Pure, tested verifiers: completion text and gold answer in, reward out."""

from arl.rewards.boxed import any_format_reward, boxed_reward, extract_boxed, normalize_answer
from arl.rewards.choice import choice_reward, extract_choice
from arl.rewards.em import (
    FORMAT_PENALTY, AnswerGrade, ParsedAnswer, answer_reward, grade_answer, parse_answer, squad_normalize,
)
from arl.rewards.length import overlong_penalty
from arl.rewards.vetting import BAD_FORMAT_PENALTY, extract_vetting, vetting_reward

__all__ = [
    "BAD_FORMAT_PENALTY", "FORMAT_PENALTY", "AnswerGrade", "ParsedAnswer", "answer_reward", "any_format_reward", "boxed_reward", "choice_reward",
    "extract_boxed", "extract_choice", "extract_vetting", "grade_answer", "normalize_answer", "overlong_penalty", "parse_answer", "squad_normalize", "vetting_reward",
]
