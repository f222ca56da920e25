"""Pure, tested verifiers: completion text and gold answer in, reward out."""

from arl.rewards.boxed import any_format_reward, boxed_reward, extract_boxed, normalize_answer

__all__ = ["any_format_reward", "boxed_reward", "extract_boxed", "normalize_answer"]
