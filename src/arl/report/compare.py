"""The report of an `arl compare` folder: `report.md`, `report.html`, `results.json` and `plots/`.

It opens with two of the learning path's questions for this comparison: which variable changed (the
config diff between arms, and checks that nothing else did: data order, eval items, budgets) and
which conclusions still need stronger controls. Then: arms that make the same update (by
the chapter's `same_update`, a numerical check of their gradients), held-out results per arm, a compute
ledger (with a warning where an arm and its partner differ by more than 10%), verdicts of each arm
against its one-switch partner (`Plan.partners`) with intervals that resample seeds and held-out items
(`hierarchical_bootstrap`) and, where unresolved, the minimum detectable difference, and every metric's
curve with a 95% band across seeds.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..eval.stats import hierarchical_bootstrap, items_to_resolve, mean_band, min_detectable_difference, paired_verdict
from ..track import _io
from ..track.compare import IGNORED_DIFF, Arm, Plan
from ..track.rundir import RunDir
from .html import CSS, _table
from .plots import COLORS, STYLE, _safe_name, group_of, is_noisy, moving_average, panel_grid, png_bytes, series
from .stages import format_rows, plot_tradeoff, stage_rows

SameUpdate = Callable[[object, object], bool]
"""A chapter's `same_update(cfg_a, cfg_b)`: whether two arms' configs make the same update."""


def _runs(plan: Plan) -> dict[str, dict[int, RunDir]]:
    return {a.name: {s: RunDir.open(plan.run_dir(a, s)) for s in plan.seeds if plan.finished(a, s)} for a in plan.arms}


def _final(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if key in r]
    return vals[-1] if vals else None


def _eval_keys(rows_by_run: list[list[dict]]) -> list[str]:
    keys: list[str] = []
    for rows in rows_by_run:
        for r in rows:
            keys += [k for k in r if k.startswith("eval/") and k not in keys]
    return keys


def _config_diff(plan: Plan, runs) -> tuple[list[dict], list[str]]:
    """(rows key -> value per arm for the keys that differ, problems: other differences between arms)."""
    configs = {arm: {s: r.config for s, r in by_seed.items()} for arm, by_seed in runs.items()}
    any_cfg = {arm: next(iter(c.values())) for arm, c in configs.items() if c}
    keys = sorted({k for c in any_cfg.values() for k in c} - set(IGNORED_DIFF))
    varied = {k for a in plan.arms for k in a.overrides}
    rows, problems = [], []
    for k in keys:
        values = {arm: c.get(k) for arm, c in any_cfg.items()}
        if len({json.dumps(v) for v in values.values()}) > 1:
            rows.append({"config key": k, **{arm: v for arm, v in values.items()}})
            if k not in varied:
                problems.append(f"`{k}` differs between arms although it is not varied: {values}")
    for arm, by_seed in configs.items():  # within an arm only the seed may change
        for k in keys:
            if len({json.dumps(c.get(k)) for c in by_seed.values()}) > 1:
                problems.append(f"arm {arm}: `{k}` differs between its seeds")
    return rows, problems


def _same_inputs(plan: Plan, runs) -> tuple[list[str], list[str]]:
    """(checks passed, problems): the held-out items and the training prompt stream of each seed must
    be the same in every arm."""
    ok, problems = [], []
    items: dict[str, str] = {}
    for arm, by_seed in runs.items():
        for seed, run in by_seed.items():
            first = min((n for n in run.eval_names() if n.startswith("step-")), default=None)
            if first:
                items[f"{arm} seed {seed}"] = json.dumps([it.get("answer") for it in run.read_eval(first).get("items", [])])
    if items:
        if len(set(items.values())) == 1:
            n = len(json.loads(next(iter(items.values()))))
            ok.append(f"every run is evaluated on the same {n} held-out items, in the same order")
        else:
            problems.append("the held-out items differ between runs: " + ", ".join(sorted(items)))
    for seed in plan.seeds:
        streams = {}
        for arm, by_seed in runs.items():
            if seed in by_seed:
                run = by_seed[seed]
                # a step's own prompts are its first batch_prompts groups; refills (dynamic sampling) come after
                n = run.config.get("batch_prompts", 0) * run.config.get("group_size", 0) or None
                streams[arm] = json.dumps([r.get("prompt") for r in run.read_rollouts(1)[:n]])
        if len(streams) > 1:
            if len(set(streams.values())) == 1:
                ok.append(f"seed {seed}: the first step's prompts are the same in every arm, in the same order")
            else:
                problems.append(f"seed {seed}: the first step's prompts differ between arms (data order changed)")
    return ok, problems


def _equivalences(plan: Plan, runs, same: SameUpdate | None) -> list[dict]:
    """Pairs of arms that make the same update (the chapter's `same_update`), and whether their runs agree."""
    if same is None:
        return []
    out = []
    for i, a in enumerate(plan.arms):
        for b in plan.arms[i + 1:]:
            if not same(plan.config(a, plan.seeds[0]), plan.config(b, plan.seeds[0])):
                continue
            gaps = []
            for seed in plan.seeds:
                ra, rb = runs[a.name].get(seed), runs[b.name].get(seed)
                if ra and rb:
                    gaps.append(_max_gap(ra.read_metrics(), rb.read_metrics()))
            out.append({"a": a.name, "b": b.name, "observed_max_gap": max(gaps) if gaps else None})
    return out


NOT_UPDATE = ("time/", "loss/", "ratio/", "gspo/")
"""Logged values that are not the update: timings, and the value of the objective and its statistics,
which differ between losses whose gradients agree (cispo's loss is not importance_sampling's)."""


def _max_gap(rows_a: list[dict], rows_b: list[dict]) -> float:
    """Largest difference between two runs' logged values that follow from the updates (`NOT_UPDATE` excluded)."""
    by_step = {r["step"]: r for r in rows_b}
    gap = 0.0
    for r in rows_a:
        other = by_step.get(r["step"], {})
        for k, v in r.items():
            if k != "step" and not k.startswith(NOT_UPDATE) and k in other and isinstance(v, (int, float)):
                gap = max(gap, abs(v - other[k]))
    return gap


def _curve_plots(runs, rows, out_dir: Path) -> list[Path]:
    from matplotlib import rc_context
    from matplotlib.ticker import FuncFormatter

    keys: list[str] = []
    for by_seed in rows.values():
        for rs in by_seed.values():
            for r in rs:
                keys += [k for k in r if k != "step" and k not in keys]
    groups: dict[str, list[str]] = {}
    for k in keys:
        groups.setdefault(group_of(k), []).append(k)
    written = []
    for group, gkeys in groups.items():
        with rc_context(STYLE):
            fig, axes = panel_grid(len(gkeys), 3.4, 2.6)
            for ax, key in zip(axes, gkeys):
                for i, arm in enumerate(runs):
                    x, mean, half = _band(rows[arm], key)
                    if not len(x):
                        continue
                    color = COLORS[i % len(COLORS)]
                    ax.plot(x, mean, color=color, linewidth=1.5, label=arm, marker="o" if len(x) <= 12 else None,
                            markersize=3)
                    ax.fill_between(x, mean - half, mean + half, color=color, alpha=0.15, linewidth=0)
                ax.set_title(key, loc="left")
                ax.set_xlabel("step")
                ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.4g}"))
            axes[0].legend(loc="best", fontsize=7, frameon=False)
            data = png_bytes(fig)
        path = out_dir / f"{_safe_name(group)}.png"
        _io.atomic_write_bytes(path, data)
        written.append(path)
    return written


def _band(rows_by_seed: dict[int, list[dict]], key: str):
    """(steps, mean, 95% half-width) across seeds at the steps every seed logged; noisy per-step
    curves are smoothed per seed first (a centred moving average), so the band shows seed spread."""
    per_seed = {}
    for seed, rows in rows_by_seed.items():
        x, y = series(rows, key)
        if len(x):
            if is_noisy(y):
                y = moving_average(y, max(3, min(31, len(y) // 10)) | 1)
            per_seed[seed] = dict(zip(x.tolist(), y.tolist()))
    if not per_seed:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    steps = sorted(set.intersection(*(set(d) for d in per_seed.values())))
    stats = [mean_band([d[s] for d in per_seed.values()]) for s in steps]
    return np.asarray(steps), np.asarray([m for m, _ in stats]), np.asarray([h for _, h in stats])


def _metrics(runs) -> dict[str, dict[int, list[dict]]]:
    return {arm: {s: r.read_metrics() for s, r in by_seed.items()} for arm, by_seed in runs.items()}


def compare_results(plan: Plan, runs=None, rows=None, same_update: SameUpdate | None = None) -> dict:
    """Everything the report shows, as data (also written as results.json); `runs` / `rows` (the
    finished run folders and their metrics) are read here unless the caller already has them;
    `same_update(cfg_a, cfg_b)` is the chapter's test of two arms making the same update (None: no test)."""
    runs = _runs(plan) if runs is None else runs
    rows = _metrics(runs) if rows is None else rows
    eval_keys = _eval_keys([rs for by_seed in rows.values() for rs in by_seed.values()])
    finals = {arm: {k: {s: _final(rs, k) for s, rs in by_seed.items()} for k in eval_keys} for arm, by_seed in rows.items()}
    starts = {arm: {k: {s: next((r[k] for r in rs if r["step"] == 0 and k in r), None) for s, rs in by_seed.items()}
                    for k in eval_keys} for arm, by_seed in rows.items()}
    partners = plan.partners()
    verdicts = {}
    for arm, ref in ((a.name, p) for a in plan.arms if (p := partners[a.name]) is not None):
        for k in eval_keys:
            seeds = [s for s in plan.seeds if finals[ref][k].get(s) is not None and finals[arm][k].get(s) is not None]
            if seeds:
                v = paired_verdict(ref, [finals[ref][k][s] for s in seeds], arm, [finals[arm][k][s] for s in seeds], k)
                verdicts[f"{arm} vs {ref}: {k}"] = {"mean": v.mean, "low": v.low, "high": v.high, "n": v.n, "text": v.text}
    diff_rows, problems = _config_diff(plan, runs)
    checks, input_problems = _same_inputs(plan, runs)
    train_s = {arm: {s: sum(v for r in rs for k, v in r.items() if k == "time/step" or k.endswith("/time/step"))
                     for s, rs in by_seed.items()} for arm, by_seed in rows.items()}  # a multi-domain run logs DOMAIN/time/step
    cost = {arm: _step_means(by_seed) for arm, by_seed in rows.items()}
    item_verdicts = _item_verdicts(plan, runs, eval_keys[0].removeprefix("eval/"), partners) if eval_keys else {}
    configs = {a.name: plan.config(a, plan.seeds[0]) for a in plan.arms}
    steps = {name: cfg.steps for name, cfg in configs.items() if hasattr(cfg, "steps")}  # for the warnings' matching steps
    ledger = _ledgers(runs, rows)
    return {"chapter": plan.chapter, "preset": plan.preset, "base": plan.base, "seeds": plan.seeds,
            "arms": [{"name": a.name, "overrides": a.overrides, "finished_seeds": sorted(runs[a.name]),
                      "partner": partners[a.name]} for a in plan.arms],
            "ledger": ledger, "ledger_warnings": ledger_warnings(ledger, partners, steps),
            "config_diff": diff_rows, "problems": problems + input_problems, "checks": checks,
            "same_update": _equivalences(plan, runs, same_update), "final": finals, "start": starts, "verdicts": verdicts,
            "item_verdicts": item_verdicts, "train_seconds": train_s, "step_means": cost, "eval_items": _eval_size(runs),
            "cold_start": {"per_seed": "start_seed" in plan.per_seed,
                      "shared": "start_seed" not in plan.per_seed and any(hasattr(c, "start_seed") for c in configs.values())},
            "eval_split": sorted({getattr(c, "eval_split", "test") for c in configs.values()})}


def _item_values(run: RunDir, key: str) -> list[float] | None:
    """The final evaluation's per-item `key` (an item's own field or its episode metric), None if it has none.
    An episode that did not report a counted metric counts 0, as the summary (`summarize`) counts it: a
    TextWorld episode reports `won` only when it ends by winning or losing."""
    names = sorted(n for n in run.eval_names() if n.startswith("step-"))
    items = run.read_eval(names[-1]).get("items") if names else None
    if key == "accuracy" and items and all("reward" in it and "accuracy" not in it for it in items):
        key = "reward"  # `arl.eval.evaluate`'s accuracy is the mean of its items' rewards
    if not items or not any(key in it or key in it.get("metrics", {}) for it in items):
        return None
    values = [it.get(key, it["metrics"].get(key, 0.0) if "metrics" in it else None) for it in items]
    return None if any(v is None for v in values) else [float(v) for v in values]


def _item_verdicts(plan: Plan, runs, key: str, partners: dict[str, str | None]) -> dict[str, dict]:
    """Each arm against its one-switch partner (`Plan.partners`) on the headline `key`, paired by seed
    and held-out item: diff_SI[s, i] = arm - partner on seed s, item i; the interval resamples seeds and
    items (`hierarchical_bootstrap`), and `mdd` is the minimum detectable difference from its standard
    error (`min_detectable_difference`). Also how many items (at these seeds), and how many seeds (at
    these items), a difference of the observed size and spread would need to be resolved with 80% power."""
    out = {}
    for arm, ref in ((a.name, p) for a in plan.arms if (p := partners[a.name]) is not None):
        seeds = [s for s in plan.seeds if s in runs[ref] and s in runs[arm]]
        pairs = [(_item_values(runs[ref][s], key), _item_values(runs[arm][s], key)) for s in seeds]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None and len(a) == len(b)]
        if not pairs or len({len(a) for a, _ in pairs}) > 1:
            continue
        diff_SI = np.asarray([b for _, b in pairs]) - np.asarray([a for a, _ in pairs])
        mean, low, high, se = hierarchical_bootstrap(diff_SI)
        out[f"{arm} vs {ref}: {key}"] = {
            "arm": arm, "partner": ref, "mean": mean, "low": low, "high": high, "se": se,
            "mdd": min_detectable_difference(se), "n_items": diff_SI.shape[1], "n_seeds": diff_SI.shape[0],
            "items_needed": items_to_resolve(diff_SI.mean(axis=0).tolist()),
            "seeds_needed": items_to_resolve(diff_SI.mean(axis=1).tolist())}
    return out


def verdict_line(name: str, v: dict) -> str:
    """One verdict in words: the difference, its interval (seeds and items resampled), and either
    "resolved" or "not resolved" with the minimum detectable difference (80% power, alpha 0.05) and
    how many items or seeds a difference of the observed size would need."""
    head = (f"{name}: {100 * v['mean']:+.1f} points, 95% CI [{100 * v['low']:+.1f}, {100 * v['high']:+.1f}] "
            f"(seeds and items resampled: {v['n_seeds']} seeds x {v['n_items']} items)")
    if v["low"] == v["high"] == 0:
        return f"{head}: no difference on any seed or item"
    if not v["low"] <= 0 <= v["high"]:
        return f"{head}: resolved"
    need = [f"about {v['items_needed']} items at {v['n_seeds']} seeds" if v["items_needed"] else None,
            f"about {v['seeds_needed']} seeds at {v['n_items']} items" if v["seeds_needed"] else None]
    need_text = " or ".join(n for n in need if n)
    return (f"{head}: not resolved (the interval holds 0); minimum detectable difference {100 * v['mdd']:.1f} points "
            f"(80% power, alpha 0.05)" + (f"; a difference of this size would need {need_text}" if need_text else ""))


LEDGER = (("samples drawn", "sampling/candidate_groups"), ("completions trained", "train/datums"),
          ("tokens trained", "train/tokens"), ("teacher forward tokens", "teacher/forward_tokens"),
          ("critic forward tokens", "critic/forward_tokens"), ("wall time (s)", "time/step"),
          ("teacher training (s)", "time/teacher_sft"))
"""The compute ledger's columns and the logged metric each one sums over a run's steps (a multi-domain
run logs DOMAIN/KEY too). Samples drawn: candidate groups x group_size where dynamic sampling draws more
groups than it trains (DAPO logs them), else batch_prompts x group_size per trained step, from the run's
config. Teacher forward tokens: OPD, OPSD, the specialist chapter and AgentOPSD (every prompt and
completion the teacher scored); critic forward tokens: TEMPO (the critic's prompts and sampled values);
teacher training: the seconds of the SFT that made OPD's teacher, logged once by an OPD run whose signal is
the teacher (the reward control uses the teacher only to log its distance)."""


def ledger_of(rows_by_seed: dict[int, list[dict]], config_by_seed: dict[int, dict]) -> dict[str, float | None]:
    """One arm's compute: each `LEDGER` column's total over a run's steps, the mean over its seeds,

        ledger[col] = mean_s sum_steps metric   (samples drawn: x the run's group_size; without the
                                                 metric, trained steps x batch_prompts x group_size)

    None for a column whose metric no run of the arm logged (the report says "not logged")."""
    out: dict[str, float | None] = {}
    for col, key in LEDGER:
        totals = []
        for seed, rows in rows_by_seed.items():
            config = config_by_seed.get(seed, {})
            vals = [v for r in rows for k, v in r.items() if (k == key or k.endswith("/" + key)) and isinstance(v, (int, float))]
            if vals:
                totals.append(sum(vals) * (config.get("group_size", 1) if col == "samples drawn" else 1))
            elif col == "samples drawn" and {"batch_prompts", "group_size"} <= config.keys():
                steps = sum(1 for r in rows if any(k == "train/datums" or k.endswith("/train/datums") for k in r))
                totals.append(float(steps * config["batch_prompts"] * config["group_size"]))
        out[col] = sum(totals) / len(totals) if totals else None
    return out


EQUAL_COMPUTE = {"samples": "samples drawn", "completions": "completions trained", "tokens": "tokens trained",
                 "teacher": "teacher forward tokens", "critic": "critic forward tokens", "wall": "wall time (s)"}
"""`arl compare --equal-compute KEY`: the ledger column each key matches."""


def matched_steps(ledger: dict[str, dict], partners: dict[str, str | None], steps: dict[str, int], column: str,
                  tolerance: float = 0.10) -> dict[str, int]:
    """The steps at which each arm would spend its partner's compute in `column`, for every arm that
    differs from its partner there by more than `tolerance`, at the arm's own per-step rate:

        steps_match = max(1, round(steps_arm x ledger[partner][column] / ledger[arm][column]))

    A ValueError names the arms when the column is not logged by one of a pair (nothing to match)."""
    out = {}
    for arm, ref in partners.items():
        if ref is None:
            continue
        a, b = ledger[arm].get(column), ledger[ref].get(column)
        if a is None or b is None:
            raise ValueError(f"--equal-compute: no run of {arm if a is None else ref} logs {column}; choose a column "
                             f"both arms log (the report's compute ledger shows them)")
        if abs(a - b) > tolerance * abs(b) and a > 0:
            out[arm] = max(1, round(steps[arm] * b / a))
    return out


def equal_compute_arms(plan: Plan, key: str) -> list[Arm]:
    """For each arm (not itself an equal-compute arm) whose ledger column `EQUAL_COMPUTE[key]` differs
    from its partner's by more than 10% in the finished runs, the arm `ARM@equal-KEY`: the same switch at
    `matched_steps`, so the report pairs it with the same partner at equal compute."""
    if key not in EQUAL_COMPUTE:
        raise ValueError(f"--equal-compute {key!r}: use one of {', '.join(EQUAL_COMPUTE)}")
    runs = _runs(plan)
    own, paired = [a for a in plan.arms if "@equal-" not in a.name], plan.partners()
    partners = {a.name: paired[a.name] for a in own if "@equal-" not in (paired[a.name] or "")}
    ledger = _ledgers(runs, _metrics(runs))
    steps = {a.name: plan.config(a, plan.seeds[0]).steps for a in own}
    matched = matched_steps(ledger, partners, steps, EQUAL_COMPUTE[key])
    return [Arm(f"{a.name}@equal-{key}", {**a.overrides, "steps": str(matched[a.name])}) for a in own if a.name in matched]


def _ledgers(runs, rows) -> dict[str, dict[str, float | None]]:
    """Every arm's `ledger_of` its finished runs (`rows`: their metrics, as `_metrics` reads them)."""
    return {arm: ledger_of(by_seed, {s: r.config for s, r in runs[arm].items()}) for arm, by_seed in rows.items()}


def ledger_warnings(ledger: dict[str, dict], partners: dict[str, str | None], steps: dict[str, int],
                    tolerance: float = 0.10) -> list[str]:
    """A warning for every ledger column in which an arm and its partner differ by more than
    `tolerance` of the partner's value, |arm - partner| > tolerance |partner|: their difference then
    mixes the switch with compute. Each warning gives the arm's `steps` that would match the partner
    at the arm's own per-step rate, steps_match = round(steps_arm x partner / arm)."""
    out = []
    for arm, ref in partners.items():
        if ref is None:
            continue
        for col, _ in LEDGER:
            a, b = ledger[arm].get(col), ledger[ref].get(col)
            if a is not None and b is not None and abs(a - b) > tolerance * abs(b):
                change = f"{100 * (a - b) / b:+.0f}%" if b else "from 0"
                match = f"; steps={round(steps[arm] * b / a)} for {arm} would match at its per-step rate" if a and arm in steps else ""
                out.append(f"{arm} and its partner {ref} differ in {col}: {a:.4g} against {b:.4g} ({change}); "
                           f"the difference between them is not the switch alone{match}")
    return out


COST_GROUPS = ("time/", "sampling/", "train/")


def _step_means(rows_by_seed: dict[int, list[dict]]) -> dict[str, float]:
    """Mean over training steps and seeds of each `time/`, `sampling/` and `train/` metric: what a step costs."""
    sums: dict[str, list[float]] = {}
    for rows in rows_by_seed.values():
        for r in rows:
            for k, v in r.items():
                if k.startswith(COST_GROUPS) and isinstance(v, (int, float)):
                    sums.setdefault(k, []).append(v)
    return {k: sum(v) / len(v) for k, v in sorted(sums.items())}


def _eval_size(runs) -> int | None:
    for by_seed in runs.values():
        for run in by_seed.values():
            names = [n for n in run.eval_names() if n.startswith("step-")]
            if names:
                return run.read_eval(names[0]).get("n")
    return None


def _cautions(res: dict) -> list[str]:
    out = []
    n_seeds = min((len(a["finished_seeds"]) for a in res["arms"]), default=0)
    if n_seeds < 5:
        out.append(f"**{n_seeds} seeds per arm.** A paired bootstrap over {n_seeds} seeds has few distinct "
                   f"resamples; its interval is coarse and tends to be too narrow. Run more seeds "
                   f"(`--seeds {max(5, 2 * n_seeds)}` adds them to this folder) before trusting a small difference.")
    if res["ledger_warnings"]:
        out.append(f"**Unequal compute:** {len(res['ledger_warnings'])} ledger column(s) differ by more than 10% between an "
                   "arm and its partner (see the compute ledger): those differences mix the switch with compute.")
    overlapping = [k for k, v in res["verdicts"].items() if v["low"] <= 0 <= v["high"] and v["mean"] != 0]
    if overlapping:
        out.append("**Intervals that contain 0:** " + "; ".join(overlapping) +
                   ". These differences are not resolved at this number of seeds.")
    n_items = res["eval_items"]
    if n_items:
        se = 100 * math.sqrt(0.25 / n_items)
        out.append(f"**Eval set of {n_items} items.** One run's accuracy near 50% has a sampling error of "
                   f"about ±{se:.1f} points from the items alone; differences below ~{2 * se:.0f} points need a "
                   f"larger held-out set or more seeds.")
    if res.get("cold_start", {}).get("shared"):
        out.append("**One cold start for every seed.** Every run starts from the same cached cold start (start_seed=0), "
                   "so the intervals cover RL's seeds and the held-out items, not the cold start's own variance: the "
                   "conclusions are conditional on that start. `--start-per-seed` trains one per seed.")
    if "dev" in res.get("eval_split", []):
        out.append("**Dev split.** These runs evaluate the dev split (eval_split=dev): use them to choose settings, "
                   "then report the test split once, with the choices fixed.")
    if res["same_update"]:
        out.append("**Arms that are the same update** (below) can only differ by floating-point noise: a "
                   "difference between them measures nothing about the variable.")
    return out


def _fmt_arm_values(values: dict) -> str:
    xs = [v for v in values.values() if v is not None]
    if not xs:
        return "-"
    mean, half = mean_band(xs)
    return f"{100 * mean:.1f} ± {100 * half:.1f}" if len(xs) > 1 else f"{100 * mean:.1f}"


def write_compare_report(plan: Plan, same_update: SameUpdate | None = None) -> Path:
    """Write results.json, plots/*.png, report.md and report.html in the comparison folder; return the
    html path. `same_update`: as in `compare_results`."""
    runs = _runs(plan)
    rows = _metrics(runs)
    res = compare_results(plan, runs, rows, same_update)
    folder = plan.folder
    _io.atomic_write_text(folder / "results.json", json.dumps(res, indent=2) + "\n")
    pngs = _curve_plots(runs, rows, folder / "plots") if any(runs.values()) else []
    partners = {a["name"]: a["partner"] for a in res["arms"]}
    varied = sorted({k for a in plan.arms for k in a.overrides})
    what = f"varying {', '.join(varied)}" if varied else "seed replicates (no variable changed)"
    pairing = "; ".join(f"{a} against {p}" for a, p in partners.items() if p) or "none"
    unpaired = [a.name for a in plan.arms[1:] if partners[a.name] is None]
    md = [f"# Comparison: {plan.chapter} ({plan.preset}), {what}", "",
          f"Arms: {', '.join(a.name for a in plan.arms)}; seeds {plan.seeds}. "
          f"Shared settings: {plan.base or 'the preset'}.", "",
          f"Each arm is compared with the earlier arm that differs from it only in its own switch: {pairing}."
          + (f" No arm differs from {', '.join(unpaired)} in its switch alone, so it is not compared: add its "
             f"key's preset value to that --vary." if unpaired else ""), "",
          "## Which variable changed", ""]
    if res["config_diff"]:
        md += _md_table(res["config_diff"])
    md += [""] + [f"- ok: {c}" for c in res["checks"]] + [f"- **problem:** {p}" for p in res["problems"]]
    if not res["problems"]:
        md.append("- ok: no other config field differs between arms (budgets, data, eval protocol)")
    md += ["", "## Which conclusions still need stronger controls", ""] + [f"- {c}" for c in _cautions(res)]
    md += ["", "## Arms that make the same update", ""]
    if res["same_update"]:
        for e in res["same_update"]:
            gap = e["observed_max_gap"]
            seen = "not run yet" if gap is None else ("identical logged metrics at every seed" if gap == 0
                                                      else f"largest difference of any logged value: {gap:.3g}")
            md.append(f"- **{e['b']} = {e['a']}**: in this setting (one on-policy update per batch: every ratio is 1 up to the sampler/trainer rounding, `train/logprob_gap`) "
                      f"their losses have the same gradient, so the runs are the same update; observed: {seen}.")
    else:
        md.append("- none: every pair of arms makes a different update in this setting.")
    md += ["", "## Held-out results (final evaluation, mean ± 95% t-interval across seeds, %)", ""]
    eval_keys = list(next(iter(res["final"].values()), {}).keys())
    table = []
    for a in plan.arms:
        row = {"arm": a.name, "seeds": len(res["arms"][plan.arms.index(a)]["finished_seeds"])}
        for k in eval_keys:
            row[f"{k} start"] = _fmt_arm_values(res["start"][a.name][k])
            row[f"{k} end"] = _fmt_arm_values(res["final"][a.name][k])
        ref = partners[a.name]
        v = res["verdicts"].get(f"{a.name} vs {ref}: {eval_keys[0]}") if eval_keys else None
        row["partner"] = ref or "-"
        row[f"{eval_keys[0] if eval_keys else ''} Δ vs partner [95% CI, seeds]"] = (
            "-" if v is None else f"{100 * v['mean']:+.1f} [{100 * v['low']:+.1f}, {100 * v['high']:+.1f}]")
        secs = [v for v in res["train_seconds"][a.name].values()]
        row["train s"] = f"{sum(secs) / len(secs):.0f}" if secs else "-"
        table.append(row)
    md += _md_table(table)
    md += ["", "Per seed (final):", ""]
    md += _md_table([{"arm": a.name, **{f"{k} seed {s}": ("-" if res["final"][a.name][k].get(s) is None
                                                           else f"{100 * res['final'][a.name][k][s]:.1f}")
                                         for k in eval_keys[:1] for s in plan.seeds}} for a in plan.arms])
    if eval_keys:
        md += ["", f"{eval_keys[0]} at every evaluation (mean across seeds, %):", ""]
        md += _md_table(_checkpoint_rows(plan, rows, eval_keys[0]))
    stage_md, stage_pngs = _stages(plan, runs, folder / "plots")
    md += stage_md
    pngs = stage_pngs + pngs
    md += ["", "## What a step costs (mean over steps and seeds)", ""]
    cost_keys = sorted({k for a in plan.arms for k in res["step_means"][a.name]})
    md += _md_table([{"metric": k, **{a.name: (f"{res['step_means'][a.name][k]:.3g}" if k in res["step_means"][a.name] else "-")
                                       for a in plan.arms}} for k in cost_keys])
    md += ["", "## Compute ledger (totals per run, mean over seeds)", ""]
    md += _md_table([{"arm": a.name, **{col: ("not logged" if res["ledger"][a.name][col] is None
                                              else f"{res['ledger'][a.name][col]:.4g}") for col, _ in LEDGER}}
                     for a in plan.arms])
    md.append("")
    md += [f"- **warning:** {w}" for w in res["ledger_warnings"]] or ["- ok: every arm is within 10% of its partner in every logged column"]
    if res["item_verdicts"]:
        md += ["", "## Verdicts against the partner (paired by seed and held-out item; 95% CI with seeds and items resampled)", ""]
        md += [f"- {verdict_line(name, v)}" for name, v in res["item_verdicts"].items()]
    md += ["", "## Verdicts against the partner (paired by seed only, bootstrap over seeds, 95% CI)", ""]
    md += [f"- {v['text']}" for v in res["verdicts"].values()] or ["- not enough finished runs yet"]
    md += ["", "## Curves (mean and 95% band across seeds)", ""] + [f"![{p.stem}](plots/{p.name})" for p in pngs]
    _io.atomic_write_text(folder / "report.md", "\n".join(md) + "\n")
    _io.atomic_write_text(folder / "report.html", _html(plan, md, pngs, table, res))
    return folder / "report.html"


def _checkpoint_rows(plan: Plan, rows, key: str) -> list[dict]:
    """One row per arm: the mean across seeds of `key` at each step it was logged (how fast, not only how far)."""
    out = []
    for a in plan.arms:
        by_step: dict[int, list[float]] = {}
        for rs in rows[a.name].values():
            for r in rs:
                if key in r:
                    by_step.setdefault(r["step"], []).append(r[key])
        out.append({"arm": a.name, **{f"step {k}": f"{100 * sum(v) / len(v):.1f}" for k, v in sorted(by_step.items())}})
    return out


def _stages(plan: Plan, runs, out_dir: Path) -> tuple[list[str], list[Path]]:
    """For multi-stage runs (`eval/stages.json`): every stage and checkpoint across seeds, per arm, and
    each arm's trade-off plot of its first two scores."""
    md, pngs = [], []
    for arm in plan.arms:
        files = [r.read_eval("stages") for r in runs[arm.name].values() if "stages" in r.eval_names()]
        if not files:
            continue
        rows_by_seed = [f["rows"] for f in files]
        keys = [k for k in rows_by_seed[0][0] if k not in ("stage", "step")]
        md += ["", f"## Every stage and checkpoint: {arm.name} (held-out accuracy, mean ± 95% t-interval, %)", ""]
        md += _md_table(format_rows(stage_rows(rows_by_seed, keys), keys))
        if len(keys) >= 2:
            pngs.append(plot_tradeoff(out_dir / f"tradeoff-{arm.slug}.png", rows_by_seed, keys,
                                      next((f["starts"] for f in files if "starts" in f), None)))
    return md, pngs


def _md_table(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    cols = list(dict.fromkeys(k for r in rows for k in r))
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return out


def _html(plan: Plan, md: list[str], pngs: list[Path], table: list[dict], res: dict) -> str:
    """The markdown's sections as a self-contained page (tables as tables, plots inlined)."""
    parts = []
    rows: list[str] = []

    def flush():
        if rows:
            header = [c.strip() for c in rows[0].strip("|").split("|")]
            body = [dict(zip(header, (c.strip() for c in r.strip("|").split("|")))) for r in rows[2:]]
            parts.append(_table(body))
            rows.clear()

    for line in md:
        if line.startswith("|"):
            rows.append(line)
            continue
        flush()
        if line.startswith("# "):
            parts.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.startswith("## "):
            parts.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("!["):
            continue
        elif line.startswith("- "):
            parts.append(f"<p>• {_inline(line[2:])}</p>")
        elif line:
            parts.append(f"<p>{_inline(line)}</p>")
    flush()
    for p in pngs:
        data = base64.b64encode(p.read_bytes()).decode("ascii")
        parts.append(f'<figure><img alt="{html.escape(p.stem)}" src="data:image/png;base64,{data}"></figure>')
    title = html.escape(md[0][2:])
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{title}</title><style>{CSS}</style></head>\n<body><main>\n" + "\n".join(parts) + "\n</main></body></html>\n")


def _inline(text: str) -> str:
    out = html.escape(text)
    while "**" in out:
        out = out.replace("**", "<b>", 1).replace("**", "</b>", 1)
    while out.count("`") >= 2:
        out = out.replace("`", "<code>", 1).replace("`", "</code>", 1)
    return out


__all__ = ["Arm", "compare_results", "write_compare_report"]
