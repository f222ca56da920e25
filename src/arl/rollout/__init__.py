"""Turning sampled tokens into training data (and, for agents, multi-turn rollouts)."""

from .datums import rl_datum, sft_datum

__all__ = ["rl_datum", "sft_datum"]
