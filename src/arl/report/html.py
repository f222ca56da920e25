"""`report.html`: one self-contained page per run (plots inlined as base64, no external assets).

Sections: summary, before/after eval, plots, sample rollouts, config. Every piece of text from the
run (completions especially) goes through `html.escape`, so a model that writes `<script>` shows it
as text.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import numbers
from pathlib import Path

from ..track import _io
from .plots import _as_run, plot_metrics

MAX_TEXT = 4000  # characters of a prompt or completion shown before it is cut
ROLLOUT_FIELDS = ("prompt", "completion", "reward", "advantage")

CSS = """
:root { color-scheme: light; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: #1f2328; background: #fff; margin: 0; }
main { max-width: 960px; margin: 0 auto; padding: 28px 20px 60px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 1px solid #d8dee4; }
.meta { color: #59636e; font-size: 13px; margin: 0; }
code, pre { font: 12.5px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
table { border-collapse: collapse; width: 100%; font-size: 14px; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 5px 10px; border-bottom: 1px solid #e6e8eb; vertical-align: top; }
th { font-weight: 600; border-bottom: 1px solid #b7bfc7; }
td.num, th.num { text-align: right; }
.up { color: #1a7f37; } .down { color: #cf222e; }
figure { margin: 12px 0 20px; }
figure img { max-width: 100%; height: auto; display: block; }
.rollout { border: 1px solid #e6e8eb; border-radius: 6px; padding: 10px 14px; margin: 12px 0; }
.rollout .head { font-size: 13px; color: #59636e; margin-bottom: 6px; }
.rollout .label { font-size: 12px; font-weight: 600; color: #59636e; text-transform: uppercase;
                  letter-spacing: .03em; margin-top: 6px; }
.rollout pre { white-space: pre-wrap; word-break: break-word; background: #f6f8fa; padding: 8px 10px;
               border-radius: 4px; margin: 2px 0 4px; }
pre.config { background: #f6f8fa; padding: 10px 12px; border-radius: 6px; overflow-x: auto; }
.empty { color: #59636e; font-style: italic; }
"""


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _is_num(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def fmt(v) -> str:
    """A cell value as (unescaped) text: numbers to 4 significant digits, None as a dash."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, numbers.Integral):
        return str(v)
    if _is_num(v):
        return f"{float(v):.4g}"
    if isinstance(v, (list, dict)):
        s = _io.dumps(v)
        return s if len(s) <= 120 else s[:117] + "..."
    return str(v)


def _cls(name: str) -> str:
    return f' class="{name}"' if name else ""


GROUP_ORDER = ("reward", "eval", "loss", "kl", "rollout", "optim", "time")


def _plot_order(p: Path):
    """reward first, then the other groups the chapters share, then the rest; misc last."""
    g = p.stem
    return (GROUP_ORDER.index(g) if g in GROUP_ORDER else len(GROUP_ORDER) + (g == "misc"), g)


def _table(rows: list[dict]) -> str:
    if not rows:
        return '<p class="empty">nothing recorded</p>'
    cols: list[str] = []
    for r in rows:
        cols += [c for c in r if c not in cols]
    delta = "before" in cols and "after" in cols and "change" not in cols
    # a column is numeric (right-aligned) when every filled cell is a number; blanks don't count
    num_col = {c: all(_is_num(r.get(c)) or r.get(c) in (None, "") for r in rows) for c in cols}
    head = "".join(f'<th{_cls("num" if num_col[c] else "")}>{_e(c)}</th>' for c in cols)
    if delta:
        head += '<th class="num">change</th>'
    body = []
    for r in rows:
        cells = "".join(f'<td{_cls("num" if num_col[c] else "")}>{_e(fmt(r.get(c)))}</td>' for c in cols)
        if delta:
            b, a = r.get("before"), r.get("after")
            if _is_num(b) and _is_num(a):
                d = float(a) - float(b)
                cls = "num up" if d > 0 else "num down" if d < 0 else "num"
                cells += f'<td{_cls(cls)}>{d:+.4g}</td>'
            else:
                cells += "<td></td>"
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _text_block(label: str, text) -> str:
    s = text if isinstance(text, str) else _io.dumps(text)
    cut = ""
    if len(s) > MAX_TEXT:
        cut = f" (first {MAX_TEXT} of {len(s)} characters)"
        s = s[:MAX_TEXT]
    return f'<div class="label">{_e(label)}{_e(cut)}</div><pre>{_e(s)}</pre>'


def _rollouts(rows: list[dict]) -> str:
    if not rows:
        return '<p class="empty">no rollouts recorded</p>'
    out = []
    for i, r in enumerate(rows):
        head = [f"#{i + 1}"]
        if "step" in r:
            head.append(f"step {fmt(r['step'])}")
        for k in ("reward", "advantage"):
            if k in r:
                head.append(f"{k} {fmt(r[k])}")
        # other short scalar fields (stop_reason, turns, ...) go in the header; token arrays stay out
        head += [f"{k} {fmt(v)}" for k, v in r.items()
                 if k not in ROLLOUT_FIELDS and k != "step" and (_is_num(v) or (isinstance(v, str) and len(v) <= 40))]
        parts = [f'<div class="head">{_e(" · ".join(head))}</div>']
        for k in ("prompt", "completion"):
            if k in r:
                parts.append(_text_block(k, r[k]))
        out.append(f'<div class="rollout">{"".join(parts)}</div>')
    return "".join(out)


def _default_sample(run, n: int = 4) -> list[dict]:
    rows = run.read_rollouts()
    if not rows:
        return []
    last = max((r.get("step", -1) for r in rows if isinstance(r.get("step"), int)), default=None)
    return [r for r in rows if r.get("step") == last][:n]


def write_report(run_dir, title: str, summary_rows: list[dict], eval_table: list[dict] | None = None,
                 rollouts_sample: list[dict] | None = None) -> Path:
    """Write `report.html` atomically and return its path.

    summary_rows: rows of a small table (e.g. [{"metric": "reward/mean", "first": .2, "last": .6}]).
    eval_table: rows of the evaluation table, or None to leave the section out.
      In both tables, numeric "before" and "after" columns get a signed "change" column.
    rollouts_sample: rows with prompt / completion / reward / advantage; None takes up to 4 rows of
      the last logged step from rollouts.jsonl, [] shows none.
    Plots: every plots/*.png is embedded; if there are none yet, `plot_metrics` makes them first.
    """
    run = _as_run(run_dir)
    pngs = list(run.plots_dir.glob("*.png")) if run.plots_dir.is_dir() else []
    if not pngs and run.metrics_file.exists():
        pngs = plot_metrics(run)
    pngs = sorted(pngs, key=_plot_order)
    if rollouts_sample is None:
        rollouts_sample = _default_sample(run)

    figures = []
    for p in pngs:
        data = base64.b64encode(p.read_bytes()).decode("ascii")
        figures.append(f'<figure><img alt="{_e(p.stem)} metrics" src="data:image/png;base64,{data}"></figure>')
    steps = run.last_step()
    stamp = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    meta = f"{run.chapter} / {run.name} · {'no steps' if steps is None else f'last step {steps}'} · {stamp}"
    sections = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">{_e(meta)}</p>',
        f'<p class="meta"><code>{_e(run.path)}</code></p>',
        "<h2>Summary</h2>", _table(summary_rows or []),
    ]
    if eval_table is not None:
        sections += ["<h2>Evaluation</h2>", _table(eval_table)]
    sections += ["<h2>Training curves</h2>", "".join(figures) or '<p class="empty">no metrics logged</p>',
                 "<h2>Sample rollouts</h2>", _rollouts(rollouts_sample),
                 "<h2>Config</h2>",
                 f'<pre class="config">{_e(json.dumps(run.config, indent=2, ensure_ascii=False))}</pre>']
    page = ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head>\n<body><main>\n"
            + "\n".join(sections) + "\n</main></body></html>\n")
    _io.atomic_write_text(run.report_file, page)
    return run.report_file
