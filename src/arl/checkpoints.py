"""Checkpoint URIs and atomic folder writes.

`arl://RUN/sampler_weights/NAME` and `arl://RUN/training_state/NAME` name folders under
`settings.checkpoint_root()/RUN/...`; `trio://` and `tinker://` URIs written by scripts for the
reference lab resolve the same way, and a plain folder path is accepted as it is.
Each folder holds standard files (safetensors weights, a peft adapter for LoRA, `optimizer.pt`) plus
`arl_checkpoint.json`, so another process, or plain `transformers`/`peft`, can load it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from pathlib import Path

from . import settings

SCHEMES = ("arl://", "trio://", "tinker://")
KINDS = ("sampler_weights", "training_state")
META_FILE = "arl_checkpoint.json"


class CheckpointNotFoundError(FileNotFoundError):
    pass


def checkpoint_root() -> Path:
    return settings.get().home / "checkpoints"


def make_uri(run: str, kind: str, name: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"checkpoint kind must be one of {KINDS}, got {kind!r}")
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"checkpoint name {name!r}: use a non-empty name without '/'")
    return f"arl://{run}/{kind}/{name}"


def resolve(path: str) -> Path:
    """The local folder behind a checkpoint URI or path (not checked for existence)."""
    for scheme in SCHEMES:
        if path.startswith(scheme):
            parts = path[len(scheme):].split("/")
            if len(parts) != 3 or parts[1].rstrip("s") not in ("sampler_weight", "training_state"):
                raise ValueError(f"checkpoint URI {path!r}: expected {scheme}RUN/sampler_weights/NAME "
                                 f"or {scheme}RUN/training_state/NAME")
            kind = "sampler_weights" if parts[1].startswith("sampler") else "training_state"
            return checkpoint_root() / parts[0] / kind / parts[2]
    return Path(path).expanduser()


def read_meta(path: str) -> tuple[Path, dict]:
    """Folder and metadata of an existing checkpoint; a clear error when it is not there."""
    folder = resolve(path)
    meta_file = folder / META_FILE
    if not meta_file.is_file():
        raise CheckpointNotFoundError(
            f"no checkpoint at {path!r} (looked for {meta_file}); pass a path returned by save_state / "
            f"save_weights_for_sampler, and check ARL_HOME (now {settings.get().home})"
        )
    return folder, json.loads(meta_file.read_text())


@contextlib.contextmanager
def atomic_dir(target: Path, overwrite: bool = True):
    """Yield a temporary folder beside `target`; on success it replaces `target` in one rename, so a
    crash at any moment leaves either the old checkpoint or the new one, never half of one."""
    target = Path(target)
    if target.exists() and not overwrite:
        raise FileExistsError(f"checkpoint {target} exists; pass overwrite=True or choose another name")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        yield tmp
        old = None
        if target.exists():
            old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_json(path: Path, obj) -> None:
    """Write JSON through a temporary file and a rename (atomic on POSIX)."""
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True))
    os.replace(tmp, path)
