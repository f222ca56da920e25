"""Pure, tested verifiers: completion text and gold answer in, reward out."""

from arl.rewards.boxed import boxed_reward, extract_boxed, normalize_answer

__all__ = ["boxed_reward", "extract_boxed", "normalize_answer"]
