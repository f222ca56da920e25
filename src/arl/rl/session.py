"""Opening and closing an RL run: the one place that sets the threads, makes the `ServiceClient`,
resumes or cold-starts the training client and runs the step-0 evaluation (`open_session`); what a
step's end does (held-out evaluation and checkpoint when due, logs: `Session.end_step`); and the run's
end (summary, plots, report: `finish`).
"""

from __future__ import annotations

import json
import resource
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from .. import checkpoints, report
from ..client import ServiceClient
from ..eval import before_after, summary_rows
from ..settings import configure
from ..track import RunDir, Tracker, progress
from .task import Task


def service(cfg, run: RunDir) -> ServiceClient:
    """The run's `ServiceClient` (checkpoints in the run folder), torch threads set first (`cfg.threads`,
    0 = the default). Chapters that are not a policy-update loop (SFT, Jev, the staged OPD) start here."""
    if cfg.threads:
        configure(num_threads=cfg.threads)
    return ServiceClient(run_name=run.name, checkpoint_dir=str(run.checkpoints_dir))


@dataclass
class Session:
    """An open RL run: its task, the service and the training client, where the loop starts."""

    cfg: object
    """The chapter's config (a `SessionConfig` with the rest)."""
    run: RunDir
    task: Task
    service: ServiceClient
    client: object
    """The `TrainingClient`."""
    start: int
    """The first step to run: 0, or the step of the checkpoint a resumed run restarts from."""
    start_path: str | None
    """The cold start's saved state (the weights step 0 began from), None without a cold start."""
    tokenizer: object
    tracker: Tracker
    last: int = 0
    """The last step ended (1-based; 0 before any in this process)."""
    _bar: object = field(default=None, repr=False)
    _shown: Sequence[str] = ()

    def steps(self, desc: str, shown: Sequence[str] = ("reward/mean",)) -> Iterator[int]:
        """The 0-based steps still to run, with a progress bar that `end_step` advances, showing the
        `shown` metrics of each step."""
        with progress(self.cfg.steps, desc, initial=self.start) as bar:
            self._bar, self._shown = bar, shown
            yield from range(self.start, self.cfg.steps)
        self._bar = None

    @property
    def stop(self) -> list[str]:
        """Stop strings of a completion: the tokenizer's end of turn."""
        return [self.tokenizer.eos_token]

    def held_out(self, step: int, sampler, name: str | None = None) -> dict[str, float]:
        return self.task.held_out(self.run, step, sampler, self.tokenizer, name)

    def reference(self):
        """A frozen sampler over the start weights: the reference of a KL penalty."""
        return self.service.create_sampling_client(base_model=self.cfg.model, model_path=self.start_path)

    def end_step(self, step: int, metrics: dict, rows: list[dict], last: bool = False) -> None:
        """After step `step` (1-based): held-out evaluation when due, metrics and rollout rows logged,
        checkpoint when due, the progress bar advanced. `last`: the loop stops after this step before
        `steps` (a budget reached), so it is evaluated and saved as the final one."""
        cfg, run = self.cfg, self.run
        last, self.last = last or step == cfg.steps, step
        if step % cfg.eval_every == 0 or last:
            metrics.update(self.held_out(step, self.client.save_weights_and_get_sampling_client()))
        run.log_metrics(step, metrics)
        run.log_rollouts(step, rows)
        self.tracker.log(step, metrics)
        if step % cfg.save_every == 0 or last:
            path = self.client.save_state(f"step-{step:04d}").result().path
            checkpoints.write_json(run.checkpoints_dir / "latest.json", {"step": step, "path": path})
        if self._bar is not None:
            self._bar.update()
            self._bar.set_metrics({k: metrics[k] for k in self._shown if k in metrics})


def open_session(cfg, run: RunDir, resume: bool, task: Task) -> Session:
    """Threads, service, the training client and the step-0 held-out evaluation.

    The client starts from the last checkpoint of a resumed run (optimizer included; the steps logged
    after it are dropped and redone identically), else from the task's start weights (a fresh
    optimizer), else from the base model (`cfg.model`, LoRA of `cfg.lora_rank` or full fine-tuning)."""
    svc = service(cfg, run)
    start_path = task.start_weights()
    start, client = 0, None
    latest = run.checkpoints_dir / "latest.json"
    if resume and latest.is_file():
        saved = json.loads(latest.read_text())
        run.truncate_after(saved["step"])
        start, client = saved["step"], svc.create_training_client_from_state_with_optimizer(saved["path"])
    elif resume:
        run.truncate_after(-1)
    if client is None and start_path is not None:
        client = svc.create_training_client_from_state(start_path)
    elif client is None and cfg.lora_rank:
        client = svc.create_lora_training_client(cfg.model, rank=cfg.lora_rank, seed=cfg.seed)
    elif client is None:
        client = svc.create_full_training_client(cfg.model, seed=cfg.seed)
    session = Session(cfg, run, task, svc, client, start, start_path, client.get_tokenizer(), None)
    if start == 0:
        run.log_metrics(0, session.held_out(0, client.save_weights_and_get_sampling_client()))
    session.tracker = Tracker.create(cfg.tracker, run)
    return session


def finish(session: Session, title: str, config: dict) -> None:
    """The run's end: the before/after summary of the task's `summary_keys` (`eval/summary.json`, which
    marks the run finished, with `config` and the peak memory), plots and the report."""
    run, task = session.run, session.task
    session.tracker.close()
    evals, summary = before_after(run, task.summary_keys, main=task.summary_keys[0])
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    run.write_eval("summary", {**summary, "peak_rss_mb": peak_mb, "config": config})
    report.plot_metrics(run)
    report.write_report(
        run, title,
        summary_rows=summary_rows(summary, task.summary_keys) + [{"metric": "peak memory (MB)", "before": "",
                                                                  "after": round(peak_mb)}],
        eval_table=[{"step": int(n.split("-")[1]), **{k: e.get(k) for k in task.table_keys}}
                    for n, e in sorted(evals.items())],
        rollouts_sample=task.report_rows(run.read_rollouts(session.last or session.cfg.steps)[:6]),
    )
