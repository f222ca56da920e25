"""A run of several stages, each scored on several domains (the specialist/general chapter).

`Stages` keeps the run's record in `eval/stages.json`: every evaluation row (stage, step, one accuracy
per domain), the saved state each finished stage ends in, and the stage each one starts from. A
resumed run keeps its finished stages and restarts an unfinished one from that stage's start.
"""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Iterator, Mapping, Sequence

from .. import checkpoints, report
from ..report.stages import plot_tradeoff, stage_rows
from ..track import RunDir, Tracker, progress
from .task import MathTask


class Stages:
    def __init__(self, run: RunDir, starts: Mapping[str, str], domains: Mapping[str, MathTask], tokenizer, resume: bool,
                 tracker: Tracker | None = None):
        """`starts`: the stage each stage starts from; `domains`: each domain's task (its held-out split);
        `tracker`: where `log` mirrors the metrics too (closed by `finish`)."""
        self.run, self.domains, self.tokenizer = run, dict(domains), tokenizer
        self.tracker = tracker or Tracker()
        self._bar = None
        file = run.eval_dir / "stages.json"
        self.record = json.loads(file.read_text()) if resume and file.is_file() else \
            {"rows": [], "states": {}, "starts": dict(starts)}

    def evaluate(self, stage: str, step: int, sampler) -> dict[str, float]:
        """Every domain's held-out accuracy (eval/STAGE-DOMAIN-NNNN.json), recorded; the `eval/DOMAIN/accuracy` metrics."""
        row = {"stage": stage, "step": step}
        for domain, task in self.domains.items():
            out = task.held_out(self.run, step, sampler, self.tokenizer, f"{stage}-{domain}-{step:04d}")
            row[domain] = out["eval/accuracy"]
        self.record["rows"].append(row)
        self._save()
        return {f"eval/{d}/accuracy": row[d] for d in self.domains}

    def evaluated(self, stage: str) -> bool:
        return any(r["stage"] == stage for r in self.record["rows"])

    def state(self, stage: str) -> str | None:
        """The saved state a finished stage ended in; None while it is not finished."""
        path = self.record["states"].get(stage)
        return None if path is None else str(self.run.path / path)

    def begin(self, stage: str, offset: int) -> None:
        """Start (or restart) `stage`, logged at steps offset + 1...: what an earlier try of it logged goes."""
        self.record["rows"] = [r for r in self.record["rows"] if r["stage"] != stage]
        self.run.truncate_after(offset)

    def steps(self, stage: str, schedule: Sequence) -> Iterator[tuple[int, object]]:
        """(index, entry) of each step of `stage`'s schedule, with a progress bar that `log` advances."""
        with progress(len(schedule), stage) as bar:
            self._bar = bar
            yield from enumerate(schedule)
        self._bar = None

    def log(self, step: int, metrics: dict[str, float], shown: Sequence[str] = ()) -> None:
        """Log a step's metrics (at the run's global step) and advance the progress bar, showing `shown`."""
        self.run.log_metrics(step, metrics)
        self.tracker.log(step, metrics)
        if self._bar is not None:
            self._bar.update()
            self._bar.set_metrics({k: metrics[k] for k in shown if k in metrics})

    def end(self, stage: str, path: str) -> None:
        """Record the state `stage` ended in, relative to the run folder (a moved run finds it)."""
        self.record["states"][stage] = Path(path).resolve().relative_to(self.run.path.resolve()).as_posix()
        self._save()

    def finish(self, title: str, config: dict) -> None:
        """The summary (every domain at each stage's end), the trade-off plot and the report."""
        self.tracker.close()
        rows, names = self.record["rows"], tuple(self.domains)
        ends = stage_rows([rows], names, final_only=True)
        summary = {f"{r['stage']}/{d}": r[d][0] for r in ends for d in names}
        self.run.write_eval("summary", {**summary, "config": config})
        report.plot_metrics(self.run)
        plot_tradeoff(self.run.plots_dir / "tradeoff.png", [rows], names, self.record["starts"])
        report.write_report(self.run, title, summary_rows=[{"stage": r["stage"], **{d: r[d][0] for d in names}} for r in ends],
                            eval_table=rows, rollouts_sample=[])

    def _save(self) -> None:
        checkpoints.write_json(self.run.eval_dir / "stages.json", self.record)
