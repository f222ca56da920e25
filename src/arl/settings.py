"""Process-wide settings: where `arl` keeps its files, how many torch threads it uses, and on which
device and in which precision the local engine computes.

Settings come from `arl.configure(...)`, else the environment (`ARL_HOME`, `ARL_NUM_THREADS`,
`ARL_DEVICE`, `ARL_DTYPE`, `ARL_AUTOCAST`), else a
default. They are read when first needed, so `configure` must run before the first client is created.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass
class Settings:
    home: Path
    """Root for the model cache (`models/`) and checkpoints (`checkpoints/`)."""
    num_threads: int
    """torch intra-op threads. Measured on 2 cores (reference/feasibility.md 2a-2c): 2 threads are
    1.4-1.7x faster than 1 on an idle machine, but up to 10x slower when another busy process shares
    the cores, so recipes that run environment or reward workers beside the trainer set 1."""
    device: str
    """`cpu`, `cuda` or `auto` (cuda when available)."""
    dtype: str = "float32"
    """The models' floating-point type: float32, or float64 (`ARL_DTYPE`), in which a run's numbers no
    longer depend on the CPU's kernels in any digit a test compares: the pinned smoke rows
    (tests/smoke.py) are float64 runs."""
    autocast: str = "bf16"
    """On a CUDA GPU that supports bfloat16, the float32 models' forward passes (training and sampling)
    run under bf16 autocast (`ARL_AUTOCAST=bf16`, the default): matmuls in bf16 at several times the
    float32 speed, weights, optimizer state and losses kept in float32. `off` keeps every computation in
    float32. CPU runs and float64 runs are never autocast, so what a CPU computes does not change."""


def _default() -> Settings:
    home = Path(os.environ.get("ARL_HOME", Path.home() / ".cache" / "arl")).expanduser()
    threads = os.environ.get("ARL_NUM_THREADS")
    return Settings(
        home=home,
        num_threads=int(threads) if threads else min(2, _available_cores()),
        device=os.environ.get("ARL_DEVICE", "auto"),
        dtype=_dtype(os.environ.get("ARL_DTYPE", "float32"), "ARL_DTYPE"),
        autocast=_autocast(os.environ.get("ARL_AUTOCAST", "bf16"), "ARL_AUTOCAST"),
    )


def _dtype(value: str, name: str) -> str:
    if value not in ("float32", "float64"):
        raise ValueError(f"{name}={value!r}: use float32 or float64")
    return value


def _autocast(value: str, name: str) -> str:
    if value not in ("bf16", "off"):
        raise ValueError(f"{name}={value!r}: use bf16 or off")
    return value


_settings: Settings | None = None
_applied_threads: int | None = None


def get() -> Settings:
    global _settings
    if _settings is None:
        _settings = _default()
    return _settings


def configure(**kwargs) -> Settings:
    """Set process-wide options: `home`, `num_threads`, `device`, `dtype`, `autocast`.

    Keys the reference lab's `trio.configure` accepts for its remote service (timeouts, retries,
    queue sizes) mean nothing to the local engine and are accepted and ignored, so its scripts run.
    """
    s = get()
    known = {f.name for f in fields(Settings)}
    for key, value in kwargs.items():
        if key in known:
            if key == "home":
                value = Path(value).expanduser()
            if key == "num_threads" and (not isinstance(value, int) or value < 1):
                raise ValueError(f"configure(num_threads={value!r}): must be an integer >= 1")
            if key == "dtype":
                value = _dtype(value, "configure(dtype)")
            if key == "autocast":
                value = _autocast(value, "configure(autocast)")
            if key == "device" and value not in ("cpu", "cuda", "auto"):
                raise ValueError(f"configure(device={value!r}): use 'cpu', 'cuda' or 'auto'")
            setattr(s, key, value)
        elif key not in REMOTE_ONLY_KEYS:
            raise TypeError(
                f"configure() got an unknown key {key!r}; known: {sorted(known | REMOTE_ONLY_KEYS)}"
            )
    apply_threads()
    return s


REMOTE_ONLY_KEYS = {
    "timeout", "sampling_timeout", "actor_event_wait_timeout", "actor_event_request_timeout",
    "actor_event_submit_timeout", "actor_event_polling_timeout", "max_retries", "api_key",
    "base_url", "log_level", "heartbeat_interval", "env",
}


def apply_threads() -> None:
    """Apply `num_threads` to torch (once per change)."""
    global _applied_threads
    n = get().num_threads
    if _applied_threads != n:
        import torch

        torch.set_num_threads(n)
        _applied_threads = n


def init_worker_thread() -> None:
    """Run first in every thread that does torch compute. The OpenMP thread count torch sets is a
    per-thread setting: a new thread that skips this ran the same matmuls about 1.8x slower here."""
    import torch

    torch.set_num_threads(get().num_threads)


def torch_device():
    import torch

    d = get().device
    if d == "auto":
        d = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(d)


def autocast(device):
    """The context that runs a forward pass on `device` under the `autocast` setting: bf16 autocast on
    a CUDA device that supports it, for float32 models; otherwise no change at all."""
    import contextlib

    import torch

    s = get()
    if s.autocast == "bf16" and s.dtype == "float32" and device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
