"""The report of an `arl compare` folder: `report.md`, `report.html`, `results.json` and `plots/`.

It opens with two of the learning path's questions for this comparison: which variable changed (the
config diff between arms, and checks that nothing else did: data order, eval items, budgets) and
which conclusions still need stronger controls. Then: arms that make the same update (by
the chapter's `same_update`, a numerical check of their gradients), held-out results per arm with paired
bootstrap intervals and a verdict against the reference arm, and every metric's curve with a 95% band
across seeds.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..eval.stats import bootstrap_ci, items_to_resolve, mean_band, paired_verdict
from ..track import _io
from ..track.compare import Arm, Plan
from ..track.rundir import RunDir
from .html import CSS, _table
from .plots import COLORS, STYLE, _safe_name, group_of, is_noisy, moving_average, panel_grid, png_bytes, series
from .stages import format_rows, plot_tradeoff, stage_rows

SameUpdate = Callable[[object, object], bool]
"""A chapter's `same_update(cfg_a, cfg_b)`: whether two arms' configs make the same update."""
IGNORED_DIFF = ("seed", "threads", "tracker")
"""Config fields that may differ between runs without changing what is compared."""


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
    ref = plan.arms[0].name
    verdicts = {}
    for arm in plan.arms[1:]:
        for k in eval_keys:
            seeds = [s for s in plan.seeds if finals[ref][k].get(s) is not None and finals[arm.name][k].get(s) is not None]
            if seeds:
                v = paired_verdict(ref, [finals[ref][k][s] for s in seeds], arm.name,
                                   [finals[arm.name][k][s] for s in seeds], k)
                verdicts[f"{arm.name} vs {ref}: {k}"] = {"mean": v.mean, "low": v.low, "high": v.high, "n": v.n, "text": v.text}
    diff_rows, problems = _config_diff(plan, runs)
    checks, input_problems = _same_inputs(plan, runs)
    train_s = {arm: {s: sum(v for r in rs for k, v in r.items() if k == "time/step" or k.endswith("/time/step"))
                     for s, rs in by_seed.items()} for arm, by_seed in rows.items()}  # a multi-domain run logs DOMAIN/time/step
    cost = {arm: _step_means(by_seed) for arm, by_seed in rows.items()}
    item_verdicts = _item_verdicts(plan, runs, eval_keys[0].removeprefix("eval/")) if eval_keys else {}
    return {"chapter": plan.chapter, "preset": plan.preset, "base": plan.base, "seeds": plan.seeds,
            "arms": [{"name": a.name, "overrides": a.overrides, "finished_seeds": sorted(runs[a.name])} for a in plan.arms],
            "config_diff": diff_rows, "problems": problems + input_problems, "checks": checks,
            "same_update": _equivalences(plan, runs, same_update), "final": finals, "start": starts, "verdicts": verdicts,
            "item_verdicts": item_verdicts, "train_seconds": train_s, "step_means": cost, "eval_items": _eval_size(runs)}


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


def _item_verdicts(plan: Plan, runs, key: str) -> dict[str, dict]:
    """Each arm against the reference on the headline `key`, paired by held-out item: item i's difference
    is B - A averaged over the seeds both finished, and the interval bootstraps the items (each arm plays
    the same items). Also how many items (at these seeds), and how many seeds (at these items), a
    difference of the observed size and spread would need to be resolved with 80% power."""
    ref, out = plan.arms[0].name, {}
    for arm in plan.arms[1:]:
        seeds = [s for s in plan.seeds if s in runs[ref] and s in runs[arm.name]]
        pairs = [(_item_values(runs[ref][s], key), _item_values(runs[arm.name][s], key)) for s in seeds]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None and len(a) == len(b)]
        if not pairs:
            continue
        per_seed = [[y - x for x, y in zip(a, b)] for a, b in pairs]
        diffs = [sum(col) / len(col) for col in zip(*per_seed)]
        mean, low, high = bootstrap_ci(diffs, n_boot=4000)
        out[f"{arm.name} vs {ref}: {key}"] = {
            "mean": mean, "low": low, "high": high, "n_items": len(diffs), "n_seeds": len(pairs),
            "items_needed": items_to_resolve(diffs), "seeds_needed": items_to_resolve([sum(d) / len(d) for d in per_seed])}
    return out


def _item_lines(res: dict) -> list[str]:
    lines = []
    for name, v in res.get("item_verdicts", {}).items():
        resolved = "not resolved (the interval holds 0)" if v["low"] <= 0 <= v["high"] else "resolved"
        need = [f"about {v['items_needed']} items at {v['n_seeds']} seeds" if v["items_needed"] else None,
                f"about {v['seeds_needed']} seeds at {v['n_items']} items" if v["seeds_needed"] else None]
        need_text = " or ".join(n for n in need if n)
        lines.append(f"- {name}: {100 * v['mean']:+.1f} points, 95% CI [{100 * v['low']:+.1f}, {100 * v['high']:+.1f}] "
                     f"over {v['n_items']} items x {v['n_seeds']} seeds: {resolved}"
                     + (f"; a difference of this size would need {need_text} (80% power)" if need_text else ""))
    return lines


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
    ref = plan.arms[0].name
    varied = sorted({k for a in plan.arms for k in a.overrides})
    what = f"varying {', '.join(varied)}" if varied else "seed replicates (no variable changed)"
    md = [f"# Comparison: {plan.chapter} ({plan.preset}), {what}", "",
          f"Arms: {', '.join(a.name for a in plan.arms)} (reference: {ref}); seeds {plan.seeds}. "
          f"Shared settings: {plan.base or 'the preset'}.", "",
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
        v = res["verdicts"].get(f"{a.name} vs {ref}: {eval_keys[0]}") if eval_keys else None
        row[f"{eval_keys[0] if eval_keys else ''} Δ vs reference [95% CI]"] = (
            "reference" if a.name == ref else "-" if v is None
            else f"{100 * v['mean']:+.1f} [{100 * v['low']:+.1f}, {100 * v['high']:+.1f}]")
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
    md += ["", f"## Verdicts (paired by seed against {ref}, bootstrap 95% CI)", ""]
    md += [f"- {v['text']}" for v in res["verdicts"].values()] or ["- not enough finished runs yet"]
    if res["item_verdicts"]:
        md += ["", "## Verdicts paired by held-out item (bootstrap over items, 95% CI; power to resolve)", ""]
        md += _item_lines(res)
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
