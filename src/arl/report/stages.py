"""Multi-stage runs (specialist/general OPD): a table of every stage and checkpoint across seeds, and
the trade-off plot of two held-out scores.

A run writes `eval/stages.json` as {"rows": [{"stage": ..., "step": ..., KEY: value, ...}, ...]}; the
rows of several seeds are aligned by (stage, step).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..eval.stats import mean_band
from ..track import _io
from .plots import COLORS, STYLE, panel_grid, png_bytes


def stage_rows(rows_by_seed: Sequence[Sequence[dict]], keys: Sequence[str], final_only: bool = False) -> list[dict]:
    """One row per (stage, step) in first-seen order, with each key's values across seeds as a list;
    `final_only` keeps the last checkpoint of each stage."""
    merged: dict[tuple[str, int], dict] = {}
    for rows in rows_by_seed:
        for r in rows:
            out = merged.setdefault((r["stage"], r["step"]), {"stage": r["stage"], "step": r["step"], **{k: [] for k in keys}})
            for k in keys:
                out[k].append(r[k])
    rows = list(merged.values())
    if final_only:
        last = {r["stage"]: r for r in rows}
        rows = [r for r in rows if last[r["stage"]] is r]
    return rows


def format_rows(rows: Sequence[dict], keys: Sequence[str]) -> list[dict]:
    """`stage_rows` as printable rows: each key as mean ± 95% t-interval in percent, and the seed count."""
    out = []
    for r in rows:
        row = {"stage": r["stage"], "step": r["step"], "seeds": len(r[keys[0]])}
        for k in keys:
            mean, half = mean_band(r[k])
            row[k] = f"{100 * mean:.1f} ± {100 * half:.1f}" if len(r[k]) > 1 else f"{100 * mean:.1f}"
        out.append(row)
    return out


def plot_tradeoff(path: Path, rows_by_seed: Sequence[Sequence[dict]], keys: Sequence[str],
                  starts: dict[str, str] | None = None) -> Path:
    """Held-out `keys[1]` (x) against `keys[0]` (y), mean across seeds with 95% bars: one point per
    checkpoint, each stage's checkpoints joined in order; `starts` (stage -> the stage whose end it
    starts from) adds a dotted line from that end to the stage's first checkpoint."""
    from matplotlib import rc_context

    y_key, x_key = keys[0], keys[1]
    rows = stage_rows(rows_by_seed, keys)
    stages = list(dict.fromkeys(r["stage"] for r in rows))
    with rc_context(STYLE):
        fig, (ax,) = panel_grid(1, width=5.2, height=4.2)
        for i, stage in enumerate(stages):
            pts = [r for r in rows if r["stage"] == stage]
            xs = [mean_band(r[x_key]) for r in pts]
            ys = [mean_band(r[y_key]) for r in pts]
            color = COLORS[i % len(COLORS)]
            ax.errorbar([100 * m for m, _ in xs], [100 * m for m, _ in ys], xerr=[100 * h for _, h in xs],
                        yerr=[100 * h for _, h in ys], color=color, marker="o", markersize=4, linewidth=1.2,
                        capsize=2, label=stage)
            origin = [r for r in rows if r["stage"] == (starts or {}).get(stage)]
            if origin:
                ax.plot([100 * mean_band(origin[-1][x_key])[0], 100 * xs[0][0]],
                        [100 * mean_band(origin[-1][y_key])[0], 100 * ys[0][0]], color=color, linestyle=":", linewidth=1)
            ax.annotate(f"{stage} {pts[-1]['step']}", (100 * xs[-1][0], 100 * ys[-1][0]), fontsize=7, color=color,
                        xytext=(4, 4), textcoords="offset points")
        ax.set_xlabel(f"{x_key} held-out accuracy (%)")
        ax.set_ylabel(f"{y_key} held-out accuracy (%)")
        n = len(rows_by_seed)
        ax.set_title(f"trade-off, {n} seed{'s' if n > 1 else ''} (up and right is better)")
        ax.legend(fontsize=7, loc="best")
        path.parent.mkdir(parents=True, exist_ok=True)
        _io.atomic_write_bytes(path, png_bytes(fig))
    return path
