"""`arl compare`: the statistics by hand, the plan (validation before work, extension, resume), and a
smoke comparison of 2 arms x 2 seeds that writes the report."""

import json
import math

import pytest

from arl import config
from arl.eval.stats import bootstrap_ci, mean_band, paired_verdict
from arl.recipes import load
from arl.track.compare import Plan, parse_vary

from test_recipes import arl_cli

GRPO = load("grpo")


PAIRS = {"ref": None, "b": "ref"}
"""The partners of the two-arm plans of the item-verdict tests: b against ref."""


def resolve_grpo(preset, overrides):
    return config.resolve(GRPO.Config, GRPO.PRESETS, preset, overrides)


def test_mean_band_by_hand():
    mean, half = mean_band([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.303 * 1.0 / math.sqrt(3))
    assert mean_band([5.0]) == (5.0, 0.0)


def test_bootstrap_of_equal_differences_is_a_point():
    assert bootstrap_ci([0.1, 0.1, 0.1]) == pytest.approx((0.1, 0.1, 0.1))
    mean, lo, hi = bootstrap_ci([0.0, 0.1, 0.2])
    assert mean == pytest.approx(0.1) and 0.0 <= lo < 0.1 < hi <= 0.2 + 1e-12


def test_verdicts_in_plain_language():
    assert "identical" in paired_verdict("a", [0.5, 0.6], "b", [0.5, 0.6], "accuracy").text
    v = paired_verdict("a", [0.50, 0.60, 0.55], "b", [0.60, 0.70, 0.66], "accuracy")
    assert v.text.startswith("b higher than a by 10.3") and v.low > 0
    v = paired_verdict("a", [0.50, 0.60, 0.55], "b", [0.55, 0.55, 0.56], "accuracy")
    assert v.text.startswith("no detectable difference in accuracy at 3 seeds")


def test_vary_makes_one_arm_per_value():
    arms = parse_vary(["loss_fn=importance_sampling,ppo", "normalizer=constant"])
    assert [a.overrides for a in arms] == [{"loss_fn": "importance_sampling"}, {"loss_fn": "ppo"}, {"normalizer": "constant"}]
    assert arms[0].slug == "loss_fn-importance_sampling"
    with pytest.raises(ValueError, match="key=value1,value2"):
        parse_vary(["loss_fn"])


def test_a_bad_arm_fails_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="arm loss_fn=grpo: loss_fn='grpo'"):
        Plan.create(tmp_path / "c", "grpo", "smoke", {}, parse_vary(["loss_fn=ppo,grpo"]), [0], resolve_grpo)
    with pytest.raises(ValueError, match="unknown config key 'lr'"):
        Plan.create(tmp_path / "c", "grpo", "smoke", {"lr": "1"}, parse_vary(["loss_fn=ppo,cispo"]), [0], resolve_grpo)
    assert not (tmp_path / "c").exists()


def test_plan_extends_and_refuses_another_setting(tmp_path):
    plan = Plan.create(tmp_path, "grpo", "smoke", {}, parse_vary(["loss_fn=ppo,cispo"]), [0, 1], resolve_grpo)
    plan = Plan.create(tmp_path, "grpo", "smoke", {}, parse_vary(["loss_fn=ppo,importance_sampling"]), [0, 1, 2], resolve_grpo)
    assert [a.name for a in plan.arms] == ["loss_fn=ppo", "loss_fn=cispo", "loss_fn=importance_sampling"]
    assert plan.seeds == [0, 1, 2] and Plan.open(tmp_path).seeds == [0, 1, 2]
    with pytest.raises(ValueError, match="choose another --out"):
        Plan.create(tmp_path, "grpo", "smoke", {"steps": "3"}, parse_vary(["loss_fn=ppo,cispo"]), [0], resolve_grpo)
    # an unfinished run is resumed, a new one started
    arm = plan.arms[0]
    assert "--preset" in plan.command(arm, 0, threads=1)
    plan.run_dir(arm, 0).mkdir(parents=True)
    (plan.run_dir(arm, 0) / "config.json").write_text("{}")
    assert plan.command(arm, 0, threads=1)[-2:] == ["--resume", str(plan.run_dir(arm, 0))]


def test_smoke_comparison_writes_the_report_and_extends(tmp_path):
    out = tmp_path / "cmp"
    res = arl_cli("compare", "grpo", "--preset", "smoke", "--vary", "loss_fn=importance_sampling,cispo",
                  "--seeds", "2", "--out", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    for f in ("report.html", "report.md", "results.json", "plots/eval.png", "plots/reward.png"):
        assert (out / f).is_file(), f
    md = (out / "report.md").read_text()
    assert md.index("## Which variable changed") < md.index("## Which conclusions still need stronger controls")
    assert "| loss_fn | importance_sampling | cispo |" in md
    assert "every run is evaluated on the same 8 held-out items" in md
    assert "**loss_fn=cispo = loss_fn=importance_sampling**" in md and "identical logged metrics at every seed" in md
    assert "2 seeds per arm" in md
    results = json.loads((out / "results.json").read_text())
    assert results["problems"] == [] and len(results["verdicts"]) == 3
    assert [a["partner"] for a in results["arms"]] == [None, "loss_fn=importance_sampling"]
    assert "## Compute ledger" in md and "| loss_fn=cispo | 16 |" in md  # samples drawn: 2 steps x 2 prompts x 4
    assert "(seeds and items resampled: 2 seeds x 8 items)" in md
    # one more seed: only the two new runs are made
    res = arl_cli("compare", "grpo", "--preset", "smoke", "--vary", "loss_fn=importance_sampling,cispo",
                  "--seeds", "3", "--out", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    assert sorted(p.name for p in (out / "logs").iterdir()) == sorted(
        f"loss_fn-{loss}-seed{s}.log" for loss in ("importance_sampling", "cispo") for s in range(3))
    assert json.loads((out / "results.json").read_text())["arms"][0]["finished_seeds"] == [0, 1, 2]
    # the folder alone is enough to resume or re-report it
    res = arl_cli("compare", "grpo", "--out", str(out), "--report-only")
    assert res.returncode == 0 and "3 seeds" not in res.stderr and "(2 arms x 3 seeds)" in res.stdout
    assert arl_cli("compare", "dapo", "--out", str(out), "--report-only").returncode == 2


def test_compare_rejects_bad_input_before_work(tmp_path):
    res = arl_cli("compare", "grpo", "--preset", "smoke", "--vary", "loss_fn=ppo,oops", "--out", str(tmp_path / "x"))
    assert res.returncode == 2 and "arm loss_fn=oops" in res.stderr
    assert not (tmp_path / "x").exists()


def test_seed_replicates_of_a_multi_stage_chapter(tmp_path):
    """No --vary: one arm over the seeds; a multi-stage chapter's report gets its stage table and trade-off plot."""
    assert [a.name for a in parse_vary([])] == ["preset"]
    out = tmp_path / "reps"
    res = arl_cli("compare", "opd-specialist", "--preset", "smoke", "--seeds", "2", "--out", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    md = (out / "report.md").read_text()
    assert "seed replicates (no variable changed)" in md
    assert "## Every stage and checkpoint: preset" in md
    assert "| sar-opd | 2 | 2 |" in md  # stage, step, seeds
    assert (out / "plots" / "tradeoff-preset.png").is_file()


def test_verdicts_paired_by_item_average_seeds_then_bootstrap_items():
    from types import SimpleNamespace

    from arl.report.compare import _item_verdicts
    from arl.track.compare import Arm

    def run(won):  # a finished run whose final evaluation has one episode per held-out game
        items = [{"metrics": {"won": 1.0} if w else {}} for w in won]  # as TextWorld: an unfinished episode has no `won`
        return SimpleNamespace(eval_names=lambda: ["step-0000", "step-0004", "summary"],
                               read_eval=lambda name: {"items": items} if name == "step-0004" else {})
    plan = SimpleNamespace(arms=[Arm("ref", {}), Arm("b", {})], seeds=[0, 1])
    runs = {"ref": {0: run([0, 0, 1, 1]), 1: run([0, 1, 1, 0])}, "b": {0: run([1, 0, 1, 1]), 1: run([1, 1, 1, 0])}}
    v = _item_verdicts(plan, runs, "won", PAIRS)["b vs ref: won"]
    # item differences averaged over the 2 seeds: [1, 0, 0, 0] -> mean 0.25
    assert v["mean"] == 0.25 and (v["n_items"], v["n_seeds"]) == (4, 2)
    assert v["low"] == 0.0 and v["high"] == 0.75  # bootstrap over 4 items: 0 to 3 of them are the winning one
    # sd of [1, 0, 0, 0] is 0.5: ((1.96 + 0.8416) x 0.5 / 0.25)^2 = 31.4 -> 32 items; the seeds' differences tie: None
    assert v["items_needed"] == 32 and v["seeds_needed"] is None
    assert _item_verdicts(plan, runs, "em", PAIRS) == {}  # no per-item value of that key: no verdict


def test_headline_accuracy_pairs_the_items_rewards():
    """`evaluate` reports accuracy as the mean of its items' `reward`: those are the values paired by item."""
    from types import SimpleNamespace

    from arl.report.compare import _item_verdicts
    from arl.track.compare import Arm

    def run(rewards):
        items = [{"completion": "\\boxed{A}", "reward": r} for r in rewards]
        return SimpleNamespace(eval_names=lambda: ["step-0010"], read_eval=lambda name: {"items": items})
    plan = SimpleNamespace(arms=[Arm("ref", {}), Arm("b", {})], seeds=[0])
    v = _item_verdicts(plan, {"ref": {0: run([0.0, 1.0, 0.0, 0.0])}, "b": {0: run([1.0, 1.0, 1.0, 0.0])}}, "accuracy", PAIRS)
    assert v["b vs ref: accuracy"]["mean"] == 0.5 and v["b vs ref: accuracy"]["n_items"] == 4
