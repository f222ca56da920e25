"""Probabilities over a question's fixed candidates, temperature scaling, and how well they are
calibrated: accuracy, NLL, ECE, Brier and the bins of a reliability diagram.

A question has C_q candidates (2 for yes/no, 5 for a score, the options of a choice), so a split is
a list of per-question arrays `logp_C` (the model's next-token logprobs of the candidate symbols) and
the index of the correct candidate. Every function takes that list as it is.

Temperature scaling (Guo et al. 2017, "On Calibration of Modern Neural Networks", section 4.2):
p_T = softmax(logp / T). Dividing by T > 0 keeps the order of the logprobs, so the argmax and the
accuracy never change; only the confidence does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

T_RANGE = (0.05, 20.0)
"""The search interval of `fit_temperature`."""


def restricted_softmax(logp_C: Sequence[float], temperature: float = 1.0) -> np.ndarray:
    """p_c = exp(logp_c / T) / sum_c' exp(logp_c' / T) over the candidates only.

    Restricting the softmax renormalises away every other token: the log-partition of the full
    vocabulary is a constant shift of all logp_c and cancels.
    """
    if temperature <= 0:
        raise ValueError(f"temperature={temperature}: must be > 0")
    z_C = np.asarray(logp_C, dtype=np.float64) / temperature
    z_C = z_C - z_C.max()
    e_C = np.exp(z_C)
    return e_C / e_C.sum()


def nll(logps: Sequence[Sequence[float]], answers: Sequence[int], temperature: float = 1.0) -> float:
    """Mean over questions of -log p_T(correct candidate)."""
    _check(logps, answers)
    total = 0.0
    for logp_C, a in zip(logps, answers):
        z_C = np.asarray(logp_C, dtype=np.float64) / temperature
        total += float(np.logaddexp.reduce(z_C) - z_C[a])
    return total / len(answers)


def fit_temperature(logps: Sequence[Sequence[float]], answers: Sequence[int], iters: int = 80) -> float:
    """argmin_T nll(logps, answers, T) over T_RANGE by golden-section search on log T.

    The NLL is convex in 1/T (a log-sum-exp of terms linear in 1/T minus one of them), so it is
    unimodal in log T and golden-section search finds the minimum; fitted on the calibration split
    only, then applied unchanged to every other split.
    """
    _check(logps, answers)
    lo, hi = math.log(T_RANGE[0]), math.log(T_RANGE[1])
    g = (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = nll(logps, answers, math.exp(a)), nll(logps, answers, math.exp(b))
    for _ in range(iters):
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = nll(logps, answers, math.exp(a))
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = nll(logps, answers, math.exp(b))
    return math.exp((lo + hi) / 2)


def confidence_correct(probs: Sequence[np.ndarray], answers: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(confidence_N = max_c p_c, correct_N = 1[argmax_c p_c == answer]) per question."""
    conf_N = np.array([float(np.max(p)) for p in probs])
    correct_N = np.array([float(int(np.argmax(p)) == a) for p, a in zip(probs, answers)])
    return conf_N, correct_N


def reliability_bins(conf_N: np.ndarray, correct_N: np.ndarray, n_bins: int = 10) -> list[dict]:
    """Equal-width confidence bins (b/n, (b+1)/n] (the first also holds 0): per non-empty bin its
    count, mean confidence and accuracy."""
    idx_N = np.clip(np.ceil(np.asarray(conf_N) * n_bins).astype(int) - 1, 0, n_bins - 1)
    out = []
    for b in range(n_bins):
        m = idx_N == b
        if m.any():
            out.append({"lo": b / n_bins, "hi": (b + 1) / n_bins, "n": int(m.sum()),
                        "confidence": float(np.mean(conf_N[m])), "accuracy": float(np.mean(correct_N[m]))})
    return out


def ece(conf_N: np.ndarray, correct_N: np.ndarray, n_bins: int = 10) -> float:
    """Expected calibration error: sum_b (n_b / N) |accuracy_b - confidence_b| over `reliability_bins`."""
    n = len(conf_N)
    if n == 0:
        raise ValueError("ece: no questions")
    return sum(b["n"] / n * abs(b["accuracy"] - b["confidence"]) for b in reliability_bins(conf_N, correct_N, n_bins))


def brier(probs: Sequence[np.ndarray], answers: Sequence[int]) -> float:
    """Multi-class Brier score: mean over questions of sum_c (p_c - 1[c == answer])^2 (0 best, 2 worst)."""
    _check(probs, answers)
    total = 0.0
    for p_C, a in zip(probs, answers):
        y_C = np.zeros(len(p_C))
        y_C[a] = 1.0
        total += float(np.sum((np.asarray(p_C) - y_C) ** 2))
    return total / len(answers)


def calibration_metrics(logps: Sequence[Sequence[float]], answers: Sequence[int], temperature: float = 1.0,
                        n_bins: int = 10) -> dict[str, float]:
    """accuracy, nll, ece, brier and mean confidence of the candidates' p_T, over all questions."""
    probs = [restricted_softmax(lp, temperature) for lp in logps]
    conf_N, correct_N = confidence_correct(probs, answers)
    return {"accuracy": float(correct_N.mean()), "nll": nll(logps, answers, temperature),
            "ece": ece(conf_N, correct_N, n_bins), "brier": brier(probs, answers), "confidence": float(conf_N.mean())}


def _check(logps: Sequence, answers: Sequence[int]) -> None:
    if len(logps) != len(answers):
        raise ValueError(f"{len(logps)} questions but {len(answers)} answers")
    if not answers:
        raise ValueError("no questions")
