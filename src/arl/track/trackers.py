"""Optional external trackers behind one tiny interface: `log(step, metrics)` and `close()`.

metrics.jsonl in the run folder is always the record; a tracker only mirrors it to a dashboard.
None of the packages is a dependency of `arl`: each is imported when asked for, with the
`pip install` line in the error if it is missing. Every tracker writes inside the run folder and
reaches no server unless the user's own settings say so:

- tensorboard: event files in RUN/tensorboard (`tensorboard --logdir RUN/tensorboard`).
- mlflow: a file store in RUN/mlflow (`mlflow ui --backend-store-uri RUN/mlflow`), or the store that
  MLFLOW_TRACKING_URI names when it is set.
- wandb: an offline run in RUN/wandb (`wandb sync RUN/wandb/offline-run-*`), unless WANDB_MODE says
  otherwise.
- swanlab: an offline run in RUN/swanlab (`swanlab sync RUN/swanlab/run-*`), unless SWANLAB_MODE says
  otherwise.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

KINDS = (None, "tensorboard", "swanlab", "wandb", "mlflow")


def _names() -> str:
    return ", ".join("None" if k is None else repr(k) for k in KINDS)


def _run_path(run_dir) -> Path:
    return Path(getattr(run_dir, "path", run_dir))


def _run_config(run_dir) -> dict:
    return dict(getattr(run_dir, "config", None) or {})


def _missing(kind: str, package: str) -> ImportError:
    return ImportError(f"tracker {kind!r} needs the {package} package: pip install {package} "
                       f"(or run with tracker=None; metrics.jsonl is written either way)")


def check_kind(kind) -> None:
    """A clear error for a tracker name `Tracker.create` does not know (before a run starts)."""
    k = kind.strip().lower() if isinstance(kind, str) else kind
    if k not in (*KINDS, "", "none"):
        raise ValueError(f"tracker={kind!r}: unknown; choose one of {_names()}")


class Tracker:
    """The no-op tracker, and the factory for the others."""

    kind: str | None = None

    @staticmethod
    def create(kind: str | None, run_dir) -> "Tracker":
        """`kind` is one of None (or "none"/""), "tensorboard", "swanlab", "wandb", "mlflow"."""
        if kind is None or (isinstance(kind, str) and kind.strip().lower() in ("", "none")):
            return Tracker()
        k = kind.strip().lower() if isinstance(kind, str) else kind
        if k == "tensorboard":
            return TensorBoardTracker(run_dir)
        if k == "swanlab":
            return SwanLabTracker(run_dir)
        if k == "wandb":
            return WandbTracker(run_dir)
        if k == "mlflow":
            return MLflowTracker(run_dir)
        raise ValueError(f"tracker {kind!r} is unknown; choose one of {_names()}")

    def log(self, step: int, metrics: dict[str, float]) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class TensorBoardTracker(Tracker):
    kind = "tensorboard"

    def __init__(self, run_dir):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # torch raises this when tensorboard itself is missing
            raise _missing("tensorboard", "tensorboard") from None
        self.writer = SummaryWriter(log_dir=str(_run_path(run_dir) / "tensorboard"))

    def log(self, step, metrics):
        for k, v in metrics.items():
            self.writer.add_scalar(k, float(v), global_step=int(step))
        self.writer.flush()

    def close(self):
        self.writer.close()


class SwanLabTracker(Tracker):
    kind = "swanlab"

    def __init__(self, run_dir):
        try:
            import swanlab
        except ImportError:
            raise _missing("swanlab", "swanlab") from None
        path = _run_path(run_dir)
        (path / "swanlab").mkdir(parents=True, exist_ok=True)
        self.run = swanlab.init(project=f"arl-{path.parent.name}", experiment_name=path.name,
                                config=_run_config(run_dir), logdir=str(path / "swanlab"),
                                mode=os.environ.get("SWANLAB_MODE") or "offline")

    def log(self, step, metrics):
        self.run.log({k: float(v) for k, v in metrics.items()}, step=int(step))

    def close(self):
        self.run.finish()


class WandbTracker(Tracker):
    kind = "wandb"

    def __init__(self, run_dir):
        try:
            import wandb
        except ImportError:
            raise _missing("wandb", "wandb") from None
        path = _run_path(run_dir)
        self.run = wandb.init(project=f"arl-{path.parent.name}", name=path.name,
                              config=_run_config(run_dir), dir=str(path), mode=os.environ.get("WANDB_MODE") or "offline")

    def log(self, step, metrics):
        self.run.log({k: float(v) for k, v in metrics.items()}, step=int(step))

    def close(self):
        self.run.finish()


def _mlflow_key(name: str) -> str:
    """An MLflow metric or param name: arl's `group/name` keys are valid as they are (MLflow allows
    letters, digits, `_ - . /` and spaces); anything else becomes `_`."""
    return re.sub(r"[^\w\-. /]", "_", name)


class MLflowTracker(Tracker):
    kind = "mlflow"

    def __init__(self, run_dir):
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # read when mlflow is imported; the user's value wins
        try:
            from mlflow.entities import Metric, Param
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise _missing("mlflow", "mlflow-skinny") from None
        self._metric = Metric
        path = _run_path(run_dir)
        uri = os.environ.get("MLFLOW_TRACKING_URI") or (path / "mlflow").resolve().as_uri()
        if uri.startswith("file:"):  # MLflow 3 keeps its file store behind this opt-in; no database, no server
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=uri)
        self.tracking_uri = uri
        name = f"arl-{path.parent.name}"
        experiment = self.client.get_experiment_by_name(name)
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(name)
        self.run_id = self.client.create_run(experiment_id, run_name=path.name).info.run_id
        params = [Param(_mlflow_key(k), str(v)[:6000]) for k, v in _run_config(run_dir).items()]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 params per batch
            self.client.log_batch(self.run_id, params=params[i:i + 100])

    def log(self, step, metrics):
        ms = int(time.time() * 1000)
        rows = [self._metric(_mlflow_key(k), float(v), ms, int(step)) for k, v in metrics.items()]
        for i in range(0, len(rows), 1000):  # and at most 1000 metrics
            self.client.log_batch(self.run_id, metrics=rows[i:i + 1000])

    def close(self):
        self.client.set_terminated(self.run_id)
