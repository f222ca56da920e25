"""Turning sampled tokens into training data (and, for agents, multi-turn rollouts)."""

from .datums import marker_datum, rl_datum, sft_datum
from .scoring import score_completions

__all__ = ["marker_datum", "rl_datum", "score_completions", "sft_datum"]
