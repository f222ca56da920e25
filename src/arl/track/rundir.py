"""The run folder every chapter writes: `runs/<chapter>/<name>/`.

    config.json        the resolved config, written once (atomically) at creation
    metrics.jsonl      one JSON object per logged step: {"step": 3, "reward/mean": 0.41, ...}
    rollouts.jsonl     one line per rollout row: {"step": 3, "prompt": ..., "completion": ..., ...}
    eval/<name>.json   one file per evaluation (atomic)
    images/<hash>.png  the images a row or evaluation item names (`save_image`), each written once
    checkpoints/       for the caller's checkpoints (see `arl.checkpoints.atomic_dir`)
    plots/*.png        written by `arl.report.plot_metrics`
    report.html        written by `arl.report.write_report`

    run.json           which chapter made the run (resume refuses another chapter's run)
    superseded.jsonl   log lines a resume dropped (steps after its checkpoint, redone): moved, never deleted
    .lock              the pid of the process that holds the run (an exclusive lock, see `RunDir.lock`)

Whole files are replaced with `os.replace`; the two logs are append-only and fsynced on every call,
so `kill -9` at any moment leaves a folder that `RunDir.open` and `read_metrics` still read (at worst
the last line is torn, and it is skipped). To resume: `run = RunDir.open(path)`, `run.lock()`, load the
checkpoint of step k, `run.truncate_after(k)`, continue from step k + 1.

A run folder is created in one step (`mkdir` fails if another process made it first) with mode 0700:
other users (and sandboxed code, which runs as another uid) cannot read its rollouts and answers.
One process at a time writes a run: `create` and `lock` take an exclusive `flock` on `.lock`, held until
the process exits (or `close`); a second process gets `RunLockedError` naming the holder.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import hashlib
import json
import os
from pathlib import Path

from .. import atomic
from . import _io

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
ROLLOUTS_FILE = "rollouts.jsonl"
META_FILE = "run.json"
SUPERSEDED_FILE = "superseded.jsonl"
LOCK_FILE = ".lock"


class NotARunError(FileNotFoundError):
    """The path given to `RunDir.open` is not a run folder."""


class RunLockedError(RuntimeError):
    """Another process holds the run folder."""


_HELD: dict[str, list] = {}
"""Locks this process holds: real path -> [fd, holders]. flock excludes other processes; the RunDir
objects of one process share the lock (a test, or a report read during the run, may open it twice)."""


def _acquire(path: Path) -> str:
    key = os.path.realpath(path)
    if key in _HELD:
        _HELD[key][1] += 1
        return key
    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise RunLockedError(f"run folder {path} is in use by another process (pid {holder}); wait for it "
                                 f"to finish or stop it, then try again") from None
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _HELD[key] = [fd, 1]
    return key


def _release(key: str) -> None:
    held = _HELD.get(key)
    if held is None:
        return
    held[1] -= 1
    if held[1] == 0:
        os.close(held[0])  # closing the last descriptor drops the flock
        del _HELD[key]


def _check_part(field: str, value: str) -> str:
    if not isinstance(value, str) or not value or "/" in value or "\\" in value or value in (".", ".."):
        raise ValueError(f"run {field} {value!r}: use a non-empty name without '/' (e.g. 'grpo', 'lr3e-5')")
    return value


def _check_step(step) -> int:
    if hasattr(step, "item"):
        step = step.item()
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise TypeError(f"step must be a non-negative int, got {step!r}")
    return step


def _unstarted(path: Path) -> bool:
    """A folder no run has started in: empty, or what a creation killed before its config.json left."""
    if (path / CONFIG_FILE).exists():
        return False
    leftovers = {LOCK_FILE, META_FILE, "checkpoints"}
    return all(p.name in leftovers and not (p.is_dir() and any(p.iterdir())) for p in path.iterdir())


def _make(path: Path) -> bool:
    """Create `path` (mode 0700); False when it exists (an empty existing folder of a name the caller
    chose is taken as it is: `create` locks it and checks it is still empty)."""
    try:
        path.mkdir(mode=0o700)
        return True
    except FileExistsError:
        return False


class RunDir:
    """One run's folder. Build it with `RunDir.create(...)` (new run) or `RunDir.open(path)` (resume,
    report); the constructor itself does no I/O."""

    def __init__(self, path: str | Path, config: dict):
        self.path = Path(path)
        self.config = config
        self._repaired: set[str] = set()
        self._lock: str | None = None

    # -- layout -------------------------------------------------------------------------------------
    @property
    def chapter(self) -> str:
        """The chapter that made the run (`run.json`; runs made before it existed: the parent folder's name)."""
        try:
            return json.loads((self.path / META_FILE).read_text(encoding="utf-8"))["chapter"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError, TypeError):
            return self.path.parent.name

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def metrics_file(self) -> Path:
        return self.path / METRICS_FILE

    @property
    def rollouts_file(self) -> Path:
        return self.path / ROLLOUTS_FILE

    @property
    def eval_dir(self) -> Path:
        return self.path / "eval"

    @property
    def images_dir(self) -> Path:
        return self.path / "images"

    def save_image(self, png: bytes) -> str:
        """Store an image the run's rows refer to and return its name (`<sha256 prefix>.png`). Named by
        content, so a figure shown in many rows is written once, and a name always means the same pixels."""
        name = f"{hashlib.sha256(png).hexdigest()[:16]}.png"
        path = self.images_dir / name
        if not path.is_file():
            _io.atomic_write_bytes(path, png)
        return name

    def read_image(self, name: str) -> bytes:
        """The bytes of an image named by `save_image` (a clear error for a name that is not one)."""
        if not (len(name) == 20 and name.endswith(".png") and all(c in "0123456789abcdef" for c in name[:16])):
            raise ValueError(f"image name {name!r}: expected '<16 hex digits>.png', as save_image returns")
        path = self.images_dir / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: the image this row names is missing from the run folder")
        return path.read_bytes()

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / "checkpoints"

    @property
    def plots_dir(self) -> Path:
        return self.path / "plots"

    @property
    def report_file(self) -> Path:
        return self.path / "report.html"

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # -- create / open ------------------------------------------------------------------------------
    @classmethod
    def create(cls, root: str | Path, chapter: str, name: str | None, config: dict) -> "RunDir":
        """Make `root/chapter/name/` (mode 0700), lock it (`lock`) and write `config.json` and `run.json`.
        `name=None` picks a timestamp (`20250101-120000`, with `-2`, `-3`... if taken). An existing folder
        that holds anything is refused rather than mixed into; of two processes creating the same folder
        at once, exactly one succeeds."""
        _check_part("chapter", chapter)
        if not isinstance(config, dict):
            raise TypeError(f"config must be a dict (e.g. dataclasses.asdict(cfg)), got {type(config).__name__}")
        try:  # fail before touching the disk, naming what cannot be saved
            text = _io.dumps(config, indent=2, sort_keys=False) + "\n"
        except TypeError as e:
            raise TypeError(f"config cannot be saved as JSON: {e}") from None
        cls.check_new(root, chapter, name)
        parent = Path(root).expanduser() / chapter
        parent.mkdir(parents=True, exist_ok=True)
        if name is None:
            stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
            path, i = parent / stamp, 1
            while not _make(path):
                i += 1
                path = parent / f"{stamp}-{i}"
        else:
            path = parent / name
            _make(path)
        run = cls(path, {})
        try:
            run.lock()
        except RunLockedError:
            raise FileExistsError(f"run folder {path} is being created by another process; choose another name") from None
        if not _unstarted(path):
            run.close()
            raise FileExistsError(
                f"run folder {path} already exists and is not empty; choose another name (--name), "
                f"remove the folder, or resume it with --resume {path}")
        os.chmod(path, 0o700)  # an empty folder made beforehand may have been readable by all
        (path / "checkpoints").mkdir(exist_ok=True)
        _io.atomic_write_text(path / META_FILE, _io.dumps({"chapter": chapter}) + "\n")
        _io.atomic_write_text(path / CONFIG_FILE, text)
        run.config = json.loads(text)
        return run

    @staticmethod
    def check_new(root: str | Path, chapter: str, name: str | None) -> None:
        """The errors `create` would raise about where the run goes, without touching the disk (so a
        command can check its arguments before any work)."""
        _check_part("chapter", chapter)
        for folder in (Path(root).expanduser(), Path(root).expanduser() / chapter):
            if folder.exists() and not folder.is_dir():
                raise FileExistsError(f"{folder} exists and is not a folder; pass another --out")
        if name is None:
            return
        path = Path(root).expanduser() / chapter / _check_part("name", name)
        if path.exists() and not path.is_dir():
            raise FileExistsError(f"run folder {path} exists and is not a folder; choose another name")
        if path.is_dir() and not _unstarted(path):
            raise FileExistsError(
                f"run folder {path} already exists and is not empty; choose another name (--name), "
                f"remove the folder, or resume it with --resume {path}")

    @classmethod
    def open(cls, path: str | Path) -> "RunDir":
        """Open an existing run folder (to resume it, or to report on it)."""
        path = Path(path).expanduser()
        cfg_file = path / CONFIG_FILE
        if not cfg_file.is_file():
            what = "does not exist" if not path.exists() else f"has no {CONFIG_FILE}"
            raise NotARunError(f"{path} is not a run folder: it {what}; pass a folder made by a run, "
                               f"like runs/<chapter>/<name>")
        try:
            config = json.loads(cfg_file.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise NotARunError(f"{cfg_file} is not valid JSON ({e}); it was edited by hand?") from None
        if not isinstance(config, dict):
            raise NotARunError(f"{cfg_file} must hold a JSON object, got {type(config).__name__}")
        return cls(path, config)

    # -- lock ---------------------------------------------------------------------------------------
    def lock(self) -> "RunDir":
        """Take the run's exclusive lock (until `close` or the process's exit); `RunLockedError` when
        another process holds it. `create` takes it; a resume takes it before it changes anything, and then
        finishes what a killed holder's atomic writes left (`atomic.clean_partial`)."""
        if self._lock is None:
            self._lock = _acquire(self.path)
            for folder in [self.path, *(p for p in self.path.rglob("*") if p.is_dir() and not p.name.startswith("."))]:
                atomic.clean_partial(folder)  # what a killed holder's atomic writes left
        return self

    def close(self) -> None:
        """Release the lock (a no-op when not held)."""
        if self._lock is not None:
            _release(self._lock)
            self._lock = None

    def __enter__(self) -> "RunDir":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- logs ---------------------------------------------------------------------------------------
    def _append(self, file: Path, objs: list[dict]) -> None:
        if file.name not in self._repaired:  # a previous process may have died mid-line
            _io.repair_tail(file)
            self._repaired.add(file.name)
        _io.append_lines(file, objs)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        """Append `{"step": step, **metrics}` to metrics.jsonl. Keys are namespaced: `reward/mean`,
        `loss/pg`, `rollout/len`, `time/step`."""
        step = _check_step(step)
        if "step" in metrics:
            raise ValueError("metrics must not contain the key 'step'; pass it as the step argument")
        row = {"step": step}
        for k, v in metrics.items():
            if not isinstance(k, str) or not k:
                raise TypeError(f"metric keys must be non-empty strings, got {k!r}")
            row[k] = _io.as_float(k, v)
        self._append(self.metrics_file, [row])

    def log_rollouts(self, step: int, rows: list[dict]) -> None:
        """Append one line `{"step": step, **row}` per row to rollouts.jsonl (tokens, masks,
        logprobs, prompt, completion, reward, advantage... whatever the chapter records)."""
        step = _check_step(step)
        objs = []
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise TypeError(f"rollout row {i} must be a dict, got {type(row).__name__}")
            objs.append({"step": step, **{k: v for k, v in row.items() if k != "step"}})
        try:  # append_lines serialises every row before it opens the file: all rows or none
            self._append(self.rollouts_file, objs)
        except TypeError as e:
            raise TypeError(f"rollout rows cannot be saved as JSON: {e}") from None

    def write_eval(self, name: str, result: dict) -> None:
        """Write `eval/<name>.json` atomically (e.g. name='before', 'after', 'step100')."""
        _check_part("eval name", name)
        try:
            text = _io.dumps(result, indent=2) + "\n"
        except TypeError as e:
            raise TypeError(f"eval result {name!r} cannot be saved as JSON: {e}") from None
        _io.atomic_write_text(self.eval_dir / f"{name}.json", text)

    def read_eval(self, name: str) -> dict:
        file = self.eval_dir / f"{name}.json"
        if not file.is_file():
            have = ", ".join(self.eval_names()) or "none"
            raise FileNotFoundError(f"no eval {name!r} in {self.path} (looked for {file}); have: {have}")
        return json.loads(file.read_text(encoding="utf-8"))

    def eval_names(self) -> list[str]:
        if not self.eval_dir.is_dir():
            return []
        return sorted(p.stem for p in self.eval_dir.glob("*.json"))

    def read_metrics(self) -> list[dict]:
        """All logged metric rows, in order; a torn last line (a run killed mid-write) is skipped."""
        return _io.read_lines(self.metrics_file)

    def read_rollouts(self, step: int | None = None) -> list[dict]:
        """Rollout rows, all of them or those of one step."""
        rows = _io.read_lines(self.rollouts_file)
        return rows if step is None else [r for r in rows if r.get("step") == step]

    def last_step(self) -> int | None:
        """The largest step in metrics.jsonl, or None if nothing was logged yet."""
        steps = [r["step"] for r in self.read_metrics() if isinstance(r.get("step"), int)]
        return max(steps) if steps else None

    def truncate_after(self, step: int) -> None:
        """Drop metric and rollout lines with step > `step` (and any torn line), each file in one
        atomic rewrite, so a run resumed from the checkpoint of `step` continues exactly. The dropped
        lines are first appended to `superseded.jsonl` (each with its `file`), so nothing logged is ever
        lost. `truncate_after(-1)` empties both logs (a resume that found no checkpoint starts over)."""
        if hasattr(step, "item"):
            step = step.item()
        if isinstance(step, bool) or not isinstance(step, int):
            raise TypeError(f"step must be an int, got {step!r}")
        for file in (self.metrics_file, self.rollouts_file):
            if not file.exists():
                continue
            rows = _io.read_lines(file)
            keep = [r for r in rows if not (isinstance(r.get("step"), int) and r["step"] > step)]
            raw = file.read_bytes()
            if len(keep) == len(rows) and (not raw or raw.endswith(b"\n")):  # nothing to drop, no torn line
                continue
            dropped = [{"file": file.name, **r} for r in rows if isinstance(r.get("step"), int) and r["step"] > step]
            _io.append_lines(self.path / SUPERSEDED_FILE, dropped)
            _io.atomic_write_text(file, "".join(_io.dumps(r) + "\n" for r in keep))
            self._repaired.add(file.name)
