"""Metric plots: one PNG per metric group (`reward/*`, `loss/*`, `time/*`, ...) under plots/.

Uses matplotlib's object API on an Agg canvas, never pyplot, so it changes no global backend and
works headless. Each metric gets its own panel (loss/pg and loss/kl rarely share a scale); a noisy
curve is drawn light with a centred moving average on top.
"""

from __future__ import annotations

import fnmatch
import io
import math
import re
from pathlib import Path

import numpy as np

from ..track import _io
from ..track.rundir import RunDir

COLORS = ("#1f6feb", "#d1242f", "#1a7f37", "#8250df", "#bf8700", "#0a7ea4", "#cf222e", "#57606a")
STYLE = {
    "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "xtick.labelsize": 8,
    "ytick.labelsize": 8, "axes.edgecolor": "#8c959f", "axes.linewidth": 0.8,
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.color": "#e6e8eb",
    "grid.linewidth": 0.7, "xtick.color": "#57606a", "ytick.color": "#57606a", "axes.labelcolor": "#24292f",
    "figure.facecolor": "white", "axes.facecolor": "white", "savefig.facecolor": "white",
}


def _as_run(run_dir) -> RunDir:
    return run_dir if isinstance(run_dir, RunDir) else RunDir.open(run_dir)


def group_of(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else "misc"


def select_keys(all_keys: list[str], keys: list[str] | None) -> list[str]:
    """Keys to plot: all, or those matching an exact key, a glob (`reward/*`) or a group (`reward`)."""
    if keys is None:
        return list(all_keys)
    chosen = []
    for pat in keys:
        hit = [k for k in all_keys if k == pat or fnmatch.fnmatchcase(k, pat) or group_of(k) == pat]
        if not hit:
            raise ValueError(f"no metric matches {pat!r}; logged metrics: {', '.join(all_keys) or 'none'}")
        chosen += [k for k in hit if k not in chosen]
    return chosen


def series(rows: list[dict], key: str) -> tuple[np.ndarray, np.ndarray]:
    pts = [(r["step"], r[key]) for r in rows if key in r and _io.finite(r[key]) and isinstance(r.get("step"), int)]
    if not pts:
        return np.zeros(0), np.zeros(0)
    x, y = map(np.asarray, zip(*pts))
    return x.astype(float), y.astype(float)


def is_noisy(y: np.ndarray) -> bool:
    """Step-to-step jitter large against the overall spread: white noise gives ~1.4, a smooth trend ~0."""
    if len(y) < 8 or np.std(y) == 0:
        return False
    return float(np.std(np.diff(y)) / np.std(y)) > 0.5


def moving_average(y: np.ndarray, window: int) -> np.ndarray:
    """Centred mean over `window` points, the window shrinking at the ends (no lag, no padding)."""
    kernel = np.ones(window)
    num = np.convolve(y, kernel, mode="same")
    den = np.convolve(np.ones_like(y), kernel, mode="same")
    return num / den


def _safe_name(group: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", group) or "misc"


def panel_grid(n_panels: int, width: float = 3.2, height: float = 2.5):
    """(figure, flat array of axes) for `n_panels` panels, at most 3 a row; call inside rc_context(STYLE).
    An Agg canvas of its own, so no global pyplot state is touched."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ncols = min(3, n_panels)
    nrows = math.ceil(n_panels / ncols)
    fig = Figure(figsize=(width * ncols + 0.4, height * nrows + 0.4), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, axes


def png_bytes(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def plot_metrics(run_dir, keys: list[str] | None = None) -> list[Path]:
    """Write `plots/<group>.png` for each metric group in metrics.jsonl; return the paths written."""
    from matplotlib import rc_context
    from matplotlib.ticker import FuncFormatter

    run = _as_run(run_dir)
    rows = run.read_metrics()
    all_keys = []
    for r in rows:
        all_keys += [k for k in r if k != "step" and k not in all_keys]
    groups: dict[str, list[str]] = {}
    for k in select_keys(all_keys, keys):
        groups.setdefault(group_of(k), []).append(k)

    written = []
    for group, gkeys in groups.items():
        gkeys = [k for k in gkeys if len(series(rows, k)[0])]
        if not gkeys:
            continue
        with rc_context(STYLE):
            fig, axes = panel_grid(len(gkeys))
            for i, (ax, key) in enumerate(zip(axes, gkeys)):
                x, y = series(rows, key)
                color = COLORS[i % len(COLORS)]
                if is_noisy(y):
                    window = max(3, min(51, len(y) // 10)) | 1
                    ax.plot(x, y, color=color, alpha=0.28, linewidth=1.0)
                    ax.plot(x, moving_average(y, window), color=color, linewidth=1.8,
                            label=f"moving avg ({window})")
                    ax.legend(loc="best", fontsize=7, frameon=False)
                else:
                    ax.plot(x, y, color=color, linewidth=1.6, marker="o" if len(y) <= 20 else None,
                            markersize=3)
                ax.set_title(key, loc="left")
                ax.set_xlabel("step")
                ax.set_ylabel("seconds" if group == "time" else key)
                ax.xaxis.get_major_locator().set_params(integer=True)
                # plain tick labels: the default "1e-5" offset text would sit on the title
                ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.4g}"))
            data = png_bytes(fig)
        out = run.plots_dir / f"{_safe_name(group)}.png"
        _io.atomic_write_bytes(out, data)
        written.append(out)
    return written
