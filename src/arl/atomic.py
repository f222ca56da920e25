"""Crash-safe file writes, the one mechanism under the run folder's files and the checkpoints.

A whole file goes to a temporary file beside its target, named `.<name>.tmp-<pid>-<8 hex>`, is fsynced,
then `os.replace`d over the target, and the folder is fsynced: a reader sees the old file or the new one,
never half of one. A checkpoint folder is written the same way (`arl.checkpoints.atomic_dir`), its
displaced old version named `.<name>.old-<pid>-<8 hex>` until the rename is done. `clean_partial`
finishes what a killed writer left, told apart from a live writer's by the pid in the name.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path

_PARTIAL = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)-[0-9a-f]{8}$")


def partial_path(target: Path, kind: str = "tmp") -> Path:
    """Where this process writes `target` before the rename (`kind` tmp), or keeps its old version (old)."""
    return target.parent / f".{target.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def fsync_dir(folder: Path) -> None:
    """Make a rename in `folder` durable; POSIX only, harmless to skip elsewhere."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically and durably (its folder is made if missing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_path(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_partial(parent: Path) -> None:
    """Finish what a killed writer left in `parent`: a temporary file or folder of a dead process is
    removed; a displaced old checkpoint whose replacement never arrived is put back, else removed."""
    if not Path(parent).is_dir():
        return
    for entry in Path(parent).iterdir():
        m = _PARTIAL.match(entry.name)
        if not m or _alive(int(m["pid"])):
            continue
        target = entry.parent / m["name"]
        if m["kind"] == "old" and not target.exists():
            os.replace(entry, target)
        elif entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
