"""Run folders, logs, trackers and progress bars: `pytest -q tests/test_track.py` (seconds)."""

import io
import json
import os
import sys
import time
from pathlib import Path

import pytest

from arl.track import NotARunError, RunDir, Tracker, progress


def make_run(tmp_path, name="r1", config=None):
    return RunDir.create(tmp_path / "runs", "grpo", name, config or {"lr": 1e-3, "group_size": 4})


def test_create_layout_and_open_round_trip(tmp_path):
    run = make_run(tmp_path, config={"lr": 1e-3, "nested": {"a": [1, 2]}, "path": tmp_path})
    assert run.path == tmp_path / "runs" / "grpo" / "r1"
    assert run.chapter == "grpo" and run.name == "r1"
    assert (run.path / "checkpoints").is_dir()
    assert json.loads((run.path / "config.json").read_text())["nested"] == {"a": [1, 2]}
    assert run.config["path"] == str(tmp_path)  # saved as JSON, read back the same
    again = RunDir.open(run.path)
    assert again.config == run.config
    assert not list(run.path.glob(".*tmp*"))  # no temp files left behind


def test_default_name_is_a_timestamp_and_never_collides(tmp_path):
    a = RunDir.create(tmp_path, "dapo", None, {})
    b = RunDir.create(tmp_path, "dapo", None, {})
    assert a.path != b.path and a.path.parent == b.path.parent == tmp_path / "dapo"
    assert a.name[:8].isdigit()


def test_refuses_to_overwrite_a_run(tmp_path):
    make_run(tmp_path)
    with pytest.raises(FileExistsError, match="already exists and is not empty"):
        make_run(tmp_path)
    # an empty folder that happens to be there is fine
    (tmp_path / "runs" / "grpo" / "empty").mkdir()
    RunDir.create(tmp_path / "runs", "grpo", "empty", {})


@pytest.mark.parametrize("bad", ["", "a/b", "..", "."])
def test_bad_names_are_refused(tmp_path, bad):
    with pytest.raises(ValueError, match="name"):
        RunDir.create(tmp_path, "grpo", bad, {})


def test_config_that_is_not_json_fails_before_writing(tmp_path):
    with pytest.raises(TypeError, match="config cannot be saved as JSON"):
        RunDir.create(tmp_path, "grpo", "x", {"fn": object()})
    assert not (tmp_path / "grpo" / "x").exists()


def test_open_names_the_path_when_not_a_run(tmp_path):
    with pytest.raises(NotARunError, match=str(tmp_path / "nope")):
        RunDir.open(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotARunError, match="has no config.json"):
        RunDir.open(tmp_path / "empty")


def test_metrics_round_trip(tmp_path):
    np = pytest.importorskip("numpy")
    run = make_run(tmp_path)
    assert run.read_metrics() == [] and run.last_step() is None
    run.log_metrics(0, {"reward/mean": 0.25, "loss/pg": np.float32(1.5), "rollout/len": 12})
    run.log_metrics(1, {"reward/mean": 0.5})
    rows = run.read_metrics()
    assert rows == [{"step": 0, "reward/mean": 0.25, "loss/pg": 1.5, "rollout/len": 12.0},
                    {"step": 1, "reward/mean": 0.5}]
    assert run.last_step() == 1
    lines = (run.path / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["step"] in (0, 1) for line in lines)


def test_bad_metrics_are_refused(tmp_path):
    run = make_run(tmp_path)
    with pytest.raises(TypeError, match="reward/mean"):
        run.log_metrics(0, {"reward/mean": "high"})
    with pytest.raises(ValueError, match="step"):
        run.log_metrics(0, {"step": 3})
    with pytest.raises(TypeError, match="step"):
        run.log_metrics(-1, {})
    assert run.read_metrics() == []


def test_rollouts_round_trip(tmp_path):
    run = make_run(tmp_path)
    run.log_rollouts(3, [{"prompt": "2+2?", "completion": "4", "reward": 1.0, "tokens": [5, 6], "mask": [0, 1]},
                         {"prompt": "1+1?", "completion": "3", "reward": 0.0}])
    rows = run.read_rollouts()
    assert [r["step"] for r in rows] == [3, 3]
    assert rows[0]["tokens"] == [5, 6] and rows[1]["completion"] == "3"
    assert run.read_rollouts(step=4) == []
    with pytest.raises(TypeError, match="JSON"):
        run.log_rollouts(4, [{"ok": 1}, {"bad": object()}])
    assert len(run.read_rollouts()) == 2  # neither row of the bad call was written


def test_eval_round_trip_is_atomic(tmp_path):
    run = make_run(tmp_path)
    run.write_eval("before", {"avg@4": 0.2})
    run.write_eval("before", {"avg@4": 0.3})
    run.write_eval("after", {"avg@4": 0.6})
    assert run.read_eval("before") == {"avg@4": 0.3}
    assert run.eval_names() == ["after", "before"]
    assert sorted(p.name for p in (run.path / "eval").iterdir()) == ["after.json", "before.json"]
    with pytest.raises(FileNotFoundError, match="have: after, before"):
        run.read_eval("final")


def test_torn_last_line_is_skipped_and_repaired(tmp_path):
    run = make_run(tmp_path)
    run.log_metrics(0, {"reward/mean": 0.1})
    run.log_metrics(1, {"reward/mean": 0.2})
    with open(run.path / "metrics.jsonl", "a") as f:  # what kill -9 mid-write leaves
        f.write('{"step": 2, "reward/me')
    with open(run.path / "rollouts.jsonl", "a") as f:
        f.write('{"step": 0, "completion": "ab')
    again = RunDir.open(run.path)
    assert [r["step"] for r in again.read_metrics()] == [0, 1]
    assert again.last_step() == 1
    assert again.read_rollouts() == []
    # the next append starts on a fresh line instead of gluing onto the torn one
    again.log_metrics(2, {"reward/mean": 0.3})
    again.log_rollouts(2, [{"completion": "x"}])
    assert [r["step"] for r in again.read_metrics()] == [0, 1, 2]
    assert again.read_rollouts() == [{"step": 2, "completion": "x"}]


def test_complete_line_missing_its_newline_is_kept(tmp_path):
    run = make_run(tmp_path)
    (run.path / "metrics.jsonl").write_text('{"step": 0, "a": 1.0}\n{"step": 1, "a": 2.0}')
    again = RunDir.open(run.path)
    assert again.last_step() == 1
    again.log_metrics(2, {"a": 3.0})
    assert [r["step"] for r in again.read_metrics()] == [0, 1, 2]


def test_corrupt_middle_line_is_an_error_naming_the_line(tmp_path):
    run = make_run(tmp_path)
    (run.path / "metrics.jsonl").write_text('{"step": 0}\nnot json\n{"step": 2}\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl:2"):
        run.read_metrics()


def test_truncate_after_for_resume(tmp_path):
    run = make_run(tmp_path)
    for s in range(6):
        run.log_metrics(s, {"reward/mean": s / 10})
        run.log_rollouts(s, [{"completion": f"c{s}"}, {"completion": f"d{s}"}])
    with open(run.path / "metrics.jsonl", "a") as f:
        f.write('{"step": 6, "rew')
    resumed = RunDir.open(run.path)
    resumed.truncate_after(3)
    assert [r["step"] for r in resumed.read_metrics()] == [0, 1, 2, 3]
    assert [r["step"] for r in resumed.read_rollouts()] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert resumed.last_step() == 3
    for s in (4, 5):  # continue exactly: no duplicate steps
        resumed.log_metrics(s, {"reward/mean": 1.0})
    assert [r["step"] for r in resumed.read_metrics()] == [0, 1, 2, 3, 4, 5]
    assert (run.path / "metrics.jsonl").read_text().endswith("\n")
    assert not list(run.path.glob(".*tmp*"))


def test_truncate_after_minus_one_empties_the_logs(tmp_path):
    run = make_run(tmp_path)
    run.log_metrics(0, {"a": 1.0})
    run.log_rollouts(0, [{"c": "x"}])
    run.truncate_after(-1)
    assert run.read_metrics() == [] and run.read_rollouts() == [] and run.last_step() is None


def test_truncate_after_with_no_logs_is_fine(tmp_path):
    run = make_run(tmp_path)
    run.truncate_after(0)
    assert run.read_metrics() == [] and not (run.path / "metrics.jsonl").exists()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # 3.12+ warns on fork with threads
def test_killed_writer_leaves_a_readable_run(tmp_path):
    """kill -9 a process that logs as fast as it can; whatever it left must still open and read."""
    import signal
    import time

    run = make_run(tmp_path)
    pid = os.fork()
    if pid == 0:  # child: log until killed; never returns into pytest
        try:
            r, i = RunDir.open(run.path), 0
            while True:
                r.log_metrics(i, {"reward/mean": 0.5, "pad/x": 1.0})
                r.log_rollouts(i, [{"c": "x" * 5000}])
                r.write_eval("latest", {"step": i})
                i += 1
        finally:
            os._exit(1)
    deadline = time.time() + 30
    while time.time() < deadline and (not run.metrics_file.exists() or run.metrics_file.stat().st_size < 3000):
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    again = RunDir.open(run.path)
    steps = [r["step"] for r in again.read_metrics()]
    assert len(steps) > 0 and steps == list(range(len(steps)))
    assert all(r["c"] == "x" * 5000 for r in again.read_rollouts())
    assert isinstance(again.read_eval("latest")["step"], int)
    again.log_metrics(len(steps), {"reward/mean": 1.0})  # and the run can carry on
    assert again.last_step() == len(steps)


# -- trackers -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", [None, "none", ""])
def test_tracker_none_is_a_no_op(tmp_path, kind):
    run = make_run(tmp_path)
    with Tracker.create(kind, run) as t:
        t.log(0, {"reward/mean": 1.0})
    t.close()
    assert sorted(p.name for p in run.path.iterdir()) == [".lock", "checkpoints", "config.json", "run.json"]


def test_unknown_tracker_names_the_valid_kinds(tmp_path):
    with pytest.raises(ValueError, match="tensorboard.*swanlab.*wandb.*mlflow"):
        Tracker.create("comet", make_run(tmp_path))


@pytest.mark.parametrize("kind, module", [("tensorboard", "torch.utils.tensorboard"),
                                          ("swanlab", "swanlab"), ("wandb", "wandb"),
                                          ("mlflow", "mlflow")])
def test_missing_tracker_package_says_how_to_install(tmp_path, monkeypatch, kind, module):
    # makes `import module` fail, installed or not; mlflow is blocked at its top level: blocking a submodule
    # fails mlflow's own __init__ halfway and leaves a half-imported package behind for later tests
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=f"pip install {kind}"):
        Tracker.create(kind, make_run(tmp_path))


def test_wandb_and_swanlab_run_offline_and_get_the_metrics(tmp_path, monkeypatch):
    import types

    calls = []

    class FakeRun:
        def log(self, metrics, step):
            calls.append(("log", metrics, step))

        def finish(self):
            calls.append(("finish",))

    for mod in ("wandb", "swanlab"):
        monkeypatch.delenv(f"{mod.upper()}_MODE", raising=False)  # unset: offline; the user's setting wins
        fake = types.ModuleType(mod)
        fake.init = lambda **kw: calls.append(("init", kw)) or FakeRun()
        monkeypatch.setitem(sys.modules, mod, fake)
    run = make_run(tmp_path)
    for kind in ("wandb", "swanlab"):
        calls.clear()
        t = Tracker.create(kind, run)
        t.log(3, {"reward/mean": 0.5})
        t.close()
        assert calls[0][0] == "init" and calls[0][1]["mode"] == "offline"
        assert calls[0][1]["config"] == run.config
        assert calls[1] == ("log", {"reward/mean": 0.5}, 3) and calls[2] == ("finish",)
        monkeypatch.setenv(f"{kind.upper()}_MODE", "disabled")  # the user's own setting wins
        calls.clear()
        Tracker.create(kind, run).close()
        assert calls[0][1]["mode"] == "disabled"


# -- progress -------------------------------------------------------------------------------------

def test_progress_is_silent_when_not_a_tty(monkeypatch):
    monkeypatch.delenv("ARL_PROGRESS", raising=False)
    buf = io.StringIO()
    with progress(3, "grpo", file=buf) as bar:
        for _ in range(3):
            bar.update()
            bar.set_metrics({"reward": 0.5})
    assert buf.getvalue() == ""


def test_progress_forced_shows_live_metrics(monkeypatch):
    monkeypatch.delenv("ARL_PROGRESS", raising=False)
    buf = io.StringIO()
    with progress(2, "grpo", force=True, file=buf) as bar:
        bar.update()
        bar.set_metrics({"reward": 0.123456, "len": 17})
    out = buf.getvalue()
    assert "grpo" in out and "reward=0.123" in out and "len=17" in out


def test_images_are_stored_once_by_content(tmp_path):
    run = RunDir.create(tmp_path, "vision-grpo", "r", {"model": "m"})
    png_a, png_b = b"\x89PNG first", b"\x89PNG second"
    name = run.save_image(png_a)
    assert name == run.save_image(png_a) != run.save_image(png_b)
    assert sorted(p.name for p in run.images_dir.iterdir()) == sorted([name, run.save_image(png_b)])
    assert run.read_image(name) == png_a
    with pytest.raises(ValueError, match="expected '<16 hex digits>.png'"):
        run.read_image("../config.json")
    with pytest.raises(FileNotFoundError, match="missing from the run folder"):
        run.read_image("0123456789abcdef.png")


def _create_at(args):
    root, barrier_file = args
    import time as _time

    while not Path(barrier_file).exists():  # start together
        _time.sleep(0.0005)
    try:
        RunDir.create(root, "grpo", "same", {"x": 1})
        return "created"
    except FileExistsError:
        return "refused"


def test_two_runs_created_at_once_one_wins(tmp_path):
    """`create` is one mkdir plus a lock: of processes creating one folder at the same moment, exactly one
    gets it (the others a clear error), in every trial; the folder is its owner's alone (0700)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    with ctx.Pool(4) as pool:
        for trial in range(20):
            go = tmp_path / f"go-{trial}"
            pending = pool.map_async(_create_at, [(tmp_path / f"t{trial}", go)] * 4)
            time.sleep(0.05)
            go.touch()
            results = pending.get(timeout=30)
            assert sorted(results) == ["created", "refused", "refused", "refused"], results
    assert (tmp_path / "t0" / "grpo" / "same").stat().st_mode & 0o777 == 0o700


def test_a_held_run_refuses_a_second_holder_and_not_its_own_process(tmp_path):
    import subprocess

    run = RunDir.create(tmp_path, "grpo", "r", {})
    again = RunDir.open(run.path).lock()  # the same process: shared
    code = f"from arl.track import RunDir; RunDir.open({str(run.path)!r}).lock()"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert other.returncode != 0 and "in use by another process" in other.stderr
    run.close()
    again.close()
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_a_failed_resume_point_loses_nothing(tmp_path):
    """truncate_after moves what it drops to superseded.jsonl: every line logged is still on disk."""
    run = RunDir.create(tmp_path, "grpo", "r", {})
    for step in range(5):
        run.log_metrics(step, {"reward/mean": step / 10})
    run.truncate_after(2)
    assert [r["step"] for r in run.read_metrics()] == [0, 1, 2]
    moved = [json.loads(line) for line in (run.path / "superseded.jsonl").read_text().splitlines()]
    assert [(r["file"], r["step"]) for r in moved] == [("metrics.jsonl", 3), ("metrics.jsonl", 4)]


def test_non_finite_values_are_written_as_null(tmp_path):
    run = RunDir.create(tmp_path, "grpo", "r", {})
    run.log_metrics(1, {"loss/sum": float("nan"), "reward/mean": float("inf"), "ok": 1.0})
    run.write_eval("e", {"x": [float("-inf"), 2.0]})
    line = run.metrics_file.read_text()
    assert json.loads(line) == {"step": 1, "loss/sum": None, "reward/mean": None, "ok": 1.0}
    assert run.read_eval("e") == {"x": [None, 2.0]}


def test_a_creation_killed_before_its_config_can_be_started_again(tmp_path):
    first = RunDir.create(tmp_path, "grpo", "r", {"a": 1})
    first.close()
    (first.path / "config.json").unlink()  # as a kill between the folder and its config.json leaves it
    again = RunDir.create(tmp_path, "grpo", "r", {"a": 2})
    assert again.config == {"a": 2}
    again.log_metrics(0, {"x": 1.0})
    again.close()
    with pytest.raises(FileExistsError, match="already exists"):
        RunDir.create(tmp_path, "grpo", "r", {"a": 3})
