"""Bad input through the `arl` command: every one gets a short message that names what is wrong and how
to fix it, before any work starts; none is a traceback, and no file or folder changes.

Each case runs `arl.cli.main(argv)` in this process (the checks must come before any model is built, so
this is fast) inside a folder holding one finished-looking run of each kind a case needs: a GRPO run,
a comparison, a folder that is neither. The whole tree is compared before and after every case.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from arl import cli
from arl.track import compare
from arl.track import RunDir

RECORD = '{"state": "s", "questions": [{"name": "q", "type": "yes_no", "text": "t"}]}'


def _tree(root: Path) -> dict[str, str]:
    """Every path under `root` with its content digest (folders as 'dir'); lock files' pids aside."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_dir():
            out[rel] = "dir"
        elif p.name != ".lock":
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-errors")
    run = RunDir.create(root / "runs", "grpo", "done", {"model": "arl/tiny-qwen3-2m", "steps": 2, "seed": 0})
    run.log_metrics(0, {"eval/accuracy": 0.1})
    run.close()
    broken = root / "runs" / "grpo" / "broken"
    broken.mkdir(parents=True)
    (broken / "config.json").write_text("{not json")
    (root / "plain").mkdir()
    (root / "plain" / "notes.txt").write_text("not a comparison")
    (root / "a-file").write_text("x")
    (root / "record.json").write_text(RECORD)
    (root / "empty.json").write_text('{"state": "s", "questions": []}')
    return root


R = "runs/grpo/done"
CASES = [
    # chapters, presets, keys
    (["run", "nosuch"], "unknown chapter 'nosuch'"),
    (["run", "grpo", "--preset", "huge"], "--preset 'huge'"),
    (["run", "grpo", "stepz=3"], "stepz"),
    (["run", "grpo", "lr"], "key=value"),
    (["run", "grpo", "=3"], "key"),
    (["run", "grpo", "steps=abc"], "steps"),
    (["run", "grpo", "steps=1.5"], "steps"),
    (["run", "grpo", "steps=0"], "steps"),
    (["run", "grpo", "steps=-3"], "steps"),
    (["run", "grpo", "steps=99999999"], "steps"),
    (["run", "grpo", "eval_every=0"], "eval_every"),
    (["run", "grpo", "save_every=0"], "save_every"),
    (["run", "grpo", "group_size=0"], "group_size"),
    (["run", "grpo", "batch_prompts=0"], "batch_prompts"),
    (["run", "grpo", "max_tokens=0"], "max_tokens"),
    (["run", "grpo", "minibatches=0"], "minibatches"),
    (["run", "grpo", "n_train=0"], "n_train"),
    (["run", "grpo", "n_test=0"], "n_test"),
    (["run", "grpo", "seed=-1"], "seed"),
    (["run", "grpo", "seed=99999999999"], "seed"),
    (["run", "grpo", "threads=-1"], "threads"),
    (["run", "grpo", "threads=abc"], "threads"),
    (["run", "grpo", "warmup_steps=-1"], "warmup_steps"),
    (["run", "grpo", "lora_rank=-1"], "lora_rank"),
    # a remote backend: only what a Tinker-compatible service can do (LoRA from the base model)
    (["run", "grpo", "backend=remote"], "backend"),
    (["run", "grpo", "base_url=http://127.0.0.1:8000"], "backend=tinker"),
    (["run", "grpo", "backend=tinker", "base_url=127.0.0.1:8000"], "base_url"),
    (["run", "grpo", "backend=tinker", "sft_steps=0"], "lora_rank"),
    (["run", "grpo", "backend=tinker", "lora_rank=8"], "sft_steps=0"),
    (["run", "opd", "backend=tinker", "lora_rank=8", "sft_steps=0"], "teacher_sft_steps"),
    (["run", "opsd", "backend=tinker", "lora_rank=8"], "backend=local"),
    (["run", "jev", "backend=tinker"], "backend=local"),
    # numbers that are not numbers
    (["run", "grpo", "learning_rate=nan"], "learning_rate"),
    (["run", "grpo", "learning_rate=inf"], "learning_rate"),
    (["run", "grpo", "learning_rate=-1"], "learning_rate"),
    (["run", "grpo", "learning_rate=0"], "learning_rate"),
    (["run", "grpo", "learning_rate=fast"], "learning_rate"),
    (["run", "grpo", "sft_learning_rate=-1"], "sft_learning_rate"),
    (["run", "grpo", "grad_clip_norm=-1"], "grad_clip_norm"),
    (["run", "grpo", "grad_clip_norm=nan"], "grad_clip_norm"),
    (["run", "grpo", "temperature=-1"], "temperature"),
    (["run", "grpo", "temperature=nan"], "temperature"),
    (["run", "grpo", "kl_coef=-1"], "kl_coef"),
    (["run", "grpo", "clip_low_threshold=abc"], "clip_low_threshold"),
    # names of things
    (["run", "grpo", "model=nosuch/model"], "model"),
    (["run", "grpo", "model=/nonexistent/folder"], "model"),
    (["run", "grpo", "tracker=foo"], "tracker"),
    (["run", "grpo", "level=galactic"], "level"),
    (["run", "grpo", "data=/nonexistent/train.jsonl"], "data"),
    (["run", "grpo", "loss_fn=foo"], "loss_fn"),
    (["run", "grpo", "normalizer=foo"], "normalizer"),
    (["run", "grpo", "adv_scale=foo"], "adv_scale"),
    (["run", "grpo", "kl_estimator=foo"], "kl_estimator"),
    (["run", "opd", "teacher_model=nosuch"], "teacher_model"),
    (["run", "sft", "time_budget_s=-1"], "time_budget_s"),
    (["run", "retool", "sandbox_timeout_s=0"], "sandbox_timeout_s"),
    (["run", "textworld", "min_rooms=5", "max_rooms=2"], "rooms"),
    (["run", "vision-grpo", "view=sideways"], "view"),
    (["run", "spec-o3", "tasks=nosuch"], "tasks"),
    (["run", "gspo", "ratio_level=foo"], "ratio_level"),
    (["run", "dapo", "algorithm=foo"], "algorithm"),
    # run folders
    (["run", "grpo", "--name", "a/b"], "name"),
    (["run", "grpo", "--name", ".."], "name"),
    (["run", "grpo", "--name", ""], "name"),
    (["run", "grpo", "--name", "done"], "already exists"),
    (["run", "grpo", "--out", "a-file"], "a-file"),
    # resume
    (["run", "grpo", "--resume", "nowhere"], "not a run folder"),
    (["run", "grpo", "--resume", "plain"], "not a run folder"),
    (["run", "grpo", "--resume", "runs/grpo/broken"], "not valid JSON"),
    (["run", "gspo", "--resume", R], "grpo run"),
    (["run", "grpo", "--resume", R, "steps=5"], "steps"),
    (["run", "grpo", "--resume", R, "--name", "x"], "--name"),
    (["run", "grpo", "--resume", R, "--preset", "smoke"], "--preset"),
    (["run", "sft", "--resume", R], "grpo run"),
    # comparisons
    (["compare", "nosuch"], "unknown chapter"),
    (["compare", "grpo", "--vary", "foo=1,2"], "foo"),
    (["compare", "grpo", "--vary", "steps"], "key=value"),
    (["compare", "grpo", "--vary", "learning_rate=1e-3,nan"], "learning_rate"),
    (["compare", "grpo", "--vary", "steps=2,2"], "twice"),
    (["compare", "grpo", "--set", "learning_rate=nan"], "learning_rate"),
    (["compare", "grpo", "--set", "seed=3"], "seed"),
    (["compare", "grpo", "--seeds", "0"], "seeds"),
    (["compare", "grpo", "--jobs", "0"], "jobs"),
    (["compare", "grpo", "--out", "plain", "--vary", "steps=2,3"], "not a comparison"),
    (["compare", "grpo", "--out", "a-file", "--vary", "steps=2,3"], "a-file"),
    # other commands
    (["show", "nowhere"], "not a run folder"),
    (["show", R, "--step", "7"], "step"),
    (["decide", "nowhere", "record.json"], "nowhere"),
    (["decide", R, "nowhere.json"], "nowhere.json"),
    (["decide", R, "empty.json"], "questions"),
    (["demo", "--model", "nosuch"], "nosuch"),
    (["demo", "--steps", "-1"], "steps"),
    (["--threads", "-1", "list"], "threads"),
]


def test_there_are_enough_cases():
    assert len(CASES) >= 60


@pytest.mark.parametrize("argv,needle", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_gets_a_short_clear_error_and_changes_nothing(world, argv, needle, capsys, monkeypatch):
    monkeypatch.chdir(world)
    monkeypatch.setenv("ARL_PROGRESS", "0")

    def reached(*a, **k):  # every check must come before the run folder is touched
        raise AssertionError(f"{argv}: passed every check and reached the run folder")

    monkeypatch.setattr(RunDir, "create", reached)
    monkeypatch.setattr(RunDir, "lock", reached)
    monkeypatch.setattr(compare, "run_all", reached)
    before = _tree(world)
    try:
        rc = cli.main(argv)
    except SystemExit as e:  # argparse's own usage errors
        rc = e.code
    out, err = capsys.readouterr()
    assert rc == 2, f"exit {rc}; stderr: {err}"
    assert "Traceback" not in err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert 1 <= len(lines) <= 2, err
    assert needle.lower() in err.lower(), err
    assert _tree(world) == before, "a bad input changed the folder"
