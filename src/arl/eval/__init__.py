"""Held-out evaluation with a fixed protocol."""

from .protocol import LABELS, EvalResult, before_after, evaluate, evaluate_boxed, summary_rows

__all__ = ["LABELS", "EvalResult", "before_after", "evaluate", "evaluate_boxed", "summary_rows"]
