"""Plots and the HTML report: `pytest -q tests/test_report.py` (seconds)."""

import base64
import math
import random

import numpy as np
import pytest

from arl.report import moving_average, plot_metrics, write_report
from arl.track import RunDir

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def run(tmp_path):
    run = RunDir.create(tmp_path / "runs", "grpo", "demo", {"lr": 3e-5, "loss_fn": "ppo", "note": "<b>bold</b>"})
    rng = random.Random(0)
    for s in range(40):
        run.log_metrics(s, {"reward/mean": 0.2 + 0.4 * (1 - math.exp(-s / 15)) + rng.gauss(0, 0.08),
                            "reward/std": 0.3 + rng.gauss(0, 0.03), "loss/pg": rng.gauss(0, 1),
                            "time/step": 1.0 + 0.01 * s})
    run.log_rollouts(39, [
        {"prompt": "What is 3+4?", "completion": "7 <script>alert('x')</script>", "reward": 1.0,
         "advantage": 0.5, "tokens": [1, 2, 3]},
        {"prompt": "a < b & c", "completion": "\\boxed{31}", "reward": 0.0, "advantage": -0.5},
    ])
    return run


def test_moving_average_is_centred_and_keeps_length():
    y = np.array([0.0, 0, 3, 0, 0])
    m = moving_average(y, 3)
    assert m.shape == y.shape
    np.testing.assert_allclose(m, [0, 1, 1, 1, 0])
    np.testing.assert_allclose(moving_average(np.ones(7), 5), np.ones(7))


def test_plot_metrics_one_png_per_group(run):
    paths = plot_metrics(run)
    assert sorted(p.name for p in paths) == ["loss.png", "reward.png", "time.png"]
    for p in paths:
        assert p.parent == run.path / "plots" and p.read_bytes()[:8] == PNG_MAGIC
    assert not list((run.path / "plots").glob(".*"))  # temp files renamed away


def test_plot_metrics_selects_keys(run):
    assert [p.name for p in plot_metrics(run.path, ["reward/*"])] == ["reward.png"]
    assert [p.name for p in plot_metrics(run, ["loss"])] == ["loss.png"]
    assert [p.name for p in plot_metrics(run, ["time/step"])] == ["time.png"]
    with pytest.raises(ValueError, match="logged metrics: reward/mean"):
        plot_metrics(run, ["kl/ref"])


def test_plot_metrics_with_gaps_and_no_metrics(tmp_path):
    run = RunDir.create(tmp_path, "grpo", "sparse", {})
    assert plot_metrics(run) == []
    for s in range(5):
        run.log_metrics(s, {"loss/pg": 1.0 / (s + 1)} | ({"eval/acc": 0.1 * s} if s % 2 == 0 else {}))
    run.log_metrics(5, {"loss/pg": float("nan")})
    assert sorted(p.name for p in plot_metrics(run)) == ["eval.png", "loss.png"]


def test_report_is_self_contained_and_embeds_the_plots(run):
    pngs = plot_metrics(run)
    out = write_report(run, "GRPO <mini>", [{"metric": "reward/mean", "first": 0.21, "last": 0.58}],
                       eval_table=[{"metric": "avg@4", "before": 0.2, "after": 0.45}])
    assert out == run.path / "report.html" and out.exists()
    page = out.read_text()
    assert page.startswith("<!doctype html>")
    for p in pngs:
        assert base64.b64encode(p.read_bytes()).decode() in page
    assert page.count("data:image/png;base64,") == len(pngs)
    assert "http://" not in page and "https://" not in page and "<link" not in page  # nothing external
    assert "max-width: 960px" in page
    assert "GRPO &lt;mini&gt;" in page and "+0.25" in page  # escaped title; before/after change column
    assert "&quot;lr&quot;: 3e-05" in page  # config shown, escaped
    assert "&lt;b&gt;bold&lt;/b&gt;" in page


def test_report_escapes_rollouts(run):
    page = write_report(run, "t", [], rollouts_sample=run.read_rollouts()).read_text()
    assert "<script>" not in page and "alert(" in page
    assert "&lt;script&gt;" in page and "a &lt; b &amp; c" in page
    assert "advantage -0.5" in page and "\\boxed{31}" in page
    assert "[1, 2, 3]" not in page  # token arrays are not dumped into the page


def test_report_defaults(run):
    # no plots yet: they are made; rollouts_sample=None: the last step's rows are shown
    page = write_report(run, "t", []).read_text()
    assert (run.path / "plots" / "reward.png").exists() and "data:image/png" in page
    assert "&lt;script&gt;" in page and "Evaluation" not in page
    assert "&lt;script&gt;" not in write_report(run, "t", [], rollouts_sample=[]).read_text()


def test_report_on_an_empty_run(tmp_path):
    run = RunDir.create(tmp_path, "grpo", "empty", {"a": 1})
    page = write_report(run.path, "nothing yet", []).read_text()
    assert "no metrics logged" in page and "no rollouts recorded" in page
    assert not list(run.path.glob(".*tmp*"))
