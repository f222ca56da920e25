"""Held-out evaluation with a fixed protocol."""

from .protocol import EvalResult, evaluate

__all__ = ["EvalResult", "evaluate"]
