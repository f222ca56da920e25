"""Tier 3: a smoke run of every recipe (a complete run folder, the expected metric rows, real gradient
steps, `--help` fields that the run reads) and config errors; resuming after kill -9 is in test_resume.py."""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import smoke
from arl import config
from arl.recipes import CHAPTERS, load
from arl.track import RunDir

ROOT = Path(__file__).resolve().parents[1]


def arl_cli(*args, timeout=600, **kw):
    return subprocess.run([sys.executable, "-m", "arl.cli", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=timeout, **kw)


# what each chapter logs per step, beyond the shared run-folder layout
STEP_KEYS = {
    "grpo": {"reward/mean", "reward/frac_degenerate", "rollout/len_mean", "train/tokens", "time/sample", "time/train"},
    "sft": {"loss/ce", "time/step", "time/trained"},
    "dapo": {"reward/mean", "reward/correct", "sampling/candidate_groups", "sampling/effective_groups",
             "sampling/partial_batch", "train/update_skipped", "time/refill", "time/sample"},
    "opd": {"opd/reverse_kl_mean", "opd/reverse_kl_std", "opd/student_logprob_mean", "opd/teacher_logprob_mean",
            "reward/mean", "time/sample"},
    "losses": {"replay/ratio_mean", "replay/logratio_std", "clip_frac/ppo", "clip_frac/gspo", "grad_norm/cispo",
               "grad_norm/dapo_clip_higher"},
    "gspo": {"reward/mean", "reward/frac_degenerate", "train/tokens", "time/sample", "time/train"},
    "vision-grpo": {"reward/mean", "reward/frac_degenerate", "rollout/len_mean", "train/tokens", "time/sample",
                    "eval/accuracy", "eval/count/accuracy"},
    "vision-sft": {"loss/ce", "time/step", "time/trained", "eval/accuracy"},
    "spec-o3": {"reward/mean", "reward/frac_degenerate", "rollout/correct", "rollout/answered", "rollout/tool_calls",
                "train/tokens", "train/masked_tokens", "time/sample", "eval/macro_f1", "eval/cv/f1"},
    "spec-o3-sft": {"loss/ce", "time/step", "time/trained", "eval/macro_f1", "eval/tool_calls"},
    "search-r1-sft": {"loss/ce", "time/step", "time/trained", "eval/em", "eval/hop2/em", "eval/tool_calls"},
    "retool-sft": {"loss/ce", "time/step", "time/trained", "eval/correct", "eval/tool_calls", "eval/sandbox/calls"},
    "textworld-sft": {"loss/ce", "time/step", "time/trained", "eval/won", "eval/invalid_actions"},
    "opsd": {"opd/reverse_kl_mean", "opd/teacher_logprob_mean", "opsd/teacher_probe_logprob",
             "opsd/student_probe_logprob", "reward/mean"},
    "jev": {"loss/ce", "train/questions", "time/step", "eval/dev/accuracy", "eval/dev/ece"},
    "jev-sft": {"loss/ce", "time/step", "time/trained", "eval/dev/accuracy", "eval/dev/ece"},
    "opd-specialist": {"specialist/opd/reverse_kl_mean", "specialist/reward/mean", "specialist/loss/sum",
                       "train/specialist_step"},
    "search-r1": {"reward/mean", "reward/frac_degenerate", "rollout/turns", "rollout/no_tool_rate", "train/tokens",
                  "train/masked_tokens", "time/sample"},
    "retool": {"reward/mean", "rollout/reward", "rollout/no_tool_rate", "rollout/stop/answered", "sandbox/calls",
               "sandbox/ok", "sandbox/error", "sandbox/timeout", "sandbox/killed", "sandbox/latency_mean_s",
               "train/masked_tokens"},
    "textworld": {"reward/mean", "reward/frac_degenerate", "rollout/won", "rollout/steps", "rollout/invalid_actions",
                  "rollout/score", "rollout/turns", "train/tokens", "train/masked_tokens", "time/sample"},
    "agent-opsd": {"reward/mean", "rollout/won", "rollout/turns", "opsd/evidence_mean", "opsd/evidence_abs_mean",
                   "opsd/delta_b_abs_mean", "opsd/weight_min", "opsd/weight_max", "opsd/adv_multiplier_min",
                   "opsd/adv_multiplier_max", "opsd/teacher_tokens", "train/tokens", "train/masked_tokens"},
    "tempo": {"critic/abs_error_mean", "critic/value_corr", "critic/parse_failure_rate", "critic/endpoint_value_mean",
              "actor/segment_reward_mean", "actor/terminal_won_rate", "actor/macro_boundary_rate",
              "actor/degenerate_group_rate", "td/store_size", "td/new_endpoints", "td/fresh_states", "td/macro_index_mean",
              "env/steps", "reward/mean", "rollout/won", "train/datums", "train/tokens", "time/sample",
              "eval/critic/abs_error", "eval/critic/value_corr"},
}
LAST_STEP = {"opd-specialist": 10, "tempo": 4}
"""Chapters whose smoke run logs more than 2 steps (five 2-step stages; TEMPO's warm-up step, then TD steps
until one starts from a stored state)."""
EVALS = {
    "opd-specialist": {"base-general-0000", "sft-specialist-0002", "sft-sar-opd-general-0002", "idt-opd-general-0002",
                       "sft-idt-opd-specialist-0002", "stages", "summary"},
    "losses": {"summary"},  # the Loss Functions chapter replays a batch; it trains no policy to evaluate
    "jev": {"step-0000", "step-0002", "calibration", "stages", "summary"},  # base, trained, trained + T per split
    "jev-sft": {"step-0000", "step-0002", "stages", "summary"},
}
"""Evaluations a smoke run writes (default: the step-0 one and the summary)."""
MULTI_TURN = ("search-r1", "retool", "textworld", "agent-opsd", "tempo", "spec-o3")


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """smoke_run(chapter) -> (run folder, stdout, trace): each chapter's traced smoke run, made once."""
    out, done = tmp_path_factory.mktemp("smoke"), {}

    def get(chapter):
        if chapter not in done:
            res = smoke.run_smoke(chapter, out)
            assert res.returncode == 0, res.stderr[-3000:]
            trace = json.loads((out / chapter / "s.trace.json").read_text())
            done[chapter] = (RunDir.open(out / chapter / "s"), res.stdout, trace)
        return done[chapter]
    return get


def test_every_chapter_has_expected_step_keys():
    assert set(STEP_KEYS) == set(CHAPTERS)


@pytest.mark.parametrize("chapter", sorted(CHAPTERS))
def test_smoke_run_leaves_a_complete_run_folder(chapter, smoke_run):
    run, stdout, _ = smoke_run(chapter)
    for f in ("config.json", "metrics.jsonl", "report.html"):
        assert (run.path / f).is_file(), f
    steps = [m["step"] for m in run.read_metrics()]
    assert sorted(set(steps)) == list(range(LAST_STEP.get(chapter, 2) + 1)) and steps == sorted(steps)
    assert STEP_KEYS[chapter] <= set(next(m for m in run.read_metrics() if m["step"] == 1))
    assert EVALS.get(chapter, {"step-0000", "summary"}) <= set(run.eval_names())
    assert list(run.plots_dir.glob("*.png"))
    assert f"report: {run.report_file}" in stdout


@pytest.mark.parametrize("chapter", sorted(CHAPTERS))
def test_smoke_run_logs_the_expected_rows(chapter, smoke_run):
    """What a smoke run logs is pinned (tests/expected/smoke): a change that only moves code keeps it,
    one that means to change it regenerates it (`python tests/smoke.py --write CHAPTER`)."""
    run, _, _ = smoke_run(chapter)
    assert smoke.differences(smoke.comparable(run.read_metrics()), smoke.expected(chapter)) == []


@pytest.mark.parametrize("chapter", sorted(CHAPTERS))
def test_smoke_run_takes_gradient_steps(chapter, smoke_run):
    """The smoke preset trains (a run whose groups all tie would exercise no update at all)."""
    run, _, _ = smoke_run(chapter)
    assert max(m.get("train/datums", 0.0) for m in run.read_metrics()) > 0


def fields_read(trace: list, config_cls) -> set[str]:
    """Attribute names read as `cfg.X` / `config.X`, or `self.X` in a method of one of `config_cls`'s
    classes, by the functions a traced run executed (`validate` aside: a field that is only checked is
    not read)."""
    executed = defaultdict(set)
    for file, line, name in trace:
        executed[file].add((line, name))
    own = {c.__name__ for c in config_cls.__mro__}
    reads = set()
    for file, functions in executed.items():
        tree = ast.parse(Path(file).read_text())
        owners = {id(f): c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name == "validate":
                continue
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if (first, node.name) not in functions:
                continue
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load) and isinstance(sub.value, ast.Name):
                    if sub.value.id in ("cfg", "config") or (sub.value.id == "self" and owners.get(id(node)) in own):
                        reads.add(sub.attr)
    return reads


@pytest.mark.parametrize("chapter", sorted(CHAPTERS))
def test_help_lists_only_fields_the_chapter_reads(chapter, smoke_run):
    """Every field `arl run CHAPTER --help` lists is read on the chapter's code path (the functions its
    smoke run executed), so no field of another chapter leaks into its help."""
    _, _, trace = smoke_run(chapter)
    cls = load(chapter).Config
    unread = sorted(set(cls.__dataclass_fields__) - fields_read(trace, cls))
    assert unread == [], f"{chapter} --help lists fields its code never reads: {unread}"


def test_fields_read_sees_only_executed_functions():
    """The check above has teeth: reads in a function that did not run do not count."""
    from dataclasses import dataclass

    @dataclass
    class Probe:
        used: int = 0
        unused: int = 0

    source = Path(__file__)
    tree = ast.parse(source.read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_reads_used")
    assert fields_read([[str(source), fn.lineno, fn.name]], Probe) == {"used"}
    assert fields_read([], Probe) == set()


def _reads_used(cfg):
    return cfg.used


@pytest.mark.parametrize("chapter", MULTI_TURN)
def test_multi_turn_rows_and_their_token_page(chapter, smoke_run):
    run, _, _ = smoke_run(chapter)
    row = run.read_rollouts(1)[0]
    assert all(len(t["tokens"]) == len(t["source"]) == len(t["logprobs"]) for t in row["turns"])
    page = arl_cli("show", str(run.path))
    last = LAST_STEP.get(chapter, 2)  # `arl show` pages the last step
    assert page.returncode == 0 and (run.path / f"show-step-{last:04d}.html").is_file(), page.stderr[-3000:]


@pytest.mark.parametrize("chapter", ["opd", "opsd"])
def test_show_colours_each_token_by_its_own_advantage_in_distillation(chapter, smoke_run):
    """On-policy distillation logs one advantage per completion token: `arl show` draws each token with its own."""
    run, _, _ = smoke_run(chapter)
    row = run.read_rollouts(2)[0]
    assert isinstance(row["advantage"], list) and len(row["advantage"]) == len(row["tokens"])
    page = arl_cli("show", str(run.path), "--step", "2")
    assert page.returncode == 0, page.stderr[-3000:]
    html = (run.path / "show-step-0002.html").read_text()
    assert f"advantage {row['advantage'][0]:.3g}" in html and f"advantage {row['advantage'][-1]:.3g}" in html
    assert "advantage per token (mean" in html


def test_spec_o3_rows_name_the_prompt_and_tool_images(smoke_run):
    """A Spec-o3 episode that zoomed carries its full-view image and the tool's window, both stored in the
    run folder; the held-out evaluation reports the macro-F1 and each task's F1."""
    from arl.data import spectra

    run, _, _ = smoke_run("spec-o3")
    rows = [r for r in run.read_rollouts() if any(t.get("images") for t in r["turns"])]
    assert rows, "no smoke episode zoomed: the smoke preset no longer exercises the image-returning tool"
    row = rows[0]
    assert run.read_image(row["images"][0]).startswith(b"\x89PNG")
    turn = next(t for t in row["turns"] if t.get("images"))
    assert turn["source"].count("O") >= spectra.ZOOM_SIZE[0] * spectra.ZOOM_SIZE[1] // 28 // 28
    evaluation = run.read_eval("step-0002")
    assert 0.0 <= evaluation["macro_f1"] <= 1.0 and {f"{t}/f1" for t in spectra.TASKS} <= set(evaluation)


def test_grpo_rollout_rows(smoke_run):
    run, _, _ = smoke_run("grpo")
    row = run.read_rollouts(1)[0]
    assert len(row["tokens"]) == len(row["logprobs"]) and {"reward", "advantage", "completion"} <= set(row)


def test_jev_reliability_diagrams_and_decide(smoke_run):
    run, _, _ = smoke_run("jev")
    assert {f"reliability-{s}.png" for s in ("dev", "calibration", "test", "hard")} <= {p.name for p in run.plots_dir.glob("*.png")}
    decided = arl_cli("decide", str(run.path), str(ROOT / "docs/chapters/jev-record.json"))
    assert decided.returncode == 0, decided.stderr[-3000:]
    assert "p(yes)=" in decided.stdout and "E[score]=" in decided.stdout


def test_unknown_config_key_fails_before_work(tmp_path):
    out = arl_cli("run", "grpo", "--preset", "smoke", "--out", str(tmp_path), "lr=0.1")
    assert out.returncode == 2
    assert "unknown config key 'lr'" in out.stderr and "learning_rate" in out.stderr
    assert not (tmp_path / "grpo").exists()


def test_bad_values_name_the_field():
    grpo, opd_specialist = load("grpo"), load("opd-specialist")
    with pytest.raises(ValueError, match=r"group_size='abc': expected int"):
        config.resolve(grpo.Config, grpo.PRESETS, "smoke", ["group_size=abc"])
    with pytest.raises(ValueError, match="loss_fn='grpo'"):
        config.resolve(grpo.Config, grpo.PRESETS, "smoke", ["loss_fn=grpo"])
    with pytest.raises(ValueError, match="stages: 'sar-opd' starts from 'opd'; list 'opd' before it"):
        config.resolve(opd_specialist.Config, opd_specialist.PRESETS, "smoke", ["stages=sar-opd,opd"])
    with pytest.raises(ValueError, match="stages: unknown stage 'sft-opd'"):
        config.resolve(opd_specialist.Config, opd_specialist.PRESETS, "smoke", ["stages=sft-opd"])
    with pytest.raises(ValueError, match="--preset 'huge'"):
        config.resolve(grpo.Config, grpo.PRESETS, "huge", [])
    cfg = config.resolve(grpo.Config, grpo.PRESETS, "smoke", ["loss_fn=ppo", "tracker=none"])
    assert cfg.loss_fn == "ppo" and cfg.tracker is None and cfg.steps == 2


def test_search_r1_rejects_a_missing_corpus_before_work(tmp_path):
    search = load("search-r1")
    with pytest.raises(ValueError, match=r"data='nowhere': no corpus.jsonl, train.jsonl, test.jsonl there"):
        config.resolve(search.Config, search.PRESETS, "smoke", ["data=nowhere"])
    with pytest.raises(ValueError, match="max_observation_tokens=0: must be at least 1"):
        config.resolve(search.Config, search.PRESETS, "smoke", ["max_observation_tokens=0"])


def test_help_lists_every_field_with_its_doc():
    out = arl_cli("run", "grpo", "--help")
    assert out.returncode == 0
    grpo = load("grpo")
    for name in grpo.Config.__dataclass_fields__:
        assert f"  {name} = " in out.stdout
    assert "Policy loss: importance_sampling, ppo or cispo" in out.stdout


@pytest.mark.slow
def test_grpo_mini_preset_raises_held_out_accuracy_by_15_points(tmp_path):
    """The chapter's claim, end to end (about 8 minutes with a cold cold-start cache)."""
    out = arl_cli("run", "grpo", "--preset", "mini", "--out", str(tmp_path), "--name", "mini", timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = RunDir.open(tmp_path / "grpo" / "mini").read_eval("summary")
    assert summary["after"] - summary["before"] >= 0.15, summary


def test_opsd_teacher_weights_never_change(tmp_path):
    """The teacher is the frozen start weights: its logprob of a fixed probe is the same at every
    step, while the student's (same completion, its own prompt) moves as it trains."""
    out = arl_cli("run", "opsd", "--preset", "smoke", "--out", str(tmp_path), "--name", "s", "steps=3",
                  "learning_rate=1e-3")
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [m for m in RunDir.open(tmp_path / "opsd" / "s").read_metrics() if m["step"] > 0]
    teacher = [m["opsd/teacher_probe_logprob"] for m in rows]
    student = [m["opsd/student_probe_logprob"] for m in rows]
    assert len(teacher) == 3 and len(set(teacher)) == 1
    assert len(set(student)) == 3


def test_idt_schedule_visits_each_domain_in_its_ratio(tmp_path):
    """IDT-OPD with idt_ratio=2:1 over 6 steps: specialist, specialist, general, twice, each step
    logged under its domain's name (the cursors: tests/test_distill.py); `stages` trains only it."""
    out = arl_cli("run", "opd-specialist", "--preset", "smoke", "--out", str(tmp_path), "--name", "s",
                  "idt_ratio=2:1", "idt_steps=6", "stages=idt-opd")
    assert out.returncode == 0, out.stderr[-3000:]
    run = RunDir.open(tmp_path / "opd-specialist" / "s")
    idt = [m for m in run.read_metrics() if m["step"] > 0]
    assert {r["stage"] for r in json.loads((run.eval_dir / "stages.json").read_text())["rows"]} == {"base", "sft", "idt-opd"}
    assert [m["train/specialist_step"] for m in idt] == [1, 1, 0, 1, 1, 0]
    assert all(("specialist/opd/reverse_kl_mean" in m) == bool(m["train/specialist_step"]) for m in idt)


def test_vision_rows_name_their_images_and_show_draws_them(smoke_run):
    """A Vision GRPO row names its prompt image (stored once in the run folder, by content); `arl show`
    draws it beside the answer's tokens, for training steps and evaluations alike."""
    import base64
    import re

    from arl.data import figures

    run, _, _ = smoke_run("vision-grpo")
    rows = run.read_rollouts(1)
    cfg = run.config
    figs = {f.id: f for f in figures.make_split(cfg["n_train"], cfg["n_dev"], cfg["n_test"], size=cfg["image_size"],
                                                kinds=cfg["kinds"].split(","))[0]}
    for row in rows:
        (name,) = row["images"]
        assert run.read_image(name) == figs[row["figure"]].png()
    page = arl_cli("show", str(run.path), "--step", "1")
    assert page.returncode == 0, page.stderr[-3000:]
    html = (run.path / "show-step-0001.html").read_text()
    drawn = re.findall(r'<img src="data:image/png;base64,([^"]+)"', html)
    assert len(drawn) == len(rows) and {base64.b64decode(d) for d in drawn} == {run.read_image(r["images"][0]) for r in rows}
    assert html.count('class="tok A') >= sum(len(r["tokens"]) for r in rows)
    evaluated = arl_cli("show", str(run.path), "--eval", "step-0000")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert "re-tokenised" in (run.path / "show-eval-step-0000.html").read_text()


@pytest.mark.parametrize("chapter, override, message", [
    ("vision-grpo", "kinds=count,oops", "kinds='count,oops': use a comma-separated subset of count, relation"),
    ("vision-grpo", "kinds=", "kinds='': use a comma-separated subset"),
    ("spec-o3", "tasks=cv,xx", "tasks='cv,xx': use a comma-separated subset of cv, cc, ss, gm, wd"),
    ("spec-o3", "eval_split=train", "eval_split='train': use test (the reported results) or dev"),
])
def test_multimodal_configs_name_the_bad_field(chapter, override, message):
    recipe = load(chapter)
    with pytest.raises(ValueError, match=re.escape(message)):
        config.resolve(recipe.Config, recipe.PRESETS, "mini", [override])


@pytest.mark.parametrize("chapter", sorted(CHAPTERS))
def test_audit_answers_the_four_questions_from_the_run(chapter, smoke_run):
    """`arl audit` on the chapter's smoke run: every answer is drawn from that run (its rollouts, metrics, config
    and evaluation), and the same answers end its report.html."""
    from arl.audit import SIGNALS, audit

    run, _, _ = smoke_run(chapter)
    a = audit(run, load(chapter))
    assert SIGNALS[chapter].source in a.reward[0]
    rollouts = [json.loads(line) for line in run.rollouts_file.read_text().splitlines()] if run.rollouts_file.is_file() else []
    scored = [r for r in rollouts if isinstance(r.get("reward"), (int, float))]
    assert (f"- {len(scored)} scored samples;" in a.reward[1]) if scored else "no scored samples" in a.reward[1]
    metrics = run.read_metrics()
    for key in ("train/tokens", "train/datums", "train/questions"):
        values = [m[key] for m in metrics if key in m]
        if values:
            assert any(f"(`{key}`, summed over" in line and line.endswith(f": {sum(values):.0f}") for line in a.tokens), key
    if rollouts and "train/tokens" in metrics[1] and all("advantage" in r for r in rollouts):
        # the tokens the rollouts say were trained are the tokens the trainer counted
        trained = next(line for line in a.tokens if "with a non-zero advantage:" in line)
        total = sum(m.get("train/tokens", 0) for m in metrics)
        if any(k.startswith("critic/") for k in metrics[1]):  # TEMPO's update also trains its critic's answers
            assert 0 <= int(trained.rsplit(": ", 1)[1]) <= total and "critic's value answers" in "".join(a.tokens)
        else:
            assert trained.endswith(f": {total:.0f}"), trained
    assert a.change[0].startswith("- Nearest preset: `smoke`; against it: no field differs")
    names = sorted(n for n in run.eval_names() if n.startswith("step-"))
    items = next((run.read_eval(n)["items"] for n in reversed(names) if run.read_eval(n).get("items")), None)
    assert any(line.startswith(f"- Held-out items: {len(items)};") for line in a.controls) if items else \
        any("lists no items" in line for line in a.controls)
    assert '<section id="audit">' in run.report_file.read_text()


def test_audit_names_the_fields_a_run_changed(smoke_run, tmp_path):
    from arl.audit import audit

    run, _, _ = smoke_run("grpo")
    copy = tmp_path / "grpo" / "changed"
    shutil.copytree(run.path, copy, ignore=shutil.ignore_patterns("checkpoints"))
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "learning_rate": 0.5}))
    changed = RunDir.open(copy)
    assert f"`learning_rate`: {config['learning_rate']!r} -> 0.5" in audit(changed, load("grpo")).change[0]
    assert audit(changed, load("grpo"), baseline=run).change[0] == f"- Against the baseline run {run.path}: `learning_rate`: " \
        f"{config['learning_rate']!r} -> 0.5."
