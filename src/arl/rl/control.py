"""The continued-SFT control every RL chapter on labelled data needs: keep training the cold start on
its own demonstrations for the RL run's wall time, and evaluate it with the RL run's protocol.

If continued SFT for the same wall time gains as much as the RL phase, the reward added nothing the
demonstrations did not already carry. Each control (`sft`, `search-r1-sft`, `retool-sft`, `textworld-sft`,
`vision-sft`, `spec-o3-sft`) writes its own loop (datums, forward_backward, optim_step); what they share is
here: the budget and the continued cold start's optimizer (`ContinuedSFT`), the loop's bookkeeping
(`SFTLoop`: time, evaluations, logs, progress) and the report (`finish_control`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from .. import report
from ..config import require_positive
from ..eval import before_after, summary_rows
from ..track import RunDir, Tracker, progress
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


@dataclass
class ContinuedSFT(SFTBudget):
    """A control that continues a chapter's cached cold start (its weights and optimizer state), at the cold
    start's learning rate unless told otherwise (with the chapter's `AgentConfig` or `FigureConfig`)."""

    learning_rate: float = -1.0
    """AdamW learning rate; -1 = the cold start's (`sft_learning_rate`)."""

    def validate(self) -> None:
        super().validate()
        if not self.sft_steps:
            raise ValueError("sft_steps=0: the control continues a cold start; give it sft_steps > 0")

    def sft_adam(self) -> AdamParams:
        """The control's optimizer step: the cold start's (no weight decay, gradient norm clipped at 1)."""
        lr = self.sft_learning_rate if self.learning_rate < 0 else self.learning_rate
        return AdamParams(learning_rate=lr, weight_decay=0.0, grad_clip_norm=1.0)


class SFTLoop:
    """The bookkeeping of a continued-SFT control's loop, which the chapter writes itself (its datums and
    its forward_backward + optim_step): iterating yields step numbers until `cfg.steps` steps or
    `cfg.time_budget_s` seconds of training (evaluation excluded; 0 = steps only); `held_out(step)` runs
    at step 0, every `eval_every` steps and at the end; `end_step` logs a step to `run` and to the tracker
    that `cfg.tracker` names (`cfg` is the chapter's config: `RunConfig` and `SFTBudget`)."""

    def __init__(self, cfg: SFTBudget, run: RunDir, held_out: Callable[[int], dict[str, float]], label: str):
        self.cfg, self.run, self.held_out, self.label = cfg, run, held_out, label
        self.steps, self.trained_s, self._t0, self._bar, self.tracker = 0, 0.0, 0.0, None, Tracker()

    def __iter__(self) -> Iterator[int]:
        cfg = self.cfg
        self.tracker = Tracker.create(cfg.tracker, self.run)
        self._log(0, self.held_out(0))
        with progress(cfg.steps if not cfg.time_budget_s else None, self.label) as self._bar:
            while self.steps < cfg.steps and (not cfg.time_budget_s or self.trained_s < cfg.time_budget_s):
                self._t0 = time.perf_counter()
                yield self.steps
        if self.steps % cfg.eval_every:
            self._log(self.steps, self.held_out(self.steps))
        self.tracker.close()

    def _log(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log_metrics(step, metrics)
        self.tracker.log(step, metrics)

    def end_step(self, fb, datums: int) -> None:
        """Log the step whose forward_backward output is `fb` (its summed loss), evaluating when due."""
        elapsed = time.perf_counter() - self._t0
        self.steps, self.trained_s = self.steps + 1, self.trained_s + elapsed
        metrics = {"loss/ce": fb.metrics["loss:sum"], "train/datums": float(datums), "time/step": elapsed,
                   "time/trained": self.trained_s}
        if self.steps % self.cfg.eval_every == 0:
            metrics.update(self.held_out(self.steps))
        self._log(self.steps, metrics)
        self._bar.update()
        self._bar.set_metrics({"loss": metrics["loss/ce"]})


def finish_control(run: RunDir, title: str, keys: Sequence[str], steps: int, trained_s: float, config: dict) -> None:
    """The control's end: the before/after summary of `keys` with its steps and seconds (`eval/summary.json`),
    plots and the report."""
    _, summary = before_after(run, keys, main=keys[0])
    run.write_eval("summary", {**summary, "steps": steps, "trained_s": trained_s, "config": config})
    report.plot_metrics(run)
    report.write_report(run, title, summary_rows=summary_rows(summary, keys)
                        + [{"metric": "SFT steps / seconds", "before": "", "after": f"{steps} / {trained_s:.0f}"}],
                        rollouts_sample=[])
