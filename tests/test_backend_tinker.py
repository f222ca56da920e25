"""`backend=tinker`: the recipes on a Tinker-compatible service through the real `tinker` SDK
(arl.backend.tinker), here against `arl serve` on this machine.

The unit tests check the type conversion and the run folder's record of remote checkpoints. The runs
compare GRPO's smoke preset on both backends with the same LoRA (`RUN`), and a run whose server is
killed (SIGKILL) mid-run, then resumed once a server is back, with the uninterrupted one. They start RL
from a folder model holding the smoke preset's cold start (`cold_model`): a remote run cannot use a cold
start trained here (the config refuses sft_steps > 0), and the bare tiny model earns no reward to learn
from. Both runs are float64 (tests/smoke.py); what crosses the wire is float32, so logged values agree to
`smoke.FLOAT_TOLERANCE`, the tolerance the smoke rows already allow for float32 at the client API.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

tinker = pytest.importorskip("tinker")

import smoke  # noqa: E402
from serve_util import serving  # noqa: E402

from arl import types as at  # noqa: E402
from arl.backend import tinker as bt  # noqa: E402
from arl.rl import session  # noqa: E402
from arl.track import RunDir  # noqa: E402
from conftest import TINY  # noqa: E402

RUN = ("lora_rank=8", "sft_steps=0", "steps=4", "save_every=1", "eval_every=1")
"""GRPO smoke on both backends: LoRA from the start model, no cold start, steps enough to kill one mid-run."""


# -- conversion ---------------------------------------------------------------------------------
def test_datum_goes_to_the_sdk_intact():
    d = at.Datum(at.ModelInput.from_ints([1, 2, 3]), {"target_tokens": [2, 3, 4], "advantages": [0.0, 0.5, -0.25]})
    d = d.with_provenance([at.PromptProvenanceSpan(sequence_id="s", length=1),
                           at.SampledProvenanceSpan(sequence_id="q", offset=0, length=2)],
                          [at.SampledProvenanceSpan(sequence_id="q", length=3)])
    t = bt.to_datum(d)
    assert t.model_input.to_ints() == [1, 2, 3]
    assert t.loss_fn_inputs["target_tokens"].dtype == "int64" and t.loss_fn_inputs["target_tokens"].tolist() == [2, 3, 4]
    assert t.loss_fn_inputs["advantages"].dtype == "float32" and t.loss_fn_inputs["advantages"].tolist() == [0.0, 0.5, -0.25]
    assert [type(s).__name__ for s in t.model_input_spans] == ["PromptProvenanceSpan", "SampledProvenanceSpan"]
    assert t.loss_fn_input_spans[0].sequence_id == "q" and t.loss_fn_input_spans[0].length == 3


def test_params_go_to_the_sdk_intact():
    p = bt.to_sampling_params(at.SamplingParams(max_tokens=7, seed=3, stop=["</s>"], temperature=0.5, top_k=4, top_p=0.9))
    assert (p.max_tokens, p.seed, p.stop, p.temperature, p.top_k, p.top_p) == (7, 3, ["</s>"], 0.5, 4, 0.9)
    a = bt.to_adam(at.AdamParams(learning_rate=2e-3, beta1=0.8, beta2=0.9, eps=1e-8, weight_decay=0.1, grad_clip_norm=1.0))
    assert (a.learning_rate, a.beta1, a.beta2, a.eps, a.weight_decay, a.grad_clip_norm) == (2e-3, 0.8, 0.9, 1e-8, 0.1, 1.0)


def test_results_come_back_as_arl_types():
    out = bt.from_forward_backward(tinker.types.ForwardBackwardOutput(
        loss_fn_output_type="ArrayRecord",
        loss_fn_outputs=[{"logprobs": tinker.types.TensorData(data=[-1.0, -2.0], dtype="float32", shape=[2])}],
        metrics={"loss:sum": 3.0, "tokens/total:sum": 2.0, "importance_sampling/ratio_mean:mean": 1.0}))
    # the wire's `name:reduction` of arl's own keys loses the reduction; Tinker's loss:sum stays
    assert out.metrics == {"loss:sum": 3.0, "tokens/total": 2.0, "importance_sampling/ratio_mean": 1.0}
    assert isinstance(out.loss_fn_outputs[0]["logprobs"], at.TensorData)
    assert out.loss_fn_outputs[0]["logprobs"].tolist() == [-1.0, -2.0]

    class Tok:
        def decode(self, tokens):
            return "-".join(map(str, tokens))

    res = bt.from_sample(tinker.types.SampleResponse(sequences=[tinker.types.SampledSequence(
        stop_reason="stop", sequence_id="r:0", _tokens_list=[5, 6], _logprobs_list=[-0.5, -0.25])]), Tok(), True, 3)
    (s,) = res.sequences
    assert (s.tokens, s.logprobs, s.stop_reason, s.text, s.sequence_id) == ([5, 6], [-0.5, -0.25], "stop", "5-6", "r:0")
    assert (res.input_tokens, res.output_tokens) == (3, 2)


def test_remote_checkpoints_are_recorded_in_the_run_folder(tmp_path):
    run = RunDir.create(tmp_path, "grpo", "r", {})
    for step in (1, 2, 3):
        session.record_remote(run, "http://svc", step, f"tinker://m/weights/step-{step:04d}")
    session.record_remote(run, "http://svc", 2, "tinker://n/weights/step-0002")  # a resumed run redoes step 2
    assert session.saved_states(run) == [(2, "tinker://n/weights/step-0002"), (1, "tinker://m/weights/step-0001")]
    assert session.read_remote(run)["base_url"] == "http://svc"


def test_arl_needs_no_sdk_to_import():
    """Only arl.backend.tinker imports the SDK, and only a remote run imports it."""
    script = "import sys; sys.modules['tinker'] = None; import arl, arl.cli, arl.rl.session, arl.recipes.grpo"
    subprocess.run([sys.executable, "-c", script], env=smoke.env(), check=True, timeout=120)


def test_no_api_key_is_refused_before_the_run_folder(tmp_path, monkeypatch, capsys):
    from arl import cli

    for name in ("TINKER_API_KEY", "TINKER_CREDENTIAL_CMD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.tinker/credentials.json
    assert cli.main(["run", "grpo", "--out", str(tmp_path / "runs"), "backend=tinker", "lora_rank=8", "sft_steps=0"]) == 2
    assert "TINKER_API_KEY" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


# -- against `arl serve` --------------------------------------------------------------------------
def test_a_custom_loss_step_on_the_service_is_the_local_engines(tmp_path, service, monkeypatch):
    """forward_backward_custom (the SDK's linearisation, arl's datums handed to the loss) and the optim
    step: the same loss, metrics and gradient norm as the local engine's, from the same LoRA."""
    tokens = list(range(5, 17))
    datum = at.Datum(at.ModelInput.from_ints(tokens[:-1]), {"target_tokens": tokens[1:], "advantages": [0.5] * 11})
    seen = []

    def loss_fn(data, logprobs_list):
        seen.append(type(data[0]))
        return -(logprobs_list[0] * data[0].loss_fn_inputs["advantages"].to_torch()).sum(), {"custom/n": 11.0}

    monkeypatch.setenv("TINKER_API_KEY", "tml-local")
    with serving(tmp_path / "home") as url:  # this process's settings (dtype, models)
        remote = bt.ServiceClient(url).create_lora_training_client(TINY, rank=4, seed=0)
        local = service.create_lora_training_client(TINY, rank=4, seed=0)
        out = [(c.forward_backward_custom([datum], loss_fn).result(),
                c.optim_step(at.AdamParams(learning_rate=1e-3)).result()) for c in (local, remote)]
    assert seen == [at.Datum, at.Datum]
    (fb_l, opt_l), (fb_r, opt_r) = out
    assert fb_r.metrics["custom/n"] == 11.0
    assert fb_r.metrics["loss:sum"] == pytest.approx(fb_l.metrics["loss:sum"], rel=1e-5)
    assert opt_r.metrics["optim/grad_norm"] == pytest.approx(opt_l.metrics["optim/grad_norm"], rel=1e-4)
    assert fb_r.loss_fn_outputs[0]["logprobs"].tolist() == pytest.approx(fb_l.loss_fn_outputs[0]["logprobs"].tolist(), abs=1e-5)


# -- runs against `arl serve` ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def cold_model(tmp_path_factory) -> Path:
    """A model folder (the tiny model's config and tokenizer) holding GRPO smoke's cold-start weights: a
    base model that both backends load by its path and that answers some problems right."""
    folder = tmp_path_factory.mktemp("cold-model") / "model"
    script = f"""
import shutil
from arl import checkpoints, config, models
from arl.recipes import grpo
cfg = config.resolve(grpo.Config, grpo.PRESETS, "smoke", {{}})
weights = checkpoints.resolve(cfg.math_task().start_weights()) / "model.safetensors"
shutil.copytree(models.model_dir(cfg.model), {str(folder)!r})
shutil.copy(weights, {str(folder)!r} + "/model.safetensors")
"""
    subprocess.run([sys.executable, "-c", script], env=smoke.env(), check=True, timeout=600)
    return folder


def grpo(out: Path, name: str, *args: str, env: dict | None = None, wait: bool = True):
    """`arl run grpo --preset smoke ARGS` into `out/grpo/name`, or `--resume` `out/grpo/name`."""
    where = ("--resume", str(out / "grpo" / name)) if "--resume" in args else ("--preset", "smoke", "--out", str(out), "--name", name)
    cmd = smoke.command(out / f"{name}.trace.json", "run", "grpo", *where, *(a for a in args if a != "--resume"))
    proc = subprocess.Popen(cmd, env=env or smoke.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc.communicate(timeout=900) + (proc.returncode,) if wait else proc


def remote_env(url: str) -> dict:
    return {**smoke.env(), "TINKER_BASE_URL": url, "TINKER_API_KEY": "tml-local"}


@pytest.fixture(scope="module")
def runs(cold_model, tmp_path_factory):
    """The local run and the same run on `arl serve` (backend=tinker), both finished."""
    out = tmp_path_factory.mktemp("backend-runs")
    model = f"model={cold_model}"
    *_, rc = grpo(out, "local", model, *RUN)
    assert rc == 0
    with serving(out / "serve-home", env=smoke.env()) as url:
        _, err, rc = grpo(out, "remote", model, *RUN, "backend=tinker",
                          env=remote_env(url))
    assert rc == 0, err
    return out


def rows(run: Path) -> list[dict]:
    return smoke.comparable(RunDir.open(run).read_metrics())


def test_grpo_on_a_tinker_service_logs_the_local_run_rows(runs):
    local, remote = rows(runs / "grpo" / "local"), rows(runs / "grpo" / "remote")
    assert max(r.get("train/datums", 0) for r in local) > 0, "the comparison must include gradient steps"
    assert smoke.differences(remote, local) == []
    # the checkpoints live on the service; the run folder records their tinker:// paths
    ckpt = runs / "grpo" / "remote" / "checkpoints"
    assert [s["step"] for s in json.loads((ckpt / session.REMOTE_FILE).read_text())["states"]] == [1, 2, 3, 4]
    assert json.loads((ckpt / session.LATEST_FILE).read_text())["path"].startswith("tinker://")
    assert not (ckpt / "training_state").exists()
    assert (runs / "grpo" / "remote" / "report.html").is_file()


def test_a_killed_service_stops_the_run_with_one_line_and_resume_finishes_it(runs, cold_model):
    out, home = runs, runs / "serve-home-2"
    run = out / "grpo" / "killed"
    with serving(home, env=smoke.env()) as url:
        proc = grpo(out, "killed", f"model={cold_model}", *RUN,
                    "backend=tinker", env=remote_env(url), wait=False)
        deadline = time.monotonic() + 300
        while not (run / "checkpoints" / session.REMOTE_FILE).is_file():  # a checkpoint saved on the service
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
    # leaving `serving` SIGKILLs the server mid-run
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert url in lines[0] and "start the service again" in lines[0] and f"--resume {run}" in lines[0], err
    assert len(RunDir.open(run).read_metrics()) < 5, "the server was killed after the run had finished"

    with serving(home, env=smoke.env()) as url:  # another port: the run keeps no address, the paths stay valid
        _, err, rc = grpo(out, "killed", "--resume", env=remote_env(url))
    assert rc == 0, err
    assert smoke.differences(rows(run), rows(out / "grpo" / "remote")) == []
