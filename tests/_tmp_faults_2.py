"""Fault injection: a run killed at each kind of write (and at random moments), or left with a damaged
checkpoint, resumes to exactly what the uninterrupted run logs, or stops with a clear error having lost
nothing. Chapters: GRPO, and ReTool (an agent chapter: multi-turn episodes with a sandboxed tool).

The configurations really train: every step of these small GRPO and ReTool runs has groups with signal,
so `optim/step` counts every step (the plain smoke presets leave some steps without an update, and a
resume test on them would prove little). Runs are float64 and single-threaded (`tests/smoke.py`), so
"exactly" is exact. `tests/fault_run.py` kills the command at the chosen write.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import smoke
from arl.track import RunDir

FAULT_RUN = Path(__file__).with_name("fault_run.py")
SETTINGS = {
    "grpo": ["steps=3", "batch_prompts=4", "save_every=1", "eval_every=2"],
    "retool": ["steps=3", "save_every=1", "eval_every=2"],
}
CHAINS = {
    # each fault kills one process; the next process resumes the run and meets the next fault
    "grpo": ["metrics:2:torn", "weights:1:torn", "optimizer:2:before", "latest:1:torn", "DAMAGE",
             "rollouts:1:torn", "eval:1:torn", "meta:1:before", "report:1:before"],
    "retool": ["rollouts:1:before", "optimizer:1:torn", "metrics:4:torn", "DAMAGE", "weights:1:before",
               "eval:2:before", "report:1:torn"],
}
"""DAMAGE: before the next resume, flip bytes in the newest checkpoint's weights (the resume must pass
over it to the one before)."""


def arl(fault: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(FAULT_RUN), fault, *args], capture_output=True, text=True,
                          env=env or smoke.env(), timeout=600)


def start(chapter: str, out: Path, name: str, fault: str = "none") -> subprocess.CompletedProcess:
    return arl(fault, "run", chapter, "--preset", "smoke", "--out", str(out), "--name", name, *SETTINGS[chapter])


def resume(chapter: str, folder: Path, fault: str = "none") -> subprocess.CompletedProcess:
    return arl(fault, "run", chapter, "--resume", str(folder))


def damage_newest_checkpoint(folder: Path) -> str:
    states = sorted((folder / "checkpoints" / "training_state").glob("step-*"))
    assert states, "no checkpoint to damage"
    weights = states[-1] / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-64:] = bytes(b ^ 0xFF for b in data[-64:])
    weights.write_bytes(bytes(data))
    return states[-1].name


def outcome(folder: Path) -> dict:
    """What a run leaves that must not depend on how often it was killed: every logged row (wall times and
    memory aside), the evaluations, the summary."""
    run = RunDir.open(folder)
    evals = {}
    for name in run.eval_names():
        e = run.read_eval(name)
        if name == "summary":
            e = {k: v for k, v in e.items() if k != "peak_rss_mb"}
        evals[name] = e
    return {"metrics": smoke.comparable(run.read_metrics()), "rollouts": smoke.comparable(run.read_rollouts()),
            "evals": evals}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """reference(chapter) -> the outcome of the uninterrupted run (made once per chapter)."""
    out, done = tmp_path_factory.mktemp("reference"), {}

    def get(chapter):
        if chapter not in done:
            res = start(chapter, out, "ref")
            assert res.returncode == 0, res.stderr[-3000:]
            done[chapter] = outcome(out / chapter / "ref")
            assert all(r.get("optim/step") == r["step"] for r in done[chapter]["metrics"][1:]), \
                "the configuration must update at every step"
        return done[chapter]
    return get


@pytest.mark.parametrize("chapter", sorted(CHAINS))
def test_killed_at_every_kind_of_write_resumes_to_the_uninterrupted_result(chapter, tmp_path, reference):
    folder = tmp_path / chapter / "cut"
    chain = list(CHAINS[chapter])
    res = start(chapter, tmp_path, "cut", chain.pop(0))
    assert res.returncode == -signal.SIGKILL, res.stderr[-2000:]
    damaged = None
    for fault in chain:
        if fault == "DAMAGE":
            damaged = damage_newest_checkpoint(folder)
            continue
        res = resume(chapter, folder, fault)
        assert res.returncode == -signal.SIGKILL, f"{fault} never fired: {res.stderr[-2000:]}"
        if damaged:  # the resume after the damage said so and went back one checkpoint
            assert f"{damaged}: model.safetensors is damaged" in res.stderr, res.stderr[-2000:]
            damaged = None
    res = resume(chapter, folder)
    assert res.returncode == 0, res.stderr[-3000:]
    got, want = outcome(folder), reference(chapter)
    assert smoke.differences(got["metrics"], want["metrics"]) == []
    assert smoke.differences(got["rollouts"], want["rollouts"]) == []
    assert got["evals"] == want["evals"]
    # nothing a kill left behind stays, and nothing logged was deleted: redone lines were moved aside
    leftovers = [p for p in folder.rglob(".*") if ".tmp-" in p.name or ".old-" in p.name]
    assert leftovers == []
    assert (folder / "superseded.jsonl").is_file()


def test_killed_at_random_moments_then_moved_resumes_to_the_uninterrupted_result(tmp_path, reference):
    """Three kills at random moments of the run's progress (a random delay after a random write, so in the
    middle of sampling, training or writing; the progress, not the wall clock, places them: a warm cache or
    a busy machine moves them not), then the folder is moved before the last resume."""
    chapter, rng = "grpo", random.Random(2)
    folder = tmp_path / chapter / "cut"
    args = ["run", chapter, "--preset", "smoke", "--out", str(tmp_path), "--name", "cut", *SETTINGS[chapter]]
    for _ in range(3):
        # even a process that resumes for the last step makes more than 6 writes, and the timer's thread
        # keeps one that finished from exiting before its kill: every kill lands
        fault = f"any:{rng.randint(1, 6)}:after-{rng.randint(0, 1500)}"
        res = arl(fault, *args)
        assert res.returncode == -signal.SIGKILL, f"{fault}: {res.stderr[-2000:]}"
        if (folder / "config.json").is_file():  # else killed while creating it: start again, as compare does
            args = ["run", chapter, "--resume", str(folder)]
    moved = tmp_path / "elsewhere" / "cut"  # a moved run resumes from its own checkpoints
    moved.parent.mkdir()
    os.rename(folder, moved)
    res = resume(chapter, moved)
    assert res.returncode == 0, res.stderr[-3000:]
    got, want = outcome(moved), reference(chapter)
    assert smoke.differences(got["metrics"], want["metrics"]) == []
    assert smoke.differences(got["rollouts"], want["rollouts"]) == []


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def test_a_resume_with_no_intact_checkpoint_stops_and_changes_nothing(tmp_path):
    res = start("grpo", tmp_path, "cut", "latest:2:before")  # killed after the second checkpoint
    assert res.returncode == -signal.SIGKILL
    folder = tmp_path / "grpo" / "cut"
    for state in (folder / "checkpoints" / "training_state").glob("step-*"):
        (state / "optimizer.pt").write_bytes(b"not a checkpoint")
    before = _tree(folder)
    res = resume("grpo", folder)
    assert res.returncode == 2
    assert "no checkpoint loads" in res.stderr and "Traceback" not in res.stderr
    assert _tree(folder) == before


def test_a_run_folder_is_held_by_one_process(tmp_path):
    """While one process holds a run (here: one that took the lock and waits), `--resume` of it is refused
    with the holder's pid, and nothing in the folder changes; once the holder is gone, it resumes."""
    res = start("grpo", tmp_path, "cut", "metrics:3:before")
    assert res.returncode == -signal.SIGKILL
    folder = tmp_path / "grpo" / "cut"
    hold = f"from arl.track import RunDir; import time; RunDir.open({str(folder)!r}).lock(); print('held', flush=True); time.sleep(120)"
    holder = subprocess.Popen([sys.executable, "-c", hold], env=smoke.env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = _tree(folder)
        second = resume("grpo", folder)
        assert second.returncode == 2
        assert f"in use by another process (pid {holder.pid})" in second.stderr
        assert _tree(folder) == before
    finally:
        holder.kill()
        holder.wait()
    assert resume("grpo", folder).returncode == 0


def _lock_text(folder: Path) -> str:
    try:
        return (folder / ".lock").read_text()
    except FileNotFoundError:
        return ""


def test_a_non_finite_step_is_refused_and_the_last_checkpoint_kept(tmp_path):
    """A learning rate float32 weights cannot hold: the run stops at the first step with a clear error,
    before the optimizer touches the weights and before anything of the step is logged or saved."""
    res = arl("none", "run", "grpo", "--preset", "smoke", "--out", str(tmp_path), "--name", "hot",
              *SETTINGS["grpo"], "learning_rate=1e300", env={**smoke.env(), "ARL_DTYPE": "float32"})
    folder = tmp_path / "grpo" / "hot"
    assert res.returncode == 2, res.stderr[-2000:]
    assert "the step is refused" in res.stderr and "Traceback" not in res.stderr
    assert RunDir.open(folder).last_step() == 0
    for line in (folder / "metrics.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=lambda c: pytest.fail(f"bare {c} in metrics.jsonl"))
    states = sorted((folder / "checkpoints" / "training_state").glob("step-*"))
    from arl import checkpoints
    for state in states:  # every checkpoint written is intact and finite
        _, meta = checkpoints.read_meta(str(state))
        checkpoints.verify(state, meta)


def test_killing_a_comparison_takes_its_runs_down(tmp_path):
    """kill -9 of `arl compare` while a run is going: the run dies with it (no orphan writing the folder
    that a rerun of the comparison resumes)."""
    out = tmp_path / "cmp"
    proc = subprocess.Popen([sys.executable, "-m", "arl.cli", "compare", "grpo", "--preset", "smoke", "--seeds", "1",
                             "--jobs", "1", "--out", str(out)], env=smoke.env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    folder = out / "runs" / "grpo" / "preset-seed0"
    deadline, child = time.time() + 120, None
    while time.time() < deadline and proc.poll() is None and child is None:
        child = int(_lock_text(folder)) if _lock_text(folder).strip() else None
        time.sleep(0.05)
    assert child is not None, "the comparison's run never started"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 10
    while time.time() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child), "the run outlived its comparison"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"  # a zombie waits only to be reaped
    except FileNotFoundError:
        return False
