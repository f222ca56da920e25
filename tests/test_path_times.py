"""benchmarks/path_times.py: each comparison's time from its run folders, by hand-set file times."""

import importlib.util
import json
import os
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "path_times.py"
spec = importlib.util.spec_from_file_location("path_times", SCRIPT)
path_times = importlib.util.module_from_spec(spec)
spec.loader.exec_module(path_times)


def make_run(runs: Path, name: str, start: float, seconds: float) -> None:
    run = runs / "chapter" / name
    (run / "eval").mkdir(parents=True)
    for path, at in ((run / "config.json", start), (run / "metrics.jsonl", start + seconds / 2),
                     (run / "eval" / "summary.json", start + seconds)):
        path.write_text("{}")
        os.utime(path, (at, at))


def comparison(tmp_path: Path, seconds_by_run: dict[str, float], train: dict) -> Path:
    folder = tmp_path / "cmp"
    for i, (name, seconds) in enumerate(seconds_by_run.items()):
        make_run(folder / "runs", name, 1_000_000.0 + 10_000 * i, seconds)
    (folder / "results.json").write_text(json.dumps({"train_seconds": train}))
    return folder


def test_sums_each_runs_time_from_config_to_its_newest_file_and_the_training_share(tmp_path):
    folder = comparison(tmp_path, {"a-seed0": 100.0, "a-seed1": 120.0, "b-seed0": 200.0},
                        {"a": {"0": 60.0, "1": 90.0}, "b": {"0": 150.0}})
    row = path_times.comparison_times(folder)
    assert row == {"comparison": "cmp", "runs": 3, "run_s": 420.0, "training_s": 300.0, "resumed": False}
    table = path_times.table([row])
    assert "| cmp | 3 | 7.0 | 5.0 | 71% |" in table and table.splitlines()[-1] == "| all | 3 | 7.0 | 5.0 | - |"


def test_marks_a_run_far_longer_than_its_arms_median(tmp_path):
    folder = comparison(tmp_path, {"a-seed0": 100.0, "a-seed1": 110.0, "a-seed2": 400.0}, {})
    assert path_times.comparison_times(folder)["resumed"]


def test_an_unfinished_comparison_is_named_before_any_work(tmp_path, capsys):
    (tmp_path / "half").mkdir()
    assert path_times.main([str(tmp_path / "half")]) == 2
    assert "half" in capsys.readouterr().err
