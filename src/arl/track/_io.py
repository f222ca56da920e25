"""Crash-safe file writes shared by the run folder and the report.

Two kinds of write, and nothing else:
- whole files go to a temporary file beside the target, are fsynced, then `os.replace`d over it, so
  a reader sees the old file or the new one, never half of one;
- logs are append-only JSON lines, fsynced after each call; a kill mid-write can only tear the last
  line, which readers skip and the next append repairs.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import os
from pathlib import Path

from .. import atomic


def to_jsonable(obj):
    """`json.dumps(default=...)` hook: dataclasses, paths, enums, sets, numpy and torch values."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    if hasattr(obj, "tolist"):  # numpy arrays and scalars, torch tensors
        return obj.detach().cpu().tolist() if hasattr(obj, "detach") else obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"{type(obj).__name__} is not JSON-serialisable: {obj!r:.80}")


def dumps(obj, **kw) -> str:
    """JSON text of `obj`; a non-finite float (NaN, inf) is written as `null`, so every file stays valid
    JSON (Python's bare `NaN`/`Infinity` are not) and a reader sees "no value" rather than a number."""
    try:
        return json.dumps(obj, default=to_jsonable, ensure_ascii=False, allow_nan=False, **kw)
    except ValueError:  # a non-finite float somewhere: replace it, then write
        return json.dumps(_finite_or_null(obj), default=to_jsonable, ensure_ascii=False, allow_nan=False, **kw)


def _finite_or_null(obj):
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_or_null(v) for v in obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type) or hasattr(obj, "tolist") or hasattr(obj, "item"):
        try:
            return _finite_or_null(to_jsonable(obj))
        except TypeError:
            return obj
    return obj


atomic_write_bytes = atomic.write_bytes


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def repair_tail(path: Path) -> None:
    """Cut a torn last line (no trailing newline) so that the next append starts on a fresh line."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == 0:
        return
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return
        # Walk back to the last newline; files are small enough to read their tail in chunks.
        pos, chunk, cut = size, 1 << 16, 0
        while pos > 0:
            start = max(0, pos - chunk)
            f.seek(start)
            nl = f.read(pos - start).rfind(b"\n")
            if nl >= 0:
                cut = start + nl + 1
                break
            pos = start
        f.seek(cut)
        try:  # a complete object that only lacks its newline is kept, as `read_lines` keeps it
            json.loads(f.read())
            f.seek(0, os.SEEK_END)
            f.write(b"\n")
        except (json.JSONDecodeError, UnicodeDecodeError):
            f.truncate(cut)
        f.flush()
        os.fsync(f.fileno())


def append_lines(path: Path, objs: list[dict]) -> None:
    """Append one JSON line per object in a single write, then flush and fsync."""
    if not objs:
        return
    data = "".join(dumps(o) + "\n" for o in objs).encode("utf-8")
    with open(path, "ab") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def read_lines(path: Path) -> list[dict]:
    """Parse a JSON-lines file, skipping a torn last line; a bad line anywhere else is an error."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    lines = raw.split(b"\n")
    torn_ok = not raw.endswith(b"\n")  # only a line without its newline can be a torn write
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            if torn_ok and i == len(lines) - 1:
                break
            raise ValueError(f"{path}:{i + 1}: not a JSON line ({e}); the file was edited or "
                             f"corrupted; remove that line to continue") from None
        if not isinstance(obj, dict):
            raise ValueError(f"{path}:{i + 1}: expected a JSON object per line, got {type(obj).__name__}")
        out.append(obj)
    return out


def as_float(key: str, value) -> float:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"metric {key!r} must be a number, got {type(value).__name__} {value!r:.60}")
    return float(value)


def finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
