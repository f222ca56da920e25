"""The continued-SFT control every RL chapter on labelled data needs: keep training the cold start on
its own demonstrations for the RL run's wall time, and evaluate it with the RL run's protocol.

If continued SFT for the same wall time gains as much as the RL phase, the reward added nothing the
demonstrations did not already carry. One loop for every chapter (`sft`, `vision-sft`, `spec-o3-sft`):
the chapter gives its training client (at the cold start's weights and optimizer state), its examples
as the cold start took them (`coldstart.sft_step`: masks and images included) and its held-out
evaluation.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .. import report
from ..coldstart import sft_step
from ..config import require_positive
from ..eval import before_after, summary_rows
from ..track import RunDir, progress
from ..types import AdamParams
from .config import Group


@dataclass
class SFTBudget(Group):
    """How long the control trains and how it is evaluated."""

    time_budget_s: float = 180.0
    """Wall time of the training steps (evaluation excluded): set it to the RL run's; 0 = run `steps` steps."""
    steps: int = 10_000
    """Upper bound on SFT steps."""
    batch_size: int = 32
    """Examples per step."""
    eval_every: int = 100
    """Evaluate every N steps (and before and after)."""

    def validate(self) -> None:
        super().validate()
        require_positive(self, "steps", "batch_size", "eval_every")
        if self.time_budget_s < 0:
            raise ValueError(f"time_budget_s={self.time_budget_s}: must be 0 (use steps) or a number of seconds")


def continued_sft(client, examples: Sequence[tuple], learning_rate: float, cfg: SFTBudget, seed: int, run: RunDir,
                  held_out: Callable[[int], dict[str, float]], label: str) -> tuple[int, float]:
    """Token-mean cross-entropy steps on `examples` (`sft_step`: (prompt, completion[, mask[, images]]))
    from the client's state until `cfg.steps` steps or `cfg.time_budget_s` seconds of training;
    `held_out(step)` at step 0, every `eval_every` steps and at the end, everything logged to `run`.
    `seed` orders the batches. Returns (steps, seconds trained)."""
    run.log_metrics(0, held_out(0))
    rng = random.Random(seed)
    adam = AdamParams(learning_rate=learning_rate, weight_decay=0.0, grad_clip_norm=1.0)
    trained_s, step = 0.0, 0
    with progress(cfg.steps if not cfg.time_budget_s else None, label) as bar:
        while step < cfg.steps and (not cfg.time_budget_s or trained_s < cfg.time_budget_s):
            t0 = time.perf_counter()
            batch = rng.sample(examples, min(cfg.batch_size, len(examples)))
            fb, optim = sft_step(client, batch, adam)
            optim.result()
            step, trained_s = step + 1, trained_s + time.perf_counter() - t0
            metrics = {"loss/ce": fb.result().metrics["loss:sum"], "train/datums": float(len(batch)),
                       "time/step": time.perf_counter() - t0, "time/trained": trained_s}
            if step % cfg.eval_every == 0:
                metrics.update(held_out(step))
            run.log_metrics(step, metrics)
            bar.update()
            bar.set_metrics({"loss": metrics["loss/ce"]})
    if step % cfg.eval_every:
        run.log_metrics(step, held_out(step))
    return step, trained_s


def finish_control(run: RunDir, title: str, keys: Sequence[str], steps: int, trained_s: float, config: dict) -> None:
    """The control's end: the before/after summary of `keys` with its steps and seconds (`eval/summary.json`),
    plots and the report."""
    _, summary = before_after(run, keys, main=keys[0])
    run.write_eval("summary", {**summary, "steps": steps, "trained_s": trained_s, "config": config})
    report.plot_metrics(run)
    report.write_report(run, title, summary_rows=summary_rows(summary, keys)
                        + [{"metric": "SFT steps / seconds", "before": "", "after": f"{steps} / {trained_s:.0f}"}],
                        rollouts_sample=[])
