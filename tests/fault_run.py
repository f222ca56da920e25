"""`python tests/fault_run.py KIND:N:MODE arl-args...`: the `arl` command, killed (SIGKILL, as a power cut
or the OOM killer would) at the N-th write of one kind in this process.

KIND names what is being written:
    weights    a checkpoint's model.safetensors          optimizer  a checkpoint's optimizer.pt
    meta       a checkpoint's arl_checkpoint.json        latest     checkpoints/latest.json
    metrics    a line of metrics.jsonl                   rollouts   lines of rollouts.jsonl
    eval       a file under eval/                        report     report.html
    any        every write above, and every other atomic write of the run folder
MODE is `before` (killed just before the write starts), `torn` (half of the bytes written where the
write puts them, a temporary file for the atomic writes, the file itself for appends; then killed), or
`after-MS` (the write goes through, and a timer kills the process MS milliseconds later, wherever it is
then: in the middle of sampling, training or another write; the timer's thread keeps the process from
exiting first, so the kill always lands). `none` as the first argument runs the command without a fault.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def install(kind: str, n: int, mode: str) -> None:
    from arl import atomic, checkpoints
    from arl.track import _io

    seen = {"count": 0}
    later_ms = int(mode.removeprefix("after-")) if mode.startswith("after-") else None

    def due(this: str) -> bool:
        """True when this write is the one to fault (a `later` fault arms its timer here instead)."""
        if kind not in (this, "any"):
            return False
        seen["count"] += 1
        if seen["count"] != n:
            return False
        if later_ms is None:
            return True
        threading.Timer(later_ms / 1000, _die).start()
        return False

    def tear_atomic(path: Path, data: bytes) -> None:
        tmp = atomic.partial_path(path)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data[: len(data) // 2])
        _die()

    def kind_of(path: Path) -> str:
        if path.name == "report.html":
            return "report"
        if path.parent.name == "eval":
            return "eval"
        return "file"

    atomic_write_bytes = _io.atomic_write_bytes

    def patched_atomic(path, data):
        if due(kind_of(Path(path))):
            tear_atomic(Path(path), data) if mode == "torn" else _die()
        return atomic_write_bytes(path, data)

    append_lines = _io.append_lines

    def patched_append(path, objs):
        name = {"metrics.jsonl": "metrics", "rollouts.jsonl": "rollouts"}.get(Path(path).name, "file")
        if objs and due(name):
            if mode == "torn":
                data = "".join(_io.dumps(o) + "\n" for o in objs).encode()
                with open(path, "ab") as f:
                    f.write(data[: max(1, len(data) // 2)])
            _die()
        return append_lines(path, objs)

    write_json = checkpoints.write_json

    def patched_json(path, obj):
        name = {"latest.json": "latest", checkpoints.META_FILE: "meta"}.get(Path(path).name, "file")
        if due(name):
            tear_atomic(Path(path), b'{"step": 1, "pa') if mode == "torn" else _die()
        return write_json(path, obj)

    import safetensors.torch
    import torch

    save_model = safetensors.torch.save_model

    def torn_file(write, path) -> None:
        """Write the whole file, cut it to half its bytes, die (a weights file being written when killed)."""
        write()
        os.truncate(path, os.path.getsize(path) // 2)
        _die()

    def patched_save_model(model, filename, *a, **k):
        if due("weights"):
            torn_file(lambda: save_model(model, filename, *a, **k), filename) if mode == "torn" else _die()
        return save_model(model, filename, *a, **k)

    torch_save = torch.save

    def patched_torch_save(obj, f, *a, **k):
        if isinstance(f, (str, Path)) and Path(f).name == "optimizer.pt" and due("optimizer"):
            torn_file(lambda: torch_save(obj, f, *a, **k), f) if mode == "torn" else _die()
        return torch_save(obj, f, *a, **k)

    _io.atomic_write_bytes = patched_atomic
    _io.append_lines = patched_append
    checkpoints.write_json = patched_json
    safetensors.torch.save_model = patched_save_model
    torch.save = patched_torch_save


def main(argv: list[str]) -> int:
    fault, args = argv[0], argv[1:]
    if fault != "none":
        kind, n, mode = fault.split(":")
        install(kind, int(n), mode)
    from arl.cli import main as arl_main

    return arl_main(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
