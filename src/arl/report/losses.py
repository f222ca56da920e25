"""The Loss Functions chapter's figures: each loss against the ratio, and a batch's ratio histogram."""

from __future__ import annotations

from pathlib import Path

import torch

from .. import losses
from ..track import _io
from .plots import COLORS, STYLE, panel_grid, png_bytes

CURVES = {  # label -> objective(ratio_N, adv_N) evaluated by the library's losses, logq = 0 so logp = log rho
    "importance_sampling": lambda lp, a: losses.importance_sampling(lp, None, torch.zeros_like(lp), a).loss_N,
    "ppo [0.8, 1.2]": lambda lp, a: losses.ppo(lp, None, torch.zeros_like(lp), a).loss_N,
    "DAPO clip-higher [0.8, 1.28]": lambda lp, a: losses.ppo(lp, None, torch.zeros_like(lp), a, clip_high_threshold=1.28).loss_N,
    "cispo [0, 4]": lambda lp, a: losses.cispo(lp, None, torch.zeros_like(lp), a).loss_N,
    "GSPO sequence [1-3e-4, 1+4e-4]": lambda lp, a: torch.stack(
        [losses.gspo([x.view(1)], [torch.zeros(1)], y.view(1), 1)[0] for x, y in zip(lp, a)]),
}


def objective_curves(ratio_N: torch.Tensor, adv: float) -> dict[str, tuple[list[float], list[float]]]:
    """Per loss: (objective -L, weight on grad log pi = d(-L)/d logp) at each ratio, for advantage `adv`."""
    out = {}
    for label, fn in CURVES.items():
        logp_N = torch.log(ratio_N).clone().requires_grad_(True)
        loss_N = fn(logp_N, torch.full_like(logp_N, adv))
        (grad_N,) = torch.autograd.grad(loss_N.sum(), logp_N)
        out[label] = ((-loss_N).detach().tolist(), (-grad_N).tolist())
    return out


def plot_objectives(path: Path, lo: float = 0.5, hi: float = 1.6, n: int = 441) -> Path:
    """A 2 x 2 figure: objective and gradient weight against the ratio, for A = +1 and A = -1.

    The objective of cispo is its surrogate sg(clip(rho)) A log rho; GSPO is drawn for a one-token
    sequence, where the sequence ratio is the token ratio (its clip range is too narrow to see here:
    the gradient is zero outside a hair's width around 1)."""
    from matplotlib import rc_context

    ratio_N = torch.linspace(lo, hi, n)
    with rc_context(STYLE):
        fig, flat = panel_grid(4, 4.6, 2.9)
        axes = [[flat[0], flat[1]], [flat[2], flat[3]]]
        for col, adv in enumerate((1.0, -1.0)):
            curves = objective_curves(ratio_N, adv)
            for i, (label, (obj, grad)) in enumerate(curves.items()):
                style = dict(color=COLORS[i % len(COLORS)], linewidth=1.6 if i else 2.4, alpha=0.9,
                             linestyle="--" if "clip-higher" in label else "-")
                axes[0][col].plot(ratio_N.tolist(), obj, label=label, **style)
                axes[1][col].plot(ratio_N.tolist(), grad, label=label, **style)
            axes[0][col].set_title(f"objective -L, A = {adv:+.0f}", loc="left")
            axes[1][col].set_title(f"weight on grad log pi, A = {adv:+.0f}", loc="left")
            for row in (0, 1):
                axes[row][col].axvline(1.0, color="#8c959f", linewidth=0.8)
                axes[row][col].set_xlabel("ratio pi_theta / pi_old")
        axes[0][0].legend(loc="best", fontsize=7, frameon=False)
        data = png_bytes(fig)
    _io.atomic_write_bytes(path, data)
    return path


def plot_ratio_histogram(path: Path, ratio_N: torch.Tensor) -> Path:
    """Histogram of a batch's per-token ratios with the clip bounds of PPO, DAPO and GSPO marked."""
    from matplotlib import rc_context

    with rc_context(STYLE):
        fig, (ax,) = panel_grid(1, 6.0, 2.9)
        ax.hist(ratio_N.tolist(), bins=60, color=COLORS[0], alpha=0.8)
        for x, label, c in ((0.8, "ppo low", 1), (1.2, "ppo high", 1), (1.28, "DAPO high", 2)):
            ax.axvline(x, color=COLORS[c], linewidth=1, linestyle="--", label=label)
        ax.set_title("per-token ratio after the replay updates", loc="left")
        ax.set_xlabel("ratio pi_theta / pi_old")
        ax.set_ylabel("tokens")
        ax.legend(loc="best", fontsize=7, frameon=False)
        data = png_bytes(fig)
    _io.atomic_write_bytes(path, data)
    return path
