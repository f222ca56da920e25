"""Length shaping."""

from __future__ import annotations


def overlong_penalty(length: int, max_tokens: int, cache: int) -> float:
    """DAPO's soft overlong punishment (Yu et al. 2025, sec. 3.4, eq. 13), added to the task reward:

        0                              if L <= max_tokens - cache
        ((max_tokens - cache) - L) / cache   if max_tokens - cache < L <= max_tokens
        -1                             if L > max_tokens

    A ramp from 0 to -1 over the last `cache` tokens of the budget, so that a truncated answer is
    punished gradually instead of by a cliff that also hits sound reasoning cut short.
    `cache=0` turns it off.
    """
    if cache < 0 or cache > max_tokens:
        raise ValueError(f"overlong cache={cache}: must be between 0 and max_tokens={max_tokens}")
    if cache == 0:
        return 0.0
    start = max_tokens - cache
    if length <= start:
        return 0.0
    if length <= max_tokens:
        return (start - length) / cache
    return -1.0
