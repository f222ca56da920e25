"""Pure, tested verifiers: completion text and gold answer in, reward out."""

from arl.rewards.boxed import any_format_reward, boxed_reward, extract_boxed, normalize_answer
from arl.rewards.length import overlong_penalty

__all__ = ["any_format_reward", "boxed_reward", "extract_boxed", "normalize_answer", "overlong_penalty"]
