"""Held-out evaluation with a fixed protocol."""

from .protocol import LABELS, EvalResult, before_after, evaluate, summary_rows

__all__ = ["LABELS", "EvalResult", "before_after", "evaluate", "summary_rows"]
