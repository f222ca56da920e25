"""Turning sampled tokens into training data, and multi-turn rollouts against environments."""

from .datums import marker_datum, rl_datum, sft_datum, trajectory_datum
from .multiturn import Budgets, ChatTokens, Trajectory, Turn, rollout_groups
from .scoring import forward_tokens, score_completions
from .seeds import request_seed

__all__ = ["Budgets", "ChatTokens", "Trajectory", "Turn", "forward_tokens", "marker_datum", "request_seed", "rl_datum", "rollout_groups",
           "score_completions", "sft_datum", "trajectory_datum"]
