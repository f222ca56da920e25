"""Multiple-choice answers in `\\boxed{}`: the Vision GRPO chapter's reward (the reference lab's: the
last `\\boxed{A-D}`, case-insensitive, equal to the gold letter gives 1, anything else 0)."""

from __future__ import annotations

from arl.rewards.boxed import extract_boxed

LETTERS = "ABCD"


def extract_choice(text: str, letters: str = LETTERS) -> str | None:
    """The letter in the last `\\boxed{}` (upper-cased), or None when there is none or it holds
    anything but one of `letters`: the format check."""
    boxed = extract_boxed(text)
    if boxed is None:
        return None
    letter = boxed.strip().upper()
    return letter if len(letter) == 1 and letter in letters else None


def choice_reward(text: str, answer: str) -> float:
    """1.0 if the last boxed letter is `answer`, else 0.0."""
    return float(extract_choice(text) == answer.upper())
