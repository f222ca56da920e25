"""The sandbox launcher: a standalone script that puts one piece of code in its cage, runs it, and reports.

`arl.tools.sandbox` starts it as `PYTHON -I -S _launcher.py` in a new session with an empty
environment; the settings and the code arrive on stdin as one marshalled dict, and the launcher writes
marshalled dicts to the status file descriptor named in the settings. It imports nothing from `arl`,
and of the standard library only modules without `enum` or `re` (`json` and `signal` would add 40 ms
to every call on a busy 2-core machine), because it runs for every call under the sandbox's
interpreter, not the trainer's.

Why a separate process rather than `subprocess.Popen(preexec_fn=...)`: a trainer has many threads
(PyTorch, tokenizers), and running Python between fork and exec in a threaded process can deadlock;
this script starts single-threaded.

What it does, in order (each layer that the kernel refuses is reported, never skipped silently):
1. `unshare` the network, PID, mount, IPC and UTS namespaces (as root), or a user namespace plus
   those (as any other user, where the kernel allows unprivileged user namespaces).
2. Die with the trainer's thread that started it (PR_SET_PDEATHSIG), so that a trainer killed
   mid-call takes the whole call with it. If a namespace is missing and the settings do not allow
   that (`SandboxConfig.allow_unisolated`), report it and run nothing.
3. fork `init`: PID 1 of the new PID namespace, so when it ends the kernel kills everything the code
   started (a fork bomb's children included). It builds the code's own root: a read-only tmpfs with
   the system's /usr (and /bin, /lib, ...), the interpreter's files and /etc/ld.so.cache bound in
   read-only, a minimal /dev, an empty /sys, a fresh /proc (only the sandbox's processes) and an
   empty size-limited tmpfs as /tmp (the working folder), then `pivot_root`s into it and detaches
   the host's tree. It writes main.py there and forks the code's process.
4. The code's process: resource limits, the unprivileged user, a seccomp filter, death with its
   parent (PR_SET_PDEATHSIG, as init has with the launcher); then exec of `PYTHON -I -S -u main.py`.
   init reports its exit status.
5. The launcher: a wall-clock timer that SIGKILLs init (and so the namespace), then reports whether
   it fired. Without a PID namespace it kills what is left of the call's uid instead.
"""

from __future__ import annotations

import _signal
import ctypes
import errno
import marshal
import os
import resource
import select
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACE_FLAGS = {"netns": CLONE_NEWNET, "pidns": CLONE_NEWPID, "mountns": CLONE_NEWNS,
                   "ipcns": CLONE_NEWIPC, "utsns": CLONE_NEWUTS}

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 32, 4096
MS_REC, MS_PRIVATE = 0x4000, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
AF_UNIX = 1
PIVOT_ROOT_SYSCALL = {"x86_64": 155, "aarch64": 41, "riscv64": 41}
"""glibc has no wrapper for pivot_root."""

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_NE, SCMP_CMP_MASKED_EQ = 1, 7
DENIED_SYSCALLS = (
    # other processes' memory, kernel state and namespaces: nothing model-written code needs
    "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root", "chroot",
    "unshare", "setns", "kexec_load", "kexec_file_load", "bpf", "perf_event_open", "userfaultfd",
    "keyctl", "add_key", "request_key", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "open_by_handle_at", "name_to_handle_at", "io_uring_setup",
    "io_uring_enter", "io_uring_register",
)
"""System calls the seccomp filter answers with EPERM."""

SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""The system's programs and libraries, bound read-only into the code's root (the ones that are
symbolic links, as on merged-/usr systems, are recreated as links)."""

SYSTEM_FILES = ("/etc/ld.so.cache",)
"""Of /etc, only what the dynamic loader needs to find the interpreter's libraries."""

DEVICES = ("null", "zero", "full", "random", "urandom")
"""Host device nodes bound into the code's /dev; nothing else of the host's /dev is there."""

DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
             "stderr": "/proc/self/fd/2"}

ROOT_BYTES, MASK_BYTES, DEV_BYTES, SHM_BYTES = 2**20, 4096, 64 * 2**10, 4 * 2**20
"""Sizes of the tmpfs mounts: the new root (only mount points), a hidden folder, /dev, the private /dev/shm."""

libc = ctypes.CDLL(None, use_errno=True)


def _oserror(what: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, os.strerror(err), what)


def _unshare(flags: int) -> None:
    if libc.unshare(ctypes.c_int(flags)) != 0:
        raise _oserror("unshare")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def c_string(text):
        return None if text is None else text.encode()

    if libc.mount(c_string(source), c_string(target), c_string(fstype), ctypes.c_ulong(flags), c_string(data)) != 0:
        raise _oserror(f"mount {target}")


def enter_namespaces(want: bool, layers: dict) -> None:
    """Unshare what the kernel allows; record each namespace as True or the reason it is missing."""
    if not want:
        for name in NAMESPACE_FLAGS:
            layers[name] = "turned off (SandboxConfig.namespaces=False)"
        return
    all_flags = sum(NAMESPACE_FLAGS.values())
    uid, gid = os.getuid(), os.getgid()
    try:
        if uid == 0:
            _unshare(all_flags)
        else:
            # An unprivileged user can have namespaces only inside a user namespace of its own, where
            # it keeps its uid; its capabilities there (for the mounts) end at exec.
            _unshare(CLONE_NEWUSER | all_flags)
            with open("/proc/self/setgroups", "w") as f:
                f.write("deny")
            with open("/proc/self/uid_map", "w") as f:
                f.write(f"{uid} {uid} 1")
            with open("/proc/self/gid_map", "w") as f:
                f.write(f"{gid} {gid} 1")
        layers.update({name: True for name in NAMESPACE_FLAGS})
        return
    except OSError as exc:
        combined_error = exc.strerror
    if uid != 0:
        for name in NAMESPACE_FLAGS:
            layers[name] = f"not permitted for uid {uid} without a user namespace ({combined_error})"
        return
    for name, flag in NAMESPACE_FLAGS.items():
        try:
            _unshare(flag)
            layers[name] = True
        except OSError as exc:
            layers[name] = f"unshare refused ({exc.strerror})"


def _inside(path: str, folder: str) -> bool:
    """Whether `path` lies strictly below `folder` (both real, absolute paths)."""
    return path != folder and path.startswith(folder.rstrip("/") + "/")


def view_plan(hidden: list[str]) -> list[tuple[str, str]]:
    """The code's file system as mounts in the order to make them: ("bind", path) puts the host's path
    read-only at the same place, ("mask", path) an empty read-only tmpfs over a folder.

    Kept: the system trees and files, and this interpreter (its real binary, prefixes and standard
    library: a venv's python may sit in a project folder that is hidden). Nothing else of the host is
    there at all, so a folder to hide needs a mask only where it lies inside a kept tree (a project
    under /usr/src); a kept path inside a mask is bound again over it (deeper mounts come later)."""
    interpreter = {os.path.realpath(p) for p in (sys.executable, sys.base_prefix, sys.base_exec_prefix,
                                                 os.path.dirname(os.__file__))}
    kept = interpreter | {p for p in SYSTEM_TREES + SYSTEM_FILES if os.path.exists(p) and not os.path.islink(p)}
    masks = {h for h in hidden if os.path.isdir(h) and any(_inside(h, k) for k in kept)}
    binds = {k for k in kept
             if not any(_inside(k, other) for other in kept) or any(k == m or _inside(k, m) for m in masks)}
    steps = [("mask", m) for m in masks] + [("bind", b) for b in binds]
    return sorted(steps, key=lambda step: (step[1].count("/"), step[0] == "bind"))


def _remount_read_only(target: str, flags: int) -> None:
    # Keep the flags the mount has: in a user namespace the host's nosuid, nodev, noexec are locked.
    kept = os.statvfs(target).f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _mount("none", target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags | kept)


def private_mounts(settings: dict, layers: dict, uid: int, gid: int) -> str:
    """Build the code's own root and pivot into it; returns the working folder (/tmp).

    A read-only tmpfs holding: the host's system trees and the interpreter (`view_plan`), read-only; a
    /dev of a few device nodes and a private /dev/shm; a fresh /proc (with the PID namespace, only the
    sandbox's processes); an empty /sys; /tmp an empty tmpfs of disk_bytes owned by the call's uid.
    No /run, /home, /root, project or run folder, no host Unix socket: none of it is in the tree."""
    plan = view_plan(settings["hide"])
    # Everything read from the host's tree comes first: the new root goes over /tmp, which may hold a bound path.
    sources = {path: (os.open(path, os.O_PATH | os.O_CLOEXEC), os.path.isdir(path))
               for kind, path in plan if kind == "bind"}
    # The folders above a bound path keep their host modes, so the new root opens no folder that the
    # host keeps closed (a python under root's 0700 home stays out of the sandbox user's reach).
    modes = {}
    for path in sources:
        parent = os.path.dirname(path)
        while parent != "/" and parent not in modes:
            modes[parent] = os.stat(parent).st_mode & 0o7777
            parent = os.path.dirname(parent)
    links = {path: os.readlink(path) for path in SYSTEM_TREES if os.path.islink(path)}

    # Without this, mounts below would propagate to the host's mount table.
    _mount("none", "/", None, MS_REC | MS_PRIVATE)
    root = "/tmp"  # covered in this namespace only
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, f"size={ROOT_BYTES},mode=0755")
    read_only = [(root, MS_NOSUID | MS_NODEV)]
    for kind, path in plan:
        target = root + path
        if kind == "mask":
            _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, f"size={MASK_BYTES},mode=0755")
            read_only.append((target, MS_NOSUID | MS_NODEV | MS_NOEXEC))
            continue
        parents = []
        parent = os.path.dirname(path)
        while not os.path.exists(root + parent):
            parents.append(parent)
            parent = os.path.dirname(parent)
        for parent in reversed(parents):
            os.mkdir(root + parent)
            os.chmod(root + parent, modes[parent])
        fd, is_dir = sources[path]
        if is_dir:
            os.mkdir(target)
        else:
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
        _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
        _remount_read_only(target, MS_NOSUID | MS_NODEV)
    for fd, _ in sources.values():
        os.close(fd)  # an open host folder would be a way out of the new root
    for path, link in links.items():
        os.symlink(link, root + path)

    dev = root + "/dev"
    os.mkdir(dev)
    _mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, f"size={DEV_BYTES},mode=0755")
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            os.close(os.open(f"{dev}/{name}", os.O_CREAT | os.O_WRONLY, 0o666))
            _mount(f"/dev/{name}", f"{dev}/{name}", None, MS_BIND)  # its own mount: the tmpfs's nodev does not apply
    for name, target in DEV_LINKS.items():
        os.symlink(target, f"{dev}/{name}")
    os.mkdir(f"{dev}/shm")  # multiprocessing's semaphores live here: private and small
    _mount("tmpfs", f"{dev}/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
           f"size={SHM_BYTES},mode=0700,uid={uid},gid={gid}")
    read_only.append((dev, MS_NOSUID | MS_NODEV | MS_NOEXEC))
    layers["dev"] = True

    for name in ("proc", "sys", "tmp"):
        os.mkdir(f"{root}/{name}")
    _mount("proc", f"{root}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    layers["proc"] = True if layers["pidns"] is True else "no PID namespace: /proc shows the host's processes"
    _mount("tmpfs", f"{root}/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
           f"size={settings['disk_bytes']},mode=0700,uid={uid},gid={gid}")
    for target, flags in read_only:
        _remount_read_only(target, flags)

    machine = os.uname().machine
    if machine not in PIVOT_ROOT_SYSCALL:
        raise OSError(f"no pivot_root system call number known for {machine}")
    os.chdir(root)
    if libc.syscall(ctypes.c_long(PIVOT_ROOT_SYSCALL[machine]), b".", b".") != 0:
        raise _oserror("pivot_root")
    # The host's root now lies over the new one at "/": detached, nothing of it is left in this namespace.
    if libc.umount2(b".", MNT_DETACH) != 0:
        raise _oserror("umount2")
    os.chdir("/")
    layers["hostfs"] = True
    return "/tmp"


def set_limits(limits: dict) -> None:
    """rlimits: CPU seconds, address space, processes of this uid, file size, open files, no core dumps."""
    for name, value in (("RLIMIT_CPU", limits["cpu_s"]), ("RLIMIT_AS", limits["memory_bytes"]),
                        ("RLIMIT_NPROC", limits["processes"]), ("RLIMIT_FSIZE", limits["file_bytes"]),
                        ("RLIMIT_NOFILE", limits["open_files"]), ("RLIMIT_CORE", 0)):
        # CPU: the hard limit a second later, so the soft one gets to send SIGXCPU (a clear reason) first.
        resource.setrlimit(getattr(resource, name), (value, value + 1 if name == "RLIMIT_CPU" else value))


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


def load_seccomp() -> None:
    """Install the filter through libseccomp: EPERM for DENIED_SYSCALLS, for sockets other than AF_UNIX
    and for clone with namespace flags; ENOSYS for clone3 (its flags are out of a filter's reach, and
    glibc then falls back to clone). libseccomp sets no_new_privs and kills other-architecture calls."""
    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)  # by soname: ctypes.util costs 40 ms and a subprocess
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")
    eperm, enosys = 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS

    def rule(action: int, syscall: str, *conditions: tuple[int, int, int, int]) -> None:
        number = lib.seccomp_syscall_resolve_name(syscall.encode())
        if number < 0:  # not a system call on this architecture
            return
        args = (_ArgCmp * max(1, len(conditions)))(*[_ArgCmp(*c) for c in conditions])
        rc = lib.seccomp_rule_add_array(ctypes.c_void_p(ctx), action, number, len(conditions), args)
        if rc < 0:
            raise OSError(-rc, f"seccomp rule for {syscall}: {os.strerror(-rc)}")

    for syscall in DENIED_SYSCALLS:
        rule(eperm, syscall)
    rule(enosys, "clone3")
    rule(eperm, "socket", (0, SCMP_CMP_NE, AF_UNIX, 0))
    for flag in (CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET):
        rule(eperm, "clone", (0, SCMP_CMP_MASKED_EQ, flag, flag))
    rc = lib.seccomp_load(ctypes.c_void_p(ctx))
    if rc < 0:
        raise OSError(-rc, f"seccomp_load: {os.strerror(-rc)}")


def _report(status_fd: int, **record) -> None:
    os.write(status_fd, marshal.dumps(record))  # one small write: never interleaved with another process's


def _die_with_parent(parent_alive_fd: int) -> None:
    """SIGKILL this process when its parent ends; end now if the parent already has (its pipe end closed).

    Call it after any uid change, which clears the setting."""
    if libc.prctl(PR_SET_PDEATHSIG, _signal.SIGKILL, 0, 0, 0) != 0:
        raise _oserror("prctl(PR_SET_PDEATHSIG)")
    if select.select([parent_alive_fd], [], [], 0)[0]:
        os._exit(1)


def init(settings: dict, layers: dict, status_fd: int, launcher_alive_fd: int) -> None:
    """The launcher's child, PID 1 of the new PID namespace (when there is one), as root; never returns.

    Prepares the working folder, starts the code as its own child and reports the code's exit status.
    The code is not PID 1 itself because the kernel ignores signals that PID 1 has no handler for,
    SIGXCPU of the CPU limit included. When init ends, the kernel kills everything left in the namespace.
    """
    try:
        _die_with_parent(launcher_alive_fd)
        if os.getuid() == 0 and settings["switch_user"]:
            uid, gid = settings["uid"], settings["gid"]
        else:
            uid, gid = os.getuid(), os.getgid()
        if layers["mountns"] is True:
            workdir = private_mounts(settings, layers, uid, gid)
        else:
            layers["proc"] = "the host's /proc (no mount namespace): other processes are visible"
            layers["hostfs"] = layers["dev"] = "no mount namespace"
            workdir = settings["host_workdir"]
            os.mkdir(workdir, 0o700)
            os.chown(workdir, uid, gid)
        script = os.path.join(workdir, "main.py")
        with open(script, "wb") as f:
            f.write(settings["code"])
        os.chown(script, uid, gid)
        init_alive_r, init_alive_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(init_alive_w)
            run_code(settings, layers, workdir, uid, gid, status_fd, init_alive_r)
        os.close(init_alive_r)
        _, status = os.waitpid(pid, 0)
        _report(status_fd, exit_code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None)
        os._exit(0)
    except BaseException as exc:  # report the failed setup instead of running the code half-caged
        _report(status_fd, setup_error=f"{type(exc).__name__}: {exc}")
        os._exit(127)


def run_code(settings: dict, layers: dict, workdir: str, uid: int, gid: int, status_fd: int,
             init_alive_fd: int) -> None:
    """The code's process: limits, unprivileged user, seccomp, then exec of the interpreter; never returns."""
    try:
        os.chdir(workdir)
        set_limits(settings["limits"])
        layers["rlimits"] = True
        if not settings["switch_user"]:
            layers["user"] = "turned off (SandboxConfig.switch_user=False): runs as the trainer's user"
        elif os.getuid() != 0:
            layers["user"] = f"not root, so no user switch: runs as the trainer's uid {os.getuid()}"
        else:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            layers["user"] = True
        if settings["seccomp"]:
            try:
                load_seccomp()
                layers["seccomp"] = True
            except OSError as exc:
                layers["seccomp"] = f"unavailable ({exc})"
        else:
            layers["seccomp"] = "turned off (SandboxConfig.seccomp=False)"
        _die_with_parent(init_alive_fd)
        _report(status_fd, layers=layers)
        python = settings["python"]
        os.execve(python, [python, "-I", "-S", "-u", "main.py"], dict(settings["env"], HOME=workdir, TMPDIR=workdir))
    except BaseException as exc:
        _report(status_fd, setup_error=f"{type(exc).__name__}: {exc}")
        os._exit(127)


def reap_orphans(block: bool) -> None:
    """Reap the code's orphans (the launcher is their subreaper): the host's init may take seconds,
    and until then each zombie still counts against RLIMIT_NPROC of the call's uid. `block` only after
    a sweep, when every one of them has been sent SIGKILL."""
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def sweep_uid(uid: int) -> None:
    """Kill every process left with the call's uid (a child in a new session, a fork bomb's rest): after
    each call without a PID namespace, and for the trainer (`--sweep UID`) after a call that ended without
    a report. kill(-1) from that uid reaches exactly the processes it owns; the trainer leases the uid
    to one call at a time."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setuid(uid)
            os.kill(-1, _signal.SIGKILL)
        except OSError:  # ESRCH: nothing was left
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def main() -> None:
    if sys.argv[1:2] == ["--sweep"]:  # the trainer's cleanup after a call that ended without a report
        sweep_uid(int(sys.argv[2]))
        return
    settings = marshal.loads(sys.stdin.buffer.read())
    status_fd = settings["status_fd"]
    os.set_inheritable(status_fd, False)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)

    # Orphans of the code come to the launcher rather than to the host's init (matters without a PID namespace).
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise _oserror("prctl(PR_SET_CHILD_SUBREAPER)")
    layers: dict = {}
    enter_namespaces(settings["namespaces"], layers)
    # A trainer killed mid-call takes the call with it: SIGKILL when the trainer's thread that started
    # this process ends (set after unshare, which may reset it); init and the code follow by the same chain.
    if libc.prctl(PR_SET_PDEATHSIG, _signal.SIGKILL, 0, 0, 0) != 0:
        raise _oserror("prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != settings["trainer_pid"]:
        return  # the trainer ended before that took effect
    if not settings["allow_unisolated"] and any(layers[name] is not True for name in NAMESPACE_FLAGS):
        _report(status_fd, layers=layers, unisolated=True)  # before any code runs
        return
    alive_r, alive_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(alive_w)
        init(settings, layers, status_fd, alive_r)
    os.close(alive_r)

    timed_out = False

    def on_timeout(signum, frame):
        nonlocal timed_out
        timed_out = True
        try:
            os.kill(pid, _signal.SIGKILL)
        except ProcessLookupError:  # it ended as the timer fired
            timed_out = False

    _signal.signal(_signal.SIGALRM, on_timeout)
    _signal.setitimer(_signal.ITIMER_REAL, settings["wall_timeout_s"])
    _, status = os.waitpid(pid, 0)
    _signal.setitimer(_signal.ITIMER_REAL, 0)
    if layers["pidns"] is not True and os.getuid() == 0 and settings["switch_user"]:
        sweep_uid(settings["uid"])
        reap_orphans(block=True)
    else:
        reap_orphans(block=False)
    _report(status_fd, timed_out=timed_out and os.WIFSIGNALED(status) and os.WTERMSIG(status) == _signal.SIGKILL)


if __name__ == "__main__":
    main()
