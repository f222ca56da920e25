"""Plots and the self-contained HTML report of a run folder (layer 11).

    paths = plot_metrics(run)                      # plots/reward.png, plots/loss.png, ...
    write_report(run, "GRPO on mini arithmetic", summary_rows=[...],
                 eval_table=[{"metric": "avg@4", "before": 0.21, "after": 0.47}])
"""

from .html import write_report
from .plots import moving_average, plot_metrics

__all__ = ["moving_average", "plot_metrics", "write_report"]
