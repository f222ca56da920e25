"""Opening and closing an RL run: the one place that sets the threads, makes the `ServiceClient`,
resumes or cold-starts the training client and runs the step-0 evaluation (`open_session`); what a
step's end does (held-out evaluation and checkpoint when due, logs: `Session.end_step`); and the run's
end (summary, plots, report: `finish`).
"""

from __future__ import annotations

import json
import re
import resource
import sys
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import checkpoints, report
from ..client import ServiceClient
from ..eval import before_after, summary_rows
from ..settings import configure
from ..track import RunDir, Tracker, progress
from .task import Task

LATEST_FILE = "latest.json"
REMOTE_FILE = "remote.json"
"""On a remote backend: the run's `save_state` checkpoints, which live on the service, as
{"base_url", "states": [{"step", "path": "tinker://..."}, ...]} (oldest first): what --resume loads."""
REMOTE_SCHEME = "tinker://"
UNREADABLE = (checkpoints.CheckpointNotFoundError, checkpoints.CheckpointCorruptError, ValueError, RuntimeError,
              OSError, EOFError, KeyError)
"""What a damaged checkpoint raises on load (safetensors, torch.load, the metadata)."""


class ResumeError(RuntimeError):
    """A run cannot be resumed; nothing in its folder was changed."""


def service(cfg, run: RunDir) -> ServiceClient:
    """The run's `ServiceClient`, torch threads set first (`cfg.threads`, 0 = the default): the local
    engine's with checkpoints in the run folder, or with `backend=tinker` the SDK's on the service at
    `base_url` (arl.backend.tinker; checkpoints on the service, recorded in `REMOTE_FILE`). Chapters that
    are not a policy-update loop (SFT, Jev, the staged OPD) start here."""
    if cfg.threads:
        configure(num_threads=cfg.threads)
    if cfg.backend == "local":
        return ServiceClient(run_name=run.name, checkpoint_dir=str(run.checkpoints_dir))
    from ..backend import tinker  # the SDK is imported by remote runs only

    return tinker.ServiceClient(cfg.base_url, resume_hint=f"continue with `arl run {run.chapter} --resume {run.path}`",
                                display_name=f"arl {run.chapter} {run.name}")


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
    tokenizer: object
    tracker: Tracker
    last: int = 0
    """The last step ended (1-based; 0 before any in this process)."""
    _start_path: object = field(default=..., repr=False)
    _bar: object = field(default=None, repr=False)
    _shown: Sequence[str] = ()

    @property
    def start_path(self) -> str | None:
        """The cold start's saved state (the weights step 0 began from), None without a cold start. A
        resumed run asks the task for it only when something reads it (a teacher, a KL reference)."""
        if self._start_path is ...:
            self._start_path = self.task.start_weights()
        return self._start_path

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
            path = self.client.save_state(f"step-{step:04d}", overwrite=True).result().path
            if path.startswith(REMOTE_SCHEME):
                record_remote(run, self.service.base_url, step, path)
            else:
                path = Path(path).resolve().relative_to(run.path.resolve()).as_posix()  # the run can move
            checkpoints.write_json(run.checkpoints_dir / LATEST_FILE, {"step": step, "path": path})
        if self._bar is not None:
            self._bar.update()
            self._bar.set_metrics({k: metrics[k] for k in self._shown if k in metrics})


def open_session(cfg, run: RunDir, resume: bool, task: Task) -> Session:
    """Threads, service, the training client and the step-0 held-out evaluation.

    The client starts from the last intact checkpoint of a resumed run (optimizer included; a damaged
    one is passed over for the one before; the steps logged after it move to `superseded.jsonl` and are
    redone identically), else from the task's start weights (a fresh optimizer), else from the base
    model (`cfg.model`, LoRA of `cfg.lora_rank` or full fine-tuning). A resume takes the run's lock first
    and changes nothing in the folder until a checkpoint has loaded."""
    svc = service(cfg, run)
    start, client, start_path = 0, None, ...
    if resume:
        run.lock()
        found = resume_checkpoint(run, svc)
        if found is not None:
            start, client = found
        run.truncate_after(start if found is not None else -1)
    if client is None:
        start_path = task.start_weights()
    if client is None and start_path is not None:
        client = svc.create_training_client_from_state(start_path)
    elif client is None and cfg.lora_rank:
        client = svc.create_lora_training_client(cfg.model, rank=cfg.lora_rank, seed=cfg.seed)
    elif client is None:
        client = svc.create_full_training_client(cfg.model, seed=cfg.seed)
    session = Session(cfg, run, task, svc, client, start, client.get_tokenizer(), None, _start_path=start_path)
    if start == 0:
        run.log_metrics(0, session.held_out(0, client.save_weights_and_get_sampling_client()))
    session.tracker = Tracker.create(cfg.tracker, run)
    return session


def saved_states(run: RunDir) -> list[tuple[int, Path | str]]:
    """(step, folder) of the run's `save_state` checkpoints `step-NNNN`, newest first; on a remote
    backend (step, `tinker://` path) of those `REMOTE_FILE` records."""
    if (run.checkpoints_dir / REMOTE_FILE).is_file():
        return sorted(((s["step"], s["path"]) for s in read_remote(run)["states"]), reverse=True)
    folder = run.checkpoints_dir / "training_state"
    found = [(int(m[1]), p) for p in folder.glob("step-*") if p.is_dir() and (m := re.fullmatch(r"step-(\d+)", p.name))]
    return sorted(found, reverse=True)


def read_remote(run: RunDir) -> dict:
    return json.loads((run.checkpoints_dir / REMOTE_FILE).read_text())


def record_remote(run: RunDir, base_url: str, step: int, path: str) -> None:
    """Add the service's checkpoint `path` of `step` to `REMOTE_FILE` (replacing a later or equal step's:
    a resumed run redoes those)."""
    file = run.checkpoints_dir / REMOTE_FILE
    states = [s for s in read_remote(run)["states"] if s["step"] < step] if file.is_file() else []
    checkpoints.write_json(file, {"base_url": base_url, "states": [*states, {"step": step, "path": path}]})


def resume_checkpoint(run: RunDir, svc: ServiceClient) -> tuple[int, object] | None:
    """(step, training client) of the newest checkpoint of `run` that loads, or None when the run saved
    none yet. Checkpoints are looked up inside the run folder (a moved or copied run resumes from its
    own); a damaged one is reported and passed over; `ResumeError` when every one is damaged."""
    states = saved_states(run)
    last = run.last_step()
    damaged = []
    for step, folder in states:
        if last is not None and step > last:  # saved, but its step's logs are gone: not a point to resume from
            continue
        # a remote checkpoint is damaged when the service answers so (4xx: ValueError); a service that
        # cannot be reached would fail the one before too
        unreadable = UNREADABLE if isinstance(folder, Path) else ValueError
        try:
            return step, svc.create_training_client_from_state_with_optimizer(str(folder))
        except unreadable as e:
            damaged.append(f"{Path(folder).name}: {e}")
            warnings.warn(f"resume: checkpoint {folder} does not load ({e}); trying the one before", stacklevel=2)
    if damaged:
        raise ResumeError(f"{run.path}: no checkpoint loads ({'; '.join(damaged)}); nothing in the run folder was "
                          f"changed. Start a new run, or restore a checkpoint from a backup")
    return None


def finish(session: Session, title: str, config: dict) -> None:
    """The run's end: the before/after summary of the task's `summary_keys` (`eval/summary.json`, which
    marks the run finished, with `config` and the peak memory), plots and the report."""
    run, task = session.run, session.task
    session.tracker.close()
    evals, summary = before_after(run, task.summary_keys, main=task.summary_keys[0])
    # ru_maxrss is in KiB on Linux, in bytes on macOS
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (2**20 if sys.platform == "darwin" else 1024)
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
