"""Tier 4: a smoke run killed with SIGKILL once it has saved something, then resumed, logs exactly the
rows of an uninterrupted one (tests/expected/smoke). Its own file, so that pytest-xdist's loadfile runs it
beside test_recipes.py's smoke runs rather than after them."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import smoke
from arl.recipes import CHAPTERS
from arl.track import RunDir

RESUMABLE = sorted(set(CHAPTERS) - {"losses", "sft", "vision-sft", "spec-o3-sft", "search-r1-sft", "retool-sft",
                                     "textworld-sft", "jev", "jev-sft"})
"""Chapters that continue a killed run (the others are minutes long and refuse --resume)."""


def _stage_saved(run: Path) -> bool:
    stages = run / "eval" / "stages.json"
    return stages.is_file() and bool(json.loads(stages.read_text())["states"])


def _checkpoint_saved(run: Path) -> bool:
    return (run / "checkpoints" / "latest.json").is_file()


@pytest.mark.parametrize("chapter", RESUMABLE)
def test_resume_after_kill_matches_an_uninterrupted_run(chapter, tmp_path):
    """kill -9 once the run has saved something to resume from (a checkpoint; a finished stage), then
    --resume: the rows equal the uninterrupted smoke run's (tests/expected/smoke)."""
    saved = _stage_saved if chapter == "opd-specialist" else _checkpoint_saved
    proc = subprocess.Popen(smoke.command(tmp_path / "trace.json", "run", chapter, "--preset", "smoke", "--out",
                                          str(tmp_path), "--name", "cut"),
                            env=smoke.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    folder = tmp_path / chapter / "cut"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and not saved(folder):
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)  # mid-run, at whatever point it is
    proc.wait()
    assert not (folder / "eval" / "summary.json").exists(), "the run finished before it was killed"
    resumed = subprocess.run([sys.executable, "-m", "arl.cli", "run", chapter, "--resume", str(folder)],
                             capture_output=True, text=True, env=smoke.env(), timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    rows = smoke.comparable(RunDir.open(folder).read_metrics())
    assert smoke.differences(rows, smoke.expected(chapter)) == []
