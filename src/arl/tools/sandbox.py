"""A sandbox for model-written Python: each call a fresh, caged, short-lived process.

`Sandbox(config).run(code)` starts `_launcher.py` (a standalone script, under an interpreter the
sandbox user can execute) which layers, from the outside in:

- its own network namespace (no interface but a downed loopback: no connection goes anywhere),
- its own PID namespace (a small init is PID 1 and the code its child: when either ends or is killed,
  the kernel kills everything the code started, so a fork bomb's children cannot linger and starve
  the next call; without the namespace, the launcher kills what is left of the call's uid),
- its own mount table and root: a read-only tmpfs with nothing of the host's but the system's /usr (and
  /bin, /lib, ...), the interpreter and /etc/ld.so.cache, read-only; a /dev of null, zero, full, random,
  urandom and a small private /dev/shm; an empty /sys; a fresh /proc that shows only the sandbox; an
  empty tmpfs /tmp as the working folder, gone with the namespace. No /run, /home, project or run
  folder, and so no host Unix socket (abstract ones belong to the network namespace),
- IPC and UTS namespaces,
- rlimits (CPU seconds, address space, processes, file size, open files, no core),
- an unprivileged uid of its own per running call, leased machine-wide with a lock file, because
  RLIMIT_NPROC counts per uid and the cleanup without a PID namespace kills by uid,
- a seccomp filter (no sockets but AF_UNIX, no ptrace, mount, namespaces, kernel modules, ...),
- an empty environment but PATH/LANG, `python -I -S` (no site-packages, no PYTHON* variables),
- a wall-clock timeout (the launcher SIGKILLs init; the trainer kills the launcher's process group
  if that ever fails), death with the parent (the launcher with the trainer's calling thread, init
  with the launcher, the code with init), and
  output read while it runs, keeping a head and a tail within a byte budget and stopping the run
  when it prints too much.

docs/sandbox.md has the escape tests, what contains each, and the measured cost.

Without the namespaces (turned off, or refused by the kernel: not root and no user namespaces) nothing
runs unless `SandboxConfig.allow_unisolated` says so: a `SandboxError` names the field. When another
layer is refused (not root, no libseccomp), or the caller allowed that, the run goes on with the layers
that work, and says so: in `SandboxResult.notes`, in the tool text, in `capabilities()`, and in a
one-time warning. A failure of the sandbox itself (not of the code) raises `SandboxError`; a machine
whose sandbox uids are all in use is a tool result (outcome error, "the sandbox is busy").
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import io
import logging
import marshal
import os
import re
import secrets
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Callable

from arl import settings as arl_settings

log = logging.getLogger(__name__)

LAUNCHER = Path(__file__).with_name("_launcher.py")
OUTCOMES = ("ok", "error", "timeout", "killed")
LAYERS = ("netns", "pidns", "mountns", "ipcns", "utsns", "proc", "hostfs", "dev", "rlimits", "user", "seccomp")
MISSING_LAYER_EFFECT = {
    "netns": "NO NETWORK ISOLATION: the code can open network connections",
    "pidns": "leftover processes are killed afterwards by the call's uid (with the user switch), else only "
             "by process group, which a child in a new session escapes",
    "mountns": "/tmp and /dev/shm are the host's, and the working folder is a host temp folder",
    "ipcns": "System V IPC objects are shared with the host",
    "utsns": "the host name is shared with the host",
    "proc": "the code can list the host's processes and their command lines",
    "hostfs": "the code sees the host's file system: every world-readable file (the project, run folders "
              "with their answers, /sys) and the Unix sockets under /run and /tmp (system log, D-Bus)",
    "dev": "the host's /dev: every device node the code's user may open",
    "rlimits": "nothing bounds CPU, memory, processes or file size",
    "user": "the code runs as the trainer's user: it can read and write whatever of the host it sees as "
            "that user (with the mount namespace, only its own root)",
    "seccomp": "all system calls are open to the code",
}
"""What the code can do when a layer is missing, for the notes and the warning."""

CODE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
"""The code's whole environment (plus HOME and TMPDIR, its working folder): nothing of the trainer's."""

PYTHON_CANDIDATES = ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3")
"""System interpreters tried, after the trainer's own, when the code runs as another user."""

WORKDIR_PREFIX = "arl-sandbox-"
"""Host working folders (only without a mount namespace) are named PREFIX<trainer pid>-<random>, so that
a later Sandbox can remove those of trainers that were killed mid-call."""

BACKSTOP_GRACE_S = 2.0
"""How long past the wall timeout the trainer waits for the launcher before killing its process group."""

DRAIN_AFTER_KILL_S = 2.0
"""How long the trainer keeps reading after a kill, for the pipes to close."""

SIGNAL_REASONS = {
    signal.SIGXCPU: "the CPU time limit of {cpu} s",
    signal.SIGKILL: "SIGKILL (sent by the code itself, or by the kernel when memory ran out)",
    signal.SIGSEGV: "a segmentation fault",
    signal.SIGXFSZ: "the file size limit",
}


class SandboxError(RuntimeError):
    """The sandbox itself failed (bad interpreter, refused setup): not the code's fault, so not a result."""


@dataclasses.dataclass
class SandboxConfig:
    """Limits and layers of a `Sandbox`; every field is checked by `validate` before any run."""

    wall_timeout_s: float = 10.0
    """Wall-clock seconds a call may take before it and every process it started are killed."""
    cpu_time_s: int = 5
    """CPU seconds (RLIMIT_CPU, per process); the process gets SIGXCPU when it runs out."""
    memory_bytes: int = 256 * 2**20
    """Address space per process (RLIMIT_AS); a bigger allocation raises MemoryError."""
    max_processes: int = 16
    """Processes and threads of the sandbox's uid (RLIMIT_NPROC); the interpreter itself counts."""
    file_size_bytes: int = 16 * 2**20
    """Largest file the code may write (RLIMIT_FSIZE)."""
    disk_bytes: int = 32 * 2**20
    """Size of the private tmpfs working folder (with a mount namespace)."""
    open_files: int = 64
    """Open file descriptors per process (RLIMIT_NOFILE)."""
    output_keep_bytes: int = 4096
    """Bytes of stdout (and, separately, of stderr) kept for the result: the first and last halves."""
    output_stop_bytes: int = 8 * 2**20
    """A run that prints more than this on one stream is stopped (outcome killed)."""
    max_code_bytes: int = 256 * 2**10
    """Longer code is not run (outcome error)."""
    max_concurrent: int = 2
    """Calls of this Sandbox that may run at once; more wait."""
    first_uid: int = 1_000_000
    """Each call runs as the lowest uid from here up that no other call on the machine holds: unused
    uids, so that RLIMIT_NPROC counts only that call."""
    gid: int = 65534
    """Group of the sandbox processes (nogroup)."""
    python: str | None = None
    """Interpreter for the code; None: the trainer's if the sandbox user can execute it, else a system python3."""
    namespaces: bool = True
    """Network, PID, mount, IPC and UTS namespaces (turn off only to debug, with allow_unisolated)."""
    allow_unisolated: bool = False
    """Run the code even without the namespaces (turned off, or refused by the kernel): then it can
    signal every process of its user (the trainer's, without root), read the host's files and reach
    its Unix sockets. Off: such a run raises `SandboxError` before any code runs."""
    switch_user: bool = True
    """Run as an unprivileged uid (needs root; otherwise the notes say the code runs as you)."""
    seccomp: bool = True
    """Load the seccomp filter (needs libseccomp)."""
    reserved_tags: tuple[str, ...] = ("tool_call", "tool_response", "think", "answer", "interpreter", "code")
    """Tags of the chat protocol whose `<tag>` and `</tag>` are escaped in the output (`<|...|>` always is)."""

    def validate(self) -> "SandboxConfig":
        """A clear error naming the field and the fix; returns self."""
        for name in ("cpu_time_s", "memory_bytes", "max_processes", "file_size_bytes", "disk_bytes",
                     "open_files", "output_keep_bytes", "output_stop_bytes", "max_code_bytes", "max_concurrent"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"SandboxConfig.{name}={value!r}: must be a positive integer")
        if not self.wall_timeout_s > 0:
            raise ValueError(f"SandboxConfig.wall_timeout_s={self.wall_timeout_s!r}: "
                             "must be a positive number of seconds")
        if self.memory_bytes < 32 * 2**20:
            raise ValueError(f"SandboxConfig.memory_bytes={self.memory_bytes}: Python needs at least 32 MiB "
                             f"({32 * 2**20}) to start; use 256 MiB or more")
        if self.output_stop_bytes < self.output_keep_bytes:
            raise ValueError(f"SandboxConfig.output_stop_bytes={self.output_stop_bytes} is below output_keep_bytes="
                             f"{self.output_keep_bytes}: raise output_stop_bytes")
        if self.first_uid < 1000 or self.first_uid + UID_LEASE_SPAN > 2**31 - 1:
            raise ValueError(f"SandboxConfig.first_uid={self.first_uid}: use an unused uid range above 1000, "
                             "e.g. the default 1000000")
        if self.python is not None and not os.access(self.python, os.X_OK):
            raise ValueError(f"SandboxConfig.python={self.python!r}: not an executable file; "
                             "give a python3 path or None to pick one")
        bad_tags = [t for t in self.reserved_tags if not re.fullmatch(r"[A-Za-z_][\w-]*", t)]
        if bad_tags:
            raise ValueError(f"SandboxConfig.reserved_tags: {bad_tags} are not tag names (letters, digits, _ and -)")
        return self


@dataclasses.dataclass
class SandboxResult:
    """What one call did: outcome, sanitised and truncated output, and what was (not) in force."""

    outcome: str
    """ok (exit 0), error (nonzero exit), timeout (wall clock), killed (signal or too much output)."""
    stdout: str
    stderr: str
    exit_code: int | None
    """The exit status; None when a signal ended it; -N for signal N (as in subprocess)."""
    latency_s: float
    truncated: bool
    """Part of stdout or stderr was left out (`<truncated: N bytes left out>` says how many, where)."""
    reason: str = ""
    """Why the outcome, in words (empty for ok)."""
    notes: list[str] = dataclasses.field(default_factory=list)
    """Layers that were not in force for this call, and what that allows."""


@dataclasses.dataclass
class SandboxCapabilities:
    """Which layers are in force here: True, or the reason one is missing."""

    layers: dict[str, bool | str]
    python: str
    running_as_root: bool

    @property
    def missing(self) -> dict[str, str]:
        return {name: why for name, why in self.layers.items() if why is not True}

    def describe(self) -> str:
        """One line per layer, for logs and `python -m arl.tools`."""
        trainer_user = "root" if self.running_as_root else f"uid {os.getuid()}"
        lines = [f"python: {self.python} (trainer running as {trainer_user})"]
        for name in LAYERS:
            state = self.layers.get(name, "not reported")
            lines.append(f"{name:8s} {'in force' if state is True else 'MISSING: ' + str(state)}")
        return "\n".join(lines)


def _world_executable(path: str) -> bool:
    """Whether any user may execute `path`: the file and every folder above it have the others' x bit."""
    real = Path(os.path.realpath(path))
    try:
        if not real.stat().st_mode & stat.S_IXOTH:
            return False
        return all(parent.stat().st_mode & stat.S_IXOTH for parent in real.parents)
    except OSError:
        return False


def resolve_python(config: SandboxConfig) -> str:
    """The interpreter for the code: the configured one, else one that the sandbox user can execute."""
    if config.python is not None:
        return config.python
    if not (config.switch_user and os.geteuid() == 0) or _world_executable(sys.executable):
        return os.path.realpath(sys.executable)
    for candidate in PYTHON_CANDIDATES:
        if os.path.exists(candidate) and _world_executable(candidate):
            return candidate
    raise SandboxError(f"no python3 that the sandbox user (uid {config.first_uid}) can execute: {sys.executable} "
                       f"sits in a folder closed to other users and none of {PYTHON_CANDIDATES} exists; install a "
                       "system python3 or set SandboxConfig.python to one")


class _Capture:
    """One output stream read while it runs: the first and last halves of a byte budget, and a total."""

    def __init__(self, keep_bytes: int):
        self.head_budget = keep_bytes // 2
        self.tail_budget = keep_bytes - self.head_budget
        self.head, self.tail = bytearray(), bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_budget - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data[-self.tail_budget:]
            del self.tail[:-self.tail_budget]

    @property
    def omitted(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self, sanitize: Callable[[str], str]) -> str:
        """The kept output, sanitised, with the truncation marker where bytes were left out."""
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if self.omitted:
            # Head and tail apart, the marker between: the sanitiser escapes the marker's `<` in the
            # code's own output, so this is the only marker the result can hold.
            return f"{sanitize(head)}\n<{TRUNCATION_TAG}: {self.omitted} bytes left out>\n{sanitize(tail)}"
        return sanitize(head + tail)


TRUNCATION_TAG = "truncated"
"""The truncation marker is `<truncated: N bytes left out>`; the sanitiser always escapes this tag."""

CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 control characters but newline and tab, and the bidirectional marks, embeddings, overrides
and isolates, which can make text display otherwise than it reads (a reviewer of a transcript, a log)."""


def make_sanitizer(reserved_tags: tuple[str, ...]):
    """A function that makes printed text harmless in a chat transcript.

    Escapes `<` as `&lt;` where it starts a special token (`<|im_end|>`, any `<|...|>`), a reserved
    tag (`<tool_response>`, `</tool_call>`, ...) or the truncation marker, so that tokenising the tool
    result never produces the protocol's tokens and the code cannot fake a truncation; and writes
    control characters (C0 and C1, but newline and tab) as `\\xNN` and bidirectional controls as `\\uNNNN`.
    """
    tags = "|".join(re.escape(t) for t in (*reserved_tags, TRUNCATION_TAG))
    token_start = re.compile(rf"<(?=\|[^<>|\s]{{0,64}}\|>)|<(?=/?(?:{tags})\b)")

    def escape(match: re.Match) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    def sanitize(text: str) -> str:
        return CONTROL_CHARACTERS.sub(escape, token_start.sub("&lt;", text))

    return sanitize


_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def _warn_once(layer: str, why: str) -> None:
    with _warned_lock:
        if (layer, why) in _warned:
            return
        _warned.add((layer, why))
    warnings.warn(f"arl sandbox: {layer} missing ({why}): {MISSING_LAYER_EFFECT[layer]}", RuntimeWarning,
                  stacklevel=2)


UID_LEASE_SPAN = 4096
"""How many uids from first_uid up a call may lease."""


@contextlib.contextmanager
def _uid_lease(first_uid: int, switch_user: bool):
    """The uid for one call, held (an exclusive flock on a root-only lock file) until the call ends;
    None when every uid of the range is held.

    Machine-wide, so that two Sandboxes, in one trainer or in two, never share a uid: a fork bomb in
    one would otherwise use up RLIMIT_NPROC of the other, and the uid sweep of one (without a PID
    namespace) would kill the other's code. Without a user switch there is nothing to lease."""
    if not (switch_user and os.geteuid() == 0):
        yield os.geteuid()
        return
    folder = Path("/run" if os.path.isdir("/run") else tempfile.gettempdir()) / "arl-sandbox-uids"
    folder.mkdir(mode=0o700, exist_ok=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o077:
        raise SandboxError(f"{folder} must be a folder of root's, closed to others; remove it and retry")
    for uid in range(first_uid, first_uid + UID_LEASE_SPAN):
        fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            if os.pread(fd, len(_LEASE_IN_USE), 0) == _LEASE_IN_USE:
                _sweep_uid(uid)  # its last holder was killed mid-call: nothing of that call may share the uid
            os.pwrite(fd, _LEASE_IN_USE, 0)
            try:
                yield uid
            except BaseException:
                _sweep_uid(uid)  # the call ended without its launcher's word that everything is gone
                raise
            finally:
                os.ftruncate(fd, 0)  # reached on both paths: the uid is clear (a killed trainer never gets here)
        finally:
            os.close(fd)  # releases the lock
        return
    yield None


_LEASE_IN_USE = b"in use"
"""Written into a uid's lock file for the length of a call; found there by the next holder, it means the
trainer of that call died mid-call (SIGKILL leaves no chance to clear it)."""


def _sweep_uid(uid: int) -> None:
    """SIGKILL every process of `uid` (the launcher's sweep, run as its own process: forking a threaded
    trainer to run Python is unsafe). A belt to the braces of PR_SET_PDEATHSIG and the PID namespace."""
    subprocess.run([sys.executable, "-I", "-S", str(LAUNCHER), "--sweep", str(uid)], stdin=subprocess.DEVNULL,
                   env={}, cwd="/", check=True, timeout=30)


def _paths_to_hide() -> list[str]:
    """The trainer's folders, which the code's view leaves out: its home and the usual ones, the working
    directory (the project), the repository `arl` runs from (unless installed in site-packages) and
    `arl.settings` home (models, checkpoints, run folders). Only where one lies inside a tree that the
    view keeps for the interpreter (a project under /usr/src) does the launcher need to mask it."""
    package = Path(__file__).resolve().parents[1]
    paths = {"/tmp", "/var/tmp", "/run", "/var/run", "/root", "/home", tempfile.gettempdir(),
             os.path.expanduser("~"), os.getcwd(), str(arl_settings.get().home)}
    if "site-packages" not in package.parts:
        repository = next((p for p in package.parents if (p / "pyproject.toml").exists() or (p / ".git").exists()),
                          package)
        paths.add(str(repository))
    return sorted({os.path.realpath(p) for p in paths})


def _remove_stale_workdirs() -> None:
    """Remove host working folders of trainers that were killed mid-call (named after their pid)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*-*"):
        pid = folder.name[len(WORKDIR_PREFIX):].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:  # alive, another user's
            pass


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the launcher's process group (its session); init and the code die with the launcher."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher is not reaped yet, so its pgid is still ours
    except ProcessLookupError:
        pass


_UNISOLATED_ERROR = (
    "the sandbox cannot isolate the code ({why}): without its own PID, mount and network namespaces the "
    "code could signal every process of its user, the trainer's included, read the host's files and reach "
    "its Unix sockets. {fix}, or set SandboxConfig.allow_unisolated=True to run it anyway")


class Sandbox:
    """Runs code in the cage described in this module's docstring; thread-safe, `max_concurrent` at a time."""

    def __init__(self, config: SandboxConfig | None = None):
        self.config = (config or SandboxConfig()).validate()
        if not (self.config.namespaces or self.config.allow_unisolated):
            raise SandboxError(_UNISOLATED_ERROR.format(why="SandboxConfig.namespaces=False",
                                                        fix="Set SandboxConfig.namespaces=True"))
        self.python = resolve_python(self.config)
        _remove_stale_workdirs()
        self._sanitize = make_sanitizer(self.config.reserved_tags)
        self._running = threading.BoundedSemaphore(self.config.max_concurrent)
        self._capabilities: SandboxCapabilities | None = None
        self._capabilities_lock = threading.Lock()

    def capabilities(self) -> SandboxCapabilities:
        """Which layers are in force here, found by running `print('ok')` once (cached)."""
        with self._capabilities_lock:
            if self._capabilities is None:
                result, layers = self._run("print('ok')")
                if result.outcome != "ok" or result.stdout.strip() != "ok":
                    raise SandboxError(f"the sandbox cannot run print('ok') with {self.python}: {result.outcome}, "
                                       f"{result.reason}; stderr: {result.stderr.strip()[-500:]}; "
                                       "set SandboxConfig.python to a python3 the sandbox user can run")
                self._capabilities = SandboxCapabilities(layers, self.python, os.geteuid() == 0)
            return self._capabilities

    def run(self, code: str) -> SandboxResult:
        """Run `code` as a fresh `python -I -S` process in the cage; blocks while `max_concurrent` others run."""
        return self._run(code)[0]

    def _run(self, code: str) -> tuple[SandboxResult, dict]:
        start = time.monotonic()
        source = code.encode("utf-8", errors="replace")
        if len(source) > self.config.max_code_bytes:
            reason = f"the code is {len(source)} bytes, over the limit of {self.config.max_code_bytes}; not run"
            return SandboxResult("error", "", "", None, time.monotonic() - start, False, reason), {}
        with self._running, _uid_lease(self.config.first_uid, self.config.switch_user) as uid:
            if uid is None:
                log.warning("all %d sandbox uids from %d are in use", UID_LEASE_SPAN, self.config.first_uid)
                reason = (f"the sandbox is busy: all {UID_LEASE_SPAN} of its uids are in use by other calls on "
                          "this machine; the code was not run, try again later")
                return SandboxResult("error", "", "", None, time.monotonic() - start, False, reason), {}
            result, layers = self._launch(source, uid, start)
        log.debug("sandbox outcome=%s latency=%.3fs reason=%s", result.outcome, result.latency_s, result.reason)
        return result, layers

    def _launch(self, source: bytes, uid: int, start: float) -> tuple[SandboxResult, dict]:
        cfg = self.config
        # Made by the launcher only without a mount namespace; removed below, or by a later Sandbox.
        host_workdir = os.path.join(tempfile.gettempdir(), f"{WORKDIR_PREFIX}{os.getpid()}-{secrets.token_hex(6)}")
        status_r, status_w = os.pipe()
        settings = {
            # The real binary: a venv's link may sit in the project folder, which the code's view leaves out.
            "code": source, "status_fd": status_w, "python": os.path.realpath(self.python), "uid": uid, "gid": cfg.gid,
            "env": CODE_ENV,
            "namespaces": cfg.namespaces, "allow_unisolated": cfg.allow_unisolated, "switch_user": cfg.switch_user,
            "seccomp": cfg.seccomp, "trainer_pid": os.getpid(), "hide": _paths_to_hide(),
            "wall_timeout_s": cfg.wall_timeout_s, "disk_bytes": cfg.disk_bytes, "host_workdir": host_workdir,
            "limits": {"cpu_s": cfg.cpu_time_s, "memory_bytes": cfg.memory_bytes, "processes": cfg.max_processes,
                       "file_bytes": cfg.file_size_bytes, "open_files": cfg.open_files},
        }
        try:
            proc = subprocess.Popen([self.python, "-I", "-S", str(LAUNCHER)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    pass_fds=(status_w,), start_new_session=True, env={}, cwd="/")
        except OSError as exc:
            os.close(status_r)
            raise SandboxError(f"cannot start the sandbox launcher with {self.python}: {exc}") from exc
        finally:
            os.close(status_w)
        try:
            try:
                proc.stdin.write(marshal.dumps(settings))
                proc.stdin.close()
            except BrokenPipeError:
                pass  # the launcher died at once: its stderr and missing status say why
            streams = {"stdout": _Capture(cfg.output_keep_bytes), "stderr": _Capture(cfg.output_keep_bytes)}
            status, stopped_by_trainer = self._collect(proc, streams, status_r)
        except BaseException:  # an interrupted trainer (Ctrl-C) leaves no sandbox running
            _kill_group(proc)
            raise
        finally:
            os.close(status_r)
            for pipe in (proc.stdout, proc.stderr):
                pipe.close()
            proc.wait()
            shutil.rmtree(host_workdir, ignore_errors=True)
        latency = time.monotonic() - start
        return self._result(status, stopped_by_trainer, streams, latency)

    def _collect(self, proc: subprocess.Popen, streams: dict[str, _Capture], status_r: int):
        """Read stdout, stderr and the status pipe until all close; stop the run if it floods or hangs."""
        cfg = self.config
        status = bytearray()
        stopped_by_trainer = ""
        deadline = time.monotonic() + cfg.wall_timeout_s + BACKSTOP_GRACE_S
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ, "stdout")
            selector.register(proc.stderr, selectors.EVENT_READ, "stderr")
            selector.register(status_r, selectors.EVENT_READ, "status")
            while selector.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    if stopped_by_trainer:
                        break  # something outside the trainer's reach holds a pipe; stop waiting for it
                    stopped_by_trainer = "timeout"
                    _kill_group(proc)
                    deadline = time.monotonic() + DRAIN_AFTER_KILL_S
                    continue
                for key, _ in selector.select(remaining):
                    fd = key.fileobj if isinstance(key.fileobj, int) else key.fileobj.fileno()
                    data = os.read(fd, 65536)
                    if not data:
                        selector.unregister(key.fileobj)
                        if key.data == "status":
                            # The launcher is done; without a PID namespace, sweep what stayed in its group.
                            _kill_group(proc)
                        continue
                    if key.data == "status":
                        status += data
                        continue
                    capture = streams[key.data]
                    capture.add(data)
                    if capture.total > cfg.output_stop_bytes and not stopped_by_trainer:
                        stopped_by_trainer = f"{key.data} passed {cfg.output_stop_bytes} bytes"
                        _kill_group(proc)
                        deadline = time.monotonic() + DRAIN_AFTER_KILL_S
        # Only the launcher writes here (the code never holds this pipe), so unmarshalling it is safe.
        reports, stream = {}, io.BytesIO(bytes(status))
        while stream.tell() < len(status):
            reports.update(marshal.load(stream))
        return reports, stopped_by_trainer

    def _result(self, status: dict, stopped_by_trainer: str, streams: dict[str, _Capture], latency: float):
        cfg = self.config
        if status.get("unisolated"):
            missing = "; ".join(f"{name}: {why}" for name, why in status["layers"].items() if why is not True)
            raise SandboxError(_UNISOLATED_ERROR.format(
                why=missing, fix="Run as root, or where the kernel allows unprivileged user namespaces "
                                 "(sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0)"))
        if "setup_error" in status:
            raise SandboxError(f"sandbox setup failed: {status['setup_error']} (python {self.python}; "
                               "set SandboxConfig.python to an interpreter the sandbox user can execute, "
                               "or see docs/sandbox.md for the layers)")
        stdout, stderr = (streams[name].text(self._sanitize) for name in ("stdout", "stderr"))
        truncated = any(capture.omitted for capture in streams.values())
        layers = status.get("layers", {})
        exit_code, signum = status.get("exit_code"), status.get("signal")
        if stopped_by_trainer == "timeout" or status.get("timed_out"):
            outcome, reason, exit_code = "timeout", f"the wall-clock limit of {cfg.wall_timeout_s:g} s", None
        elif stopped_by_trainer:
            outcome, reason, exit_code = "killed", f"too much output: {stopped_by_trainer}", None
        elif "exit_code" not in status:
            raise SandboxError(f"the sandbox launcher ended without a report; its stderr: {stderr.strip()[-1000:]}")
        elif signum is not None:
            try:
                name = signal.Signals(signum).name
            except ValueError:
                name = str(signum)
            reason = SIGNAL_REASONS.get(signum, "signal {name}").format(cpu=cfg.cpu_time_s, name=name)
            outcome, exit_code = "killed", -signum
        elif exit_code == 0:
            outcome, reason = "ok", ""
        else:
            outcome, reason = "error", f"exit code {exit_code}"
            if "MemoryError" in stderr:
                reason += f" (MemoryError: the memory limit is {cfg.memory_bytes // 2**20} MiB)"
        notes = []
        for layer, why in layers.items():
            if why is not True:
                notes.append(f"{layer} missing ({why}): {MISSING_LAYER_EFFECT[layer]}")
                _warn_once(layer, why)
        result = SandboxResult(outcome, stdout, stderr, exit_code, latency, truncated, reason, notes)
        return result, layers


def format_result(result: SandboxResult) -> str:
    """The text a model sees for one call: output or error, why it stopped, and missing layers."""
    parts = []
    if result.outcome == "ok":
        parts.append(result.stdout if result.stdout else "(no output)")
        if result.stderr:
            parts.append(f"stderr:\n{result.stderr}")
    else:
        headline = {"error": "Error", "timeout": "Timeout", "killed": "Killed"}[result.outcome]
        if result.outcome == "timeout":
            parts.append(f"{headline}: stopped at {result.reason}; it and every process it started were killed.")
        else:
            parts.append(f"{headline}: {result.reason}.")
        if result.stdout:
            parts.append(f"stdout:\n{result.stdout}")
        if result.stderr:
            parts.append(f"stderr:\n{result.stderr}")
    parts.extend(f"[sandbox: {note}]" for note in result.notes)
    return "\n".join(part.rstrip("\n") for part in parts)


def sandbox_metrics(results: list[SandboxResult]) -> dict[str, float]:
    """Namespaced metrics of a batch of calls: count per outcome, latency mean and max."""
    metrics: dict[str, float] = {"sandbox/calls": float(len(results))}
    for outcome in OUTCOMES:
        metrics[f"sandbox/{outcome}"] = float(sum(r.outcome == outcome for r in results))
    latencies = [r.latency_s for r in results]
    metrics["sandbox/latency_mean_s"] = sum(latencies) / len(latencies) if latencies else 0.0
    metrics["sandbox/latency_max_s"] = max(latencies, default=0.0)
    return metrics


_default_sandbox: Sandbox | None = None
_default_lock = threading.Lock()


def default_sandbox() -> Sandbox:
    """The process-wide sandbox with the default config, built on first use."""
    global _default_sandbox
    with _default_lock:
        if _default_sandbox is None:
            _default_sandbox = Sandbox()
        return _default_sandbox


def make_code_interpreter(sandbox: Sandbox | None = None,
                          on_result: Callable[[SandboxResult], None] | None = None) -> Callable[[str], str]:
    """The `code_interpreter` tool over a given sandbox (a chapter's own limits), or over the default one.

    The function's name, signature (with real `str` types, not strings) and docstring are what a tool
    registry turns into the schema the model sees. `on_result` receives every call's `SandboxResult`
    (for a trainer's `sandbox_metrics`: outcomes and latency); the model sees only the text."""

    def code_interpreter(code: str) -> str:
        """Run Python code in a fresh sandboxed interpreter and return what it printed.

        Only the standard library is available; there is no network and no file outside the working
        folder, and each call starts from scratch (no variables or files carry over). Print the values
        you need: the result text is the printed output, or the error and its traceback.

        Args:
            code: a complete Python program.
        """
        result = (sandbox or default_sandbox()).run(code)
        if on_result is not None:
            on_result(result)
        return format_result(result)

    code_interpreter.__annotations__ = {"code": str, "return": str}
    return code_interpreter


code_interpreter = make_code_interpreter()
