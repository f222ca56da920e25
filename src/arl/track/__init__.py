"""Run folders, metric and rollout logs, optional trackers and progress bars (layer 11).

    run = RunDir.create("runs", "grpo", name=None, config=asdict(cfg))
    tracker = Tracker.create(cfg.tracker, run)  # None, "tensorboard", "mlflow", "wandb", "swanlab"
    with progress(cfg.steps, "grpo") as bar:
        for step in range(cfg.steps):
            ...
            run.log_metrics(step, metrics); tracker.log(step, metrics)
            bar.update(); bar.set_metrics({"reward": metrics["reward/mean"]})
    tracker.close()
"""

from .progress import Progress, progress
from .rundir import NotARunError, RunDir
from .trackers import KINDS as TRACKER_KINDS
from .trackers import Tracker

__all__ = ["NotARunError", "Progress", "RunDir", "TRACKER_KINDS", "Tracker", "progress"]
