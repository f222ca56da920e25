"""Each external tracker writes the metrics where its own tool reads them, read back with that tool's
reader: `pytest -q tests/test_trackers.py` (a few seconds each). Nothing reaches a server: TensorBoard
and MLflow write files in the run folder, W&B and SwanLab run offline. A tracker whose package is not
installed is skipped (they are in the `dev` extra)."""

import json
import subprocess
import sys
from collections import defaultdict

import pytest

from arl.track import RunDir, Tracker
from arl.track.trackers import _mlflow_key

STEPS = [(step, {"reward/mean": 0.25 * step, "loss/ce": 1.0 - 0.125 * step}) for step in range(3)]
"""3 steps of 2 metrics, the values exact in float32 (TensorBoard's)."""
EXPECTED = {"reward/mean": [(0, 0.0), (1, 0.25), (2, 0.5)], "loss/ce": [(0, 1.0), (1, 0.875), (2, 0.75)]}


def log_run(kind, tmp_path):
    """A run folder (chapter grpo, name s) whose tracker `kind` logged STEPS and was closed."""
    run = RunDir.create(tmp_path / "runs", "grpo", "s", {"seed": 0, "model": "arl/tiny-qwen3-0.5m"})
    tracker = Tracker.create(kind, run)
    for step, metrics in STEPS:
        tracker.log(step, metrics)
    tracker.close()
    return run


def by_key(points):
    """[(key, step, value)] -> {key: [(step, value)] in step order}."""
    out = defaultdict(list)
    for key, step, value in points:
        out[key].append((int(step), float(value)))
    return {k: sorted(v) for k, v in out.items()}


def unset_env(monkeypatch, *names):
    """Unset `names` for this test; a value the code under test sets goes too when the test ends."""
    for name in names:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def test_tensorboard_event_files_read_back(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = log_run("tensorboard", tmp_path)
    events = EventAccumulator(str(run.path / "tensorboard"))
    events.Reload()
    assert by_key((tag, e.step, e.value) for tag in events.Tags()["scalars"] for e in events.Scalars(tag)) == EXPECTED


def test_mlflow_file_store_read_back(tmp_path, monkeypatch):
    pytest.importorskip("mlflow.tracking")
    from mlflow.tracking import MlflowClient

    unset_env(monkeypatch, "MLFLOW_TRACKING_URI", "MLFLOW_ALLOW_FILE_STORE", "MLFLOW_DISABLE_TELEMETRY")
    run = log_run("mlflow", tmp_path)
    client = MlflowClient(tracking_uri=(run.path / "mlflow").as_uri())
    experiment = client.get_experiment_by_name("arl-grpo")
    [found] = client.search_runs([experiment.experiment_id])
    assert found.info.run_name == "s" and found.info.status == "FINISHED"
    assert found.data.params == {"seed": "0", "model": "arl/tiny-qwen3-0.5m"}
    history = [(key, m.step, m.value) for key in EXPECTED for m in client.get_metric_history(found.info.run_id, key)]
    assert by_key(history) == EXPECTED  # `group/name` keys as they are


def test_mlflow_keys_keep_slashes_and_replace_what_mlflow_rejects():
    assert _mlflow_key("eval/dev/accuracy") == "eval/dev/accuracy"
    assert _mlflow_key("loss:sum@k=2") == "loss_sum_k_2"


def test_wandb_offline_run_read_back(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):  # nothing written to ~
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    run = log_run("wandb", tmp_path)
    [file] = run.path.glob("wandb/offline-run-*/run-*.wandb")
    # the run's .wandb log (what `wandb sync` uploads) read by wandb's own reader, `wandb leet inspect`
    out = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(file)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    records = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    history = [(k, r["history"]["step"].get("num", 0), v) for r in records if r["type"] == "history"
               for k, v in r["history"]["item"].items() if not k.startswith("_")]
    assert by_key(history) == EXPECTED
    [header] = [r["run"] for r in records if r["type"] == "run"]
    assert header["display_name"] == "s" and header["project"] == "arl-grpo" and header["config"]["update"]["seed"] == 0
    assert [r["exit"].get("exit_code", 0) for r in records if r["type"] == "exit"] == [0]  # finished


def test_swanlab_offline_run_read_back(tmp_path, monkeypatch):
    pytest.importorskip("swanlab")
    from swanlab.proto.swanlab.record.v1.record_pb2 import Record
    from swanlab.sdk.internal.core_python.store import DataStoreReader  # the reader `swanlab sync` uses

    unset_env(monkeypatch, "SWANLAB_MODE")
    run = log_run("swanlab", tmp_path)
    [file] = run.path.glob("swanlab/run-*/run-*.swanlab")
    reader, records = DataStoreReader(), []
    reader.open(file)
    for data in reader:
        records.append(Record())
        records[-1].ParseFromString(data)
    reader.close()
    scalars = [(r.scalar.key, r.scalar.step, r.scalar.value.number) for r in records if r.HasField("scalar")]
    assert by_key(scalars) == EXPECTED
    assert any(r.HasField("finish") for r in records)
