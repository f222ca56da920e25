"""Statistics for comparing arms across seeds: bands, paired bootstrap intervals and a verdict.

With a handful of seeds every interval is wide; these functions say so rather than hide it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom (then 1.96)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def mean_band(values: Sequence[float]) -> tuple[float, float]:
    """(mean, half-width of the 95% t interval of the mean); the half-width is 0 for one value.

    Used for the curves' bands: mean +- t_{0.975, n-1} * sd / sqrt(n) across seeds at each step.
    """
    n = len(values)
    if n == 0:
        raise ValueError("mean_band: no values")
    mean = math.fsum(values) / n
    if n == 1:
        return mean, 0.0
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    t = _T975[n - 2] if n - 2 < len(_T975) else 1.96
    return mean, t * sd / math.sqrt(n)


def bootstrap_ci(diffs: Sequence[float], n_boot: int = 10_000, seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): percentile bootstrap interval of the mean of paired differences.

    Resamples the seeds (the pairs) with replacement. With n seeds there are only C(2n-1, n)
    distinct resamples (10 for n = 3), so the interval is coarse and too narrow for small n: the
    verdict adds that warning.
    """
    n = len(diffs)
    if n == 0:
        raise ValueError("bootstrap_ci: no differences")
    mean = math.fsum(diffs) / n
    rng = random.Random(seed)
    means = sorted(math.fsum(rng.choice(diffs) for _ in range(n)) / n for _ in range(n_boot))
    lo = means[int((1 - level) / 2 * n_boot)]
    hi = means[min(n_boot - 1, int((1 + level) / 2 * n_boot))]
    return mean, lo, hi


@dataclass
class Verdict:
    mean: float
    low: float
    high: float
    n: int
    text: str


def paired_verdict(name_a: str, values_a: Sequence[float], name_b: str, values_b: Sequence[float],
                   metric: str, scale: float = 100.0, unit: str = " points") -> Verdict:
    """Plain-language verdict on B - A, paired by seed: "no detectable difference at n seeds" when the
    bootstrap interval holds 0, else "B higher/lower by X ± Y" (Y = half the interval's width)."""
    if len(values_a) != len(values_b):
        raise ValueError(f"paired_verdict: {len(values_a)} seeds for {name_a} vs {len(values_b)} for {name_b}")
    diffs = [b - a for a, b in zip(values_a, values_b)]
    mean, lo, hi = bootstrap_ci(diffs)
    n = len(diffs)
    if all(d == 0 for d in diffs):
        text = f"{name_b} and {name_a}: identical {metric} at every seed"
    elif lo <= 0 <= hi:
        text = f"no detectable difference in {metric} at {n} seeds ({name_b} - {name_a} = {scale * mean:+.1f}, " \
               f"95% CI [{scale * lo:+.1f}, {scale * hi:+.1f}]{unit})"
    else:
        word = "higher" if mean > 0 else "lower"
        text = f"{name_b} {word} than {name_a} by {scale * abs(mean):.1f} ± {scale * (hi - lo) / 2:.1f}{unit} " \
               f"in {metric} ({n} seeds, 95% CI [{scale * lo:+.1f}, {scale * hi:+.1f}])"
    return Verdict(mean, lo, hi, n, text)


def items_to_resolve(diffs: Sequence[float], power: float = 0.8) -> int | None:
    """How many paired units (items, or seeds) a difference with this mean and spread needs before a
    two-sided 95% interval excludes 0 with probability `power` (normal approximation):

        n = ((z_0.975 + z_power) sd / |mean|)^2

    None when the observed mean is 0 (no difference to resolve) or there is no spread to estimate."""
    z_power = {0.5: 0.0, 0.8: 0.8416, 0.9: 1.2816}.get(power)
    if z_power is None:
        raise ValueError(f"power={power}: use 0.5, 0.8 or 0.9")
    n = len(diffs)
    if n < 2:
        return None
    mean = math.fsum(diffs) / n
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (n - 1))
    if mean == 0 or sd == 0:
        return None
    return math.ceil(((1.959964 + z_power) * sd / abs(mean)) ** 2)


Z_975, Z_80 = 1.96, 0.84
"""Normal quantiles: two-sided alpha 0.05, and 80% power."""


def hierarchical_bootstrap(diff_SI, n_boot: int = 4000, seed: int = 0,
                           level: float = 0.95) -> tuple[float, float, float, float]:
    """(mean, low, high, se) of the mean paired difference `diff_SI` (seeds x held-out items, arm minus
    its partner on the same seed and item), with seeds and items resampled:

        replicate b:  seeds s*_1..s*_S drawn with replacement, items i*_1..i*_I drawn with replacement,
                      m_b = mean over j, k of diff_SI[s*_j, i*_k]
        low, high = the (1-level)/2 and (1+level)/2 percentiles of m_b;   se = std_b(m_b)

    The drawn items are the same for every drawn seed and both arms: every seed evaluates the same
    held-out items, so an item's effect on the difference is shared by the seeds (redrawing items per
    seed would count it as new each time and narrow the interval). Seeds and items are drawn from two
    generators, so with all seeds identical the items' draws, and the result, are those of one seed:
    the item bootstrap; with all items of a seed identical it is the seed bootstrap."""
    diff_SI = np.asarray(diff_SI, dtype=float)
    if diff_SI.ndim != 2 or 0 in diff_SI.shape:
        raise ValueError(f"hierarchical_bootstrap: diff_SI has shape {diff_SI.shape}; pass seeds x items, "
                         "at least one of each")
    n_s, n_i = diff_SI.shape
    seeds_BS = np.random.default_rng([seed, 0]).integers(0, n_s, size=(n_boot, n_s))
    items_BI = np.random.default_rng([seed, 1]).integers(0, n_i, size=(n_boot, n_i))
    item_sums_SB = np.stack([diff_SI[s, items_BI].sum(axis=1) for s in range(n_s)])  # each seed's sum over the drawn items
    means_B = np.take_along_axis(item_sums_SB.T, seeds_BS, axis=1).sum(axis=1) / (n_s * n_i)
    low, high = np.quantile(means_B, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    return float(diff_SI.mean()), float(low), float(high), float(means_B.std())


def min_detectable_difference(se: float) -> float:
    """The smallest true difference a two-sided test at alpha 0.05 finds with 80% power, given the
    standard error `se` of the estimated difference (normal approximation):

        MDD = (z_0.975 + z_0.80) se = (1.96 + 0.84) se = 2.8 se"""
    return (Z_975 + Z_80) * se


def positive_f1(golds: Sequence[str], preds: Sequence[str | None], positive: str = "YES") -> float:
    """F1 of the positive class: 2 TP / (2 TP + FP + FN). An unreadable answer (None) counts as the wrong
    label: a missed positive (FN) on a positive item, a false alarm (FP) on a negative one, as the
    reference lab counts examples without an answer as wrong. 0.0 when there is nothing to score
    (no positive item and no positive prediction)."""
    if len(golds) != len(preds):
        raise ValueError(f"positive_f1: {len(golds)} gold labels for {len(preds)} predictions")
    tp = sum(g == positive and p == positive for g, p in zip(golds, preds))
    fn = sum(g == positive and p != positive for g, p in zip(golds, preds))
    fp = sum(g != positive and p != g for g, p in zip(golds, preds))
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0


def macro_f1(tasks: Sequence[str], golds: Sequence[str], preds: Sequence[str | None],
             positive: str = "YES") -> tuple[float, dict[str, float]]:
    """(mean over tasks of each task's `positive_f1`, the per-task values): the Spec-o3 headline, "the
    mean positive-class F1 over the tasks"."""
    if not len(tasks) == len(golds) == len(preds):
        raise ValueError(f"macro_f1: {len(tasks)} tasks, {len(golds)} gold labels, {len(preds)} predictions")
    per_task = {}
    for task in sorted(set(tasks)):
        rows = [(g, p) for t, g, p in zip(tasks, golds, preds) if t == task]
        per_task[task] = positive_f1([g for g, _ in rows], [p for _, p in rows], positive)
    return (sum(per_task.values()) / len(per_task) if per_task else 0.0), per_task
