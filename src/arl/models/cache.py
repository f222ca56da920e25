"""The model cache under `settings.get().home / "models"`: one folder per model, built once and
installed with an atomic rename, so a reader never sees a half-written folder and two processes that
build the same model at once both end up with one complete copy.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from arl import settings

MANIFEST = "arl_model.json"


def cache_dir(name: str) -> Path:
    """Folder for `name` in the cache; `/` becomes `--` as in the Hugging Face hub cache."""
    return settings.get().home / "models" / name.replace("/", "--")


def read_manifest(folder: Path) -> dict | None:
    try:
        return json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def _is_current(folder: Path, stamp: dict) -> bool:
    manifest = read_manifest(folder)
    return manifest is not None and all(manifest.get(k) == v for k, v in stamp.items())


def ensure_built(folder: Path, stamp: dict, build: Callable[[Path], dict]) -> Path:
    """Return `folder`, first building it if its manifest does not match `stamp`.

    `build(tmp)` writes the model files into an empty temporary folder and returns extra manifest
    fields; the manifest (`stamp` plus those fields) is written last, then the folder is renamed
    into place. A folder from an older build version is moved aside and replaced.
    """
    if _is_current(folder, stamp):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.building-", dir=folder.parent))
    os.chmod(tmp, 0o755)  # mkdtemp makes it private; the cache may be shared between users
    try:
        extra = build(tmp)
        (tmp / MANIFEST).write_text(json.dumps({**stamp, **extra}, indent=2) + "\n")
        if folder.exists() and not _is_current(folder, stamp):
            stale = Path(tempfile.mkdtemp(prefix=f".{folder.name}.stale-", dir=folder.parent))
            try:
                os.rename(folder, stale / "old")
            except FileNotFoundError:  # another process moved it first
                pass
            shutil.rmtree(stale, ignore_errors=True)
        try:
            os.rename(tmp, folder)
        except OSError:
            if not _is_current(folder, stamp):  # lost the race to a finished copy: keep theirs
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder
