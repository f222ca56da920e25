"""The Spec-o3 vetting answer and reward (the reference lab's LAB 15, from the Spec-o3 paper).

The answer is `<answer>\\boxed{YES} ...</answer>` or `<answer>\\boxed{NO} ...</answer>`; the last
complete answer block counts, and its first boxed YES/NO is the prediction. Reward:

    r = 1[prediction == gold] - 0.2 * 1[no readable answer]        (1.0 / 0.0 / -0.2)

The reference lab's training parser is more lenient than its evaluation parser; here one strict
parser serves both, so the reward and the reported format rate mean the same thing.
"""

from __future__ import annotations

import re

BAD_FORMAT_PENALTY = -0.2
_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.S)
_BOXED = re.compile(r"\\boxed\{\s*(YES|NO)\s*\}")


def extract_vetting(text: str) -> str | None:
    """YES or NO from the last complete `<answer>...</answer>` block's first `\\boxed{YES|NO}`; None if none."""
    blocks = _BLOCK.findall(text)
    if not blocks:
        return None
    found = _BOXED.search(blocks[-1])
    return found.group(1) if found else None


def vetting_reward(text: str, gold: str) -> float:
    """1 for the gold YES/NO, 0 for the other, `BAD_FORMAT_PENALTY` when no answer can be read."""
    predicted = extract_vetting(text)
    if predicted is None:
        return BAD_FORMAT_PENALTY
    return float(predicted == gold)
