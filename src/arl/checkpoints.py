"""Checkpoint URIs and atomic folder writes.

`arl://RUN/sampler_weights/NAME` and `arl://RUN/training_state/NAME` name folders under
`settings.checkpoint_root()/RUN/...`; `trio://` and `tinker://` URIs written by scripts for the
reference lab resolve the same way, and a plain folder path is accepted as it is.
Each folder holds standard files (safetensors weights, a peft adapter for LoRA, `optimizer.pt`) plus
`arl_checkpoint.json`, so another process, or plain `transformers`/`peft`, can load it. The metadata
lists each file's SHA-256 (`files`): a checkpoint damaged after it was written fails `verify` with an
error naming the file, rather than loading garbage.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path

from . import atomic, settings

SCHEMES = ("arl://", "trio://", "tinker://")
KINDS = ("sampler_weights", "training_state")
META_FILE = "arl_checkpoint.json"


class CheckpointNotFoundError(FileNotFoundError):
    pass


class CheckpointCorruptError(ValueError):
    """A checkpoint's files do not match the digests its metadata recorded."""


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
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointCorruptError(f"checkpoint {folder}: {META_FILE} is not valid JSON ({e})") from None
    if not isinstance(meta, dict) or not {"kind", "base_model", "lora_rank"} <= set(meta):
        raise CheckpointCorruptError(f"checkpoint {folder}: {META_FILE} lacks kind, base_model or lora_rank")
    return folder, meta


def file_digests(folder: Path) -> dict[str, str]:
    """SHA-256 of every file in a checkpoint folder but the metadata (which records them)."""
    out = {}
    for f in sorted(Path(folder).iterdir()):
        if f.is_file() and f.name != META_FILE:
            h = hashlib.sha256()
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            out[f.name] = h.hexdigest()
    return out


def verify(folder: Path, meta: dict) -> None:
    """Check a checkpoint's files against the digests in its metadata (checkpoints written before the
    digests existed pass unchecked)."""
    expected = meta.get("files")
    if expected is None:
        return
    actual = file_digests(folder)
    for name, digest in expected.items():
        if name not in actual:
            raise CheckpointCorruptError(f"checkpoint {folder}: {name} is missing")
        if actual[name] != digest:
            raise CheckpointCorruptError(f"checkpoint {folder}: {name} is damaged (its SHA-256 differs from "
                                         f"the one recorded when it was saved)")


def _fsync_tree(folder: Path) -> None:
    for f in folder.iterdir():
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
    atomic.fsync_dir(folder)


@contextlib.contextmanager
def atomic_dir(target: Path, overwrite: bool = True):
    """Yield a temporary folder beside `target`; on success its files are fsynced and it replaces
    `target` in one rename, so a crash at any moment leaves either the old checkpoint or the new one,
    never half of one (what a kill leaves behind, `atomic.clean_partial` finishes on the next write)."""
    target = Path(target)
    if target.exists() and not overwrite:
        raise FileExistsError(f"checkpoint {target} exists; pass overwrite=True or choose another name")
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic.clean_partial(target.parent)
    tmp = atomic.partial_path(target)
    tmp.mkdir()
    try:
        yield tmp
        _fsync_tree(tmp)
        old = None
        if target.exists():
            old = atomic.partial_path(target, "old")
            os.replace(target, old)
        os.replace(tmp, target)
        atomic.fsync_dir(target.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_json(path: Path, obj) -> None:
    """Write JSON atomically and durably (`atomic.write_bytes`)."""
    atomic.write_bytes(Path(path), json.dumps(obj, indent=2, sort_keys=True).encode("utf-8"))
