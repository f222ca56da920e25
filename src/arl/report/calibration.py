"""Reliability diagrams: accuracy against confidence per bin, before and after temperature scaling."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..eval.calibration import ece, reliability_bins
from ..track import _io
from .plots import COLORS, STYLE, panel_grid, png_bytes


def plot_reliability(path: Path, curves: dict[str, tuple[np.ndarray, np.ndarray]], title: str, n_bins: int = 10) -> Path:
    """One panel: for each curve (label -> (confidence_N, correct_N)) the accuracy of every non-empty
    confidence bin at its mean confidence (marker area ~ the bin's count), and the diagonal a
    calibrated model sits on. Points below the diagonal are overconfident."""
    from matplotlib import rc_context

    with rc_context(STYLE):
        fig, (ax,) = panel_grid(1, width=4.2, height=3.8)
        ax.plot([0, 1], [0, 1], color="#8c959f", linestyle="--", linewidth=0.9, label="calibrated")
        for i, (label, (conf_N, correct_N)) in enumerate(curves.items()):
            bins = reliability_bins(conf_N, correct_N, n_bins)
            xs, ys = [b["confidence"] for b in bins], [b["accuracy"] for b in bins]
            sizes = [12 + 150 * b["n"] / len(conf_N) for b in bins]
            ax.plot(xs, ys, color=COLORS[i], linewidth=1.2,
                    label=f"{label} (ECE {ece(conf_N, correct_N, n_bins):.3f})")
            ax.scatter(xs, ys, s=sizes, color=COLORS[i], alpha=0.7, zorder=3)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("confidence (max candidate probability)")
        ax.set_ylabel("accuracy")
        ax.set_title(title)
        ax.legend(loc="upper left", fontsize=7, frameon=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        _io.atomic_write_bytes(path, png_bytes(fig))
    return path
