"""Optional external trackers behind one tiny interface: `log(step, metrics)` and `close()`.

metrics.jsonl in the run folder is always the record; a tracker only mirrors it to a dashboard.
None of the packages is a dependency of `arl`: each is imported when asked for, with the
`pip install` line in the error if it is missing. swanlab and wandb run offline (no account, no
network); their files go inside the run folder.
"""

from __future__ import annotations

from pathlib import Path

KINDS = (None, "tensorboard", "swanlab", "wandb")


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
        """`kind` is one of None (or "none"/""), "tensorboard", "swanlab", "wandb"."""
        if kind is None or (isinstance(kind, str) and kind.strip().lower() in ("", "none")):
            return Tracker()
        k = kind.strip().lower() if isinstance(kind, str) else kind
        if k == "tensorboard":
            return TensorBoardTracker(run_dir)
        if k == "swanlab":
            return SwanLabTracker(run_dir)
        if k == "wandb":
            return WandbTracker(run_dir)
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
                                config=_run_config(run_dir), logdir=str(path / "swanlab"), mode="offline")

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
                              config=_run_config(run_dir), dir=str(path), mode="offline")

    def log(self, step, metrics):
        self.run.log({k: float(v) for k, v in metrics.items()}, step=int(step))

    def close(self):
        self.run.finish()
