"""`python tests/fault_run.py KIND:N:MODE arl-args...`: the `arl` command, killed (SIGKILL, as a power cut
or the OOM killer would) at the N-th write of one kind in this process.

KIND names what is being written:
    weights    a checkpoint's model.safetensors          optimizer  a checkpoint's optimizer.pt
    meta       a checkpoint's arl_checkpoint.json        latest     checkpoints/latest.json
    metrics    a line of metrics.jsonl                   rollouts   lines of rollouts.jsonl
    eval       a file under eval/                        report     report.html
MODE is `before` (killed just before the write starts) or `torn` (half of the bytes written where the
write puts them, a temporary file for the atomic writes, the file itself for appends; then killed).
`none` as the first argument runs the command without a fault.
"""

from __future__ import annotations

import os
import signal
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def install(kind: str, n: int, mode: str) -> None:
    from arl import checkpoints
    from arl.track import _io

    seen = {"count": 0}

    def due(this: str) -> bool:
        if this != kind:
            return False
        seen["count"] += 1
        return seen["count"] == n

    def tear_atomic(path: Path, data: bytes) -> None:
        tmp = path.parent / f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data[: len(data) // 2])
        _die()

    def kind_of(path: Path) -> str | None:
        if path.name == "report.html":
            return "report"
        if path.parent.name == "eval":
            return "eval"
        return None

    atomic_write_bytes = _io.atomic_write_bytes

    def patched_atomic(path, data):
        if due(kind_of(Path(path))):
            tear_atomic(Path(path), data) if mode == "torn" else _die()
        return atomic_write_bytes(path, data)

    append_lines = _io.append_lines

    def patched_append(path, objs):
        name = {"metrics.jsonl": "metrics", "rollouts.jsonl": "rollouts"}.get(Path(path).name)
        if objs and due(name):
            if mode == "torn":
                data = "".join(_io.dumps(o) + "\n" for o in objs).encode()
                with open(path, "ab") as f:
                    f.write(data[: max(1, len(data) // 2)])
            _die()
        return append_lines(path, objs)

    write_json = checkpoints.write_json

    def patched_json(path, obj):
        name = {"latest.json": "latest", checkpoints.META_FILE: "meta"}.get(Path(path).name)
        if due(name):
            tear_atomic(Path(path), b'{"step": 1, "pa') if mode == "torn" else _die()
        return write_json(path, obj)

    import safetensors.torch
    import torch

    save_model = safetensors.torch.save_model

    def patched_save_model(model, filename, *a, **k):
        if due("weights"):
            if mode == "torn":
                save_model(model, filename, *a, **k)
                with open(filename, "r+b") as f:
                    f.truncate(os.path.getsize(filename) // 2)
            _die()
        return save_model(model, filename, *a, **k)

    torch_save = torch.save

    def patched_torch_save(obj, f, *a, **k):
        if isinstance(f, (str, Path)) and Path(f).name == "optimizer.pt" and due("optimizer"):
            if mode == "torn":
                torch_save(obj, f, *a, **k)
                with open(f, "r+b") as fh:
                    fh.truncate(os.path.getsize(f) // 2)
            _die()
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
