"""`arl compare`'s statistics (issue 22): each arm paired with its one-switch partner, the compute
ledger and its warning, the paired hierarchical bootstrap on hand-made examples whose interval is known,
and the minimum detectable difference."""

import dataclasses
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest
from test_recipes import arl_cli

from arl import config
from arl.eval.stats import hierarchical_bootstrap, min_detectable_difference
from arl.recipes import load
from arl.report.compare import (
    EQUAL_COMPUTE,
    _cautions,
    _item_verdicts,
    ledger_of,
    ledger_warnings,
    matched_steps,
    verdict_line,
)
from arl.rollout import forward_tokens
from arl.track.compare import Plan, pair_arms, parse_vary


@dataclass
class Toy:
    a: str = "x"
    b: str = "w"
    seed: int = 0


def toy_resolver(defaults):
    return lambda preset, overrides: config.resolve(Toy, {"p": defaults}, preset, overrides)


def test_two_by_two_vary_pairs_each_arm_with_its_one_switch_partner(tmp_path):
    # a's first value is its preset value: arm a=x is the preset, the baseline of every switch
    plan = Plan.create(tmp_path / "c", "toy", "p", {}, parse_vary(["a=x,y", "b=u,v"]), [0], toy_resolver({}))
    assert plan.partners() == {"a=x": None, "a=y": "a=x", "b=u": "a=x", "b=v": "a=x"}
    # no arm is the preset: b=u differs from every earlier arm in a and b, so it has no partner; b=v pairs with b=u
    plan = Plan.create(tmp_path / "d", "toy", "p", {}, parse_vary(["a=x,y", "b=u,v"]), [0], toy_resolver({"a": "x0"}))
    assert plan.partners() == {"a=x": None, "a=y": "a=x", "b=u": None, "b=v": "b=u"}


def test_gspo_minibatches_arm_is_paired_with_the_arm_differing_only_in_minibatches(tmp_path):
    """The issue's case: `--vary ratio_level=token,sequence --vary minibatches=1` compared minibatches=1
    (sequence level, 1 mini-batch) with ratio_level=token (token level, 4 mini-batches): two fields."""
    gspo = load("gspo")
    plan = Plan.create(tmp_path / "g", "gspo", "mini", {}, parse_vary(["ratio_level=token,sequence", "minibatches=1"]),
                       [0], lambda preset, o: config.resolve(gspo.Config, gspo.PRESETS, preset, o))
    assert plan.partners() == {"ratio_level=token": None, "ratio_level=sequence": "ratio_level=token",
                               "minibatches=1": "ratio_level=sequence"}


def test_pair_arms_ignores_seed_and_needs_a_difference():
    arms = parse_vary(["a=x,x2"])
    configs = {"a=x": {"a": "x", "seed": 0}, "a=x2": {"a": "x", "seed": 1}}  # the same config: no switch to compare
    assert pair_arms(arms, configs) == {"a=x": None, "a=x2": None}


def test_ledger_sums_logged_compute_and_says_what_is_not_logged():
    rows = {0: [{"step": 1, "train/datums": 8.0, "train/tokens": 100.0, "time/step": 1.0, "sampling/candidate_groups": 3.0},
                {"step": 2, "train/datums": 6.0, "train/tokens": 90.0, "time/step": 2.0, "sampling/candidate_groups": 2.0}],
            1: [{"step": 1, "train/datums": 4.0, "train/tokens": 50.0, "time/step": 3.0}]}
    ledger = ledger_of(rows, {0: {"group_size": 4}, 1: {"group_size": 4}})
    assert ledger == {"samples drawn": 20.0, "completions trained": 9.0, "tokens trained": 120.0,
                      "teacher forward tokens": None, "critic forward tokens": None, "wall time (s)": 3.0,
                      "teacher training (s)": None}


def test_ledger_counts_the_teacher_training_against_opd_and_warns_against_its_reward_control():
    opd = {0: [{"step": 0, "time/teacher_sft": 300.0}, {"step": 1, "train/datums": 8.0, "time/step": 2.0}]}
    control = {0: [{"step": 0, "time/teacher_sft": 0.0}, {"step": 1, "train/datums": 8.0, "time/step": 2.0}]}
    ledger = {"signal=teacher": ledger_of(opd, {0: {}}), "signal=reward": ledger_of(control, {0: {}})}
    assert ledger["signal=teacher"]["teacher training (s)"] == 300.0 and ledger["signal=teacher"]["wall time (s)"] == 2.0
    warnings = ledger_warnings(ledger, {"signal=teacher": None, "signal=reward": "signal=teacher"},
                               {"signal=teacher": 25, "signal=reward": 25})
    assert warnings == ["signal=reward and its partner signal=teacher differ in teacher training (s): 0 against 300 (-100%); "
                        "the difference between them is not the switch alone"]


def test_ledger_counts_samples_drawn_from_the_config_without_dynamic_sampling():
    rows = {0: [{"step": 1, "train/datums": 8.0}, {"step": 2, "train/datums": 0.0}, {"step": 2, "eval/accuracy": 0.5}],
            1: [{"step": 1, "specialist/train/datums": 3.0, "teacher/forward_tokens": 40.0}]}
    ledger = ledger_of(rows, {0: {"batch_prompts": 2, "group_size": 4}, 1: {"batch_prompts": 2, "group_size": 4}})
    assert ledger["samples drawn"] == (2 * 8 + 1 * 8) / 2  # trained steps x batch_prompts x group_size, mean over seeds
    assert ledger["teacher forward tokens"] == 40.0


def test_forward_tokens_reads_each_prompt_once_and_every_completion_token():
    # prompt 1 (3 tokens) with completions of 2 and 1 tokens; prompt 2 (1 token) with one of 3
    assert forward_tokens([[1, 2, 3], [4]], [[[5, 6], [7]], [[8, 9, 10]]]) == 3 + 2 + 1 + 1 + 3


def test_ledger_warns_when_partners_differ_by_more_than_ten_percent():
    base = {"samples drawn": None, "completions trained": 100.0, "tokens trained": 1000.0,
            "teacher forward tokens": None, "critic forward tokens": None, "wall time (s)": 10.0, "teacher training (s)": None}
    ledger = {"ref": base, "dyn": {**base, "completions trained": 129.0, "wall time (s)": 10.9},
              "other": {**base, "tokens trained": 1200.0}}
    warnings = ledger_warnings(ledger, {"ref": None, "dyn": "ref", "other": None}, {"ref": 25, "dyn": 25, "other": 25})
    # wall time is 9% apart (within 10%); other has no partner; dyn's 129 completions in 25 steps: 100 in round(19.4) = 19
    assert warnings == ["dyn and its partner ref differ in completions trained: 129 against 100 (+29%); the difference "
                        "between them is not the switch alone; steps=19 for dyn would match at its per-step rate"]
    res = {"arms": [], "verdicts": {}, "eval_items": None, "same_update": [], "ledger_warnings": warnings}
    assert any(c.startswith("**Unequal compute:** 1 ledger column(s) differ by more than 10%") for c in _cautions(res))


def test_constant_difference_is_a_zero_width_interval_at_that_value():
    mean, low, high, se = hierarchical_bootstrap(np.full((3, 5), 0.2))
    assert (mean, low, high) == pytest.approx((0.2, 0.2, 0.2)) and se == pytest.approx(0.0, abs=1e-12)


def test_identical_seeds_reduce_to_the_item_bootstrap():
    """One item of 4 differs by 1: the resampled mean is Binomial(4, 1/4) / 4, P(0) = 0.32 and
    P(<= 2) = 0.95 < 0.975 <= P(<= 3), so the 95% interval is [0, 0.75] and the se sqrt(1/4 x 3/4 / 4) = 0.2165."""
    one = hierarchical_bootstrap([[1, 0, 0, 0]], n_boot=20_000, seed=3)
    assert one[:3] == (0.25, 0.0, 0.75) and one[3] == pytest.approx(0.2165, abs=0.004)
    assert hierarchical_bootstrap([[1, 0, 0, 0]] * 3, n_boot=20_000, seed=3) == pytest.approx(one)


def test_identical_items_reduce_to_the_seed_bootstrap():
    """Two seeds differing by 0 and 1 on every item: the resampled mean is 0, 1/2, 1 with probability
    1/4, 1/2, 1/4, so the interval is [0, 1] and the se sqrt(1/8) = 0.354."""
    mean, low, high, se = hierarchical_bootstrap([[0.0] * 4, [1.0] * 4], n_boot=20_000, seed=1)
    assert (mean, low, high) == (0.5, 0.0, 1.0) and se == pytest.approx(0.3536, abs=0.005)


def test_symmetric_differences_centre_the_interval_on_zero():
    mean, low, high, se = hierarchical_bootstrap([[1.0, -1.0, 0.5, -0.5], [-1.0, 1.0, -0.5, 0.5]], n_boot=20_000)
    assert mean == 0.0 and low == pytest.approx(-high) and low < 0 < high and se > 0
    with pytest.raises(ValueError, match="seeds x items"):
        hierarchical_bootstrap([1.0, 2.0])


def test_minimum_detectable_difference_by_hand():
    assert min_detectable_difference(0.05) == pytest.approx(0.14)  # (1.96 + 0.84) x 0.05
    # the item example above: se 0.2165 -> MDD 2.8 x 0.2165 = 0.606
    assert min_detectable_difference(hierarchical_bootstrap([[1, 0, 0, 0]], n_boot=20_000)[3]) == pytest.approx(0.606, abs=0.012)


def test_an_unresolved_verdict_states_its_interval_and_minimum_detectable_difference():
    def run(values):
        items = [{"reward": v} for v in values]
        return SimpleNamespace(eval_names=lambda: ["step-0004"], read_eval=lambda name: {"items": items})
    plan = SimpleNamespace(arms=parse_vary(["k=ref,b"]), seeds=[0, 1])
    runs = {"k=ref": {0: run([0, 1, 0, 1]), 1: run([1, 0, 0, 1])}, "k=b": {0: run([1, 1, 0, 1]), 1: run([1, 1, 0, 0])}}
    v = _item_verdicts(plan, runs, "accuracy", {"k=ref": None, "k=b": "k=ref"})["k=b vs k=ref: accuracy"]
    # diff_SI = [[1, 0, 0, 0], [0, 1, 0, -1]]: mean 1/8
    assert v["mean"] == 0.125 and (v["n_seeds"], v["n_items"]) == (2, 4) and v["low"] <= 0 <= v["high"]
    assert v["mdd"] == pytest.approx(2.8 * v["se"])
    line = verdict_line("k=b vs k=ref: accuracy", v)
    assert "(seeds and items resampled: 2 seeds x 4 items): not resolved" in line
    assert f"minimum detectable difference {100 * v['mdd']:.1f} points (80% power, alpha 0.05)" in line
    assert verdict_line("x", {**v, "mean": 0.0, "low": 0.0, "high": 0.0}).endswith("no difference on any seed or item")


def test_equal_compute_matches_each_arm_to_its_partner_at_its_own_rate():
    base = {col: None for col in EQUAL_COMPUTE.values()}
    ledger = {"ref": {**base, "completions trained": 100.0}, "dyn": {**base, "completions trained": 129.0},
              "near": {**base, "completions trained": 105.0}, "lone": {**base, "completions trained": 50.0}}
    partners = {"ref": None, "dyn": "ref", "near": "ref", "lone": None}
    steps = {"ref": 25, "dyn": 25, "near": 25, "lone": 25}
    # dyn: 129 completions in 25 steps, 100 in round(25 x 100 / 129) = 19; near is within 10%; lone has no partner
    assert matched_steps(ledger, partners, steps, "completions trained") == {"dyn": 19}
    with pytest.raises(ValueError, match="no run of dyn logs teacher forward tokens"):
        matched_steps(ledger, partners, steps, "teacher forward tokens")


def test_equal_compute_takes_only_a_ledger_column():
    res = arl_cli("compare", "grpo", "--preset", "smoke", "--vary", "group_size=4,2", "--equal-compute", "flops")
    assert res.returncode == 2 and "invalid choice: 'flops'" in res.stderr
    for key in EQUAL_COMPUTE:
        assert key in res.stderr


@dataclass
class ToyWithStart(Toy):
    start_seed: int = 0


def test_start_per_seed_gives_every_run_its_own_cold_start_seed(tmp_path):
    resolve = lambda preset, overrides: config.resolve(ToyWithStart, {"p": {}}, preset, overrides)  # noqa: E731
    plan = Plan.create(tmp_path / "c", "toy", "p", {}, parse_vary(["a=x,y"]), [0, 1], resolve, ["start_seed"])
    assert [plan.config(arm, s).start_seed for arm in plan.arms for s in plan.seeds] == [0, 1, 0, 1]
    assert plan.partners() == {"a=x": None, "a=y": "a=x"}  # the same start_seed at a seed: not a difference
    assert Plan.open(tmp_path / "c", resolve).per_seed == ["start_seed"]
    with pytest.raises(ValueError, match="--start-per-seed"):  # extending it without the flag would mix the two
        Plan.create(tmp_path / "c", "toy", "p", {}, parse_vary(["a=x,y"]), [0, 1], resolve)
    with pytest.raises(ValueError, match="start_seed is set to each run's seed"):
        Plan.create(tmp_path / "d", "toy", "p", {}, parse_vary(["start_seed=1,2"]), [0], resolve, ["start_seed"])


def test_a_cold_start_per_seed_is_another_cache_entry_and_seed_0_is_the_shared_one():
    grpo = load("grpo")
    shared, own = (config.resolve(grpo.Config, grpo.PRESETS, "mini", {"start_seed": s}).cold_start() for s in (0, 1))
    assert (own.seed, own.data_seed) == (1, 1)
    assert dataclasses.replace(own, seed=0, data_seed=0) == shared  # the seeds alone tell the cache entries apart
    assert (shared.seed, shared.data_seed) == (0, 0)  # start_seed=0: the key every earlier run cached


def test_the_report_says_when_every_seed_shares_one_cold_start_and_when_it_read_dev():
    res = {"arms": [{"finished_seeds": [0, 1, 2, 3, 4]}], "verdicts": {}, "eval_items": None, "same_update": [],
           "ledger_warnings": [], "cold_start": {"per_seed": False, "shared": True}, "eval_split": ["dev"]}
    cautions = _cautions(res)
    assert any(c.startswith("**One cold start for every seed.**") and "--start-per-seed" in c for c in cautions)
    assert any(c.startswith("**Dev split.**") for c in cautions)
    res.update(cold_start={"per_seed": True, "shared": False}, eval_split=["test"])
    assert _cautions(res) == []
