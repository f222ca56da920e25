"""`arl show RUN`: one HTML page of a run's trajectories, token by token, with their images.

Every token is drawn as the model saw it and coloured by who produced it: the policy's own tokens
(the only ones trained) on a background whose hue is the sign of their advantage and whose strength
is its size; observations (tool results) blue; the chat template's tokens (turn ends, headers) grey;
the prompt folded away. Turn boundaries, the tool calls each turn made with what came back, the stop
reason, and the page's totals of trained and masked tokens make visible what the optimiser saw.
Hovering a token shows its id, source, sampler logprob and advantage. The images a row names (a prompt's
figure, a tool's rendered window; `RunDir.save_image`) are drawn where they entered the context, at
twice their size with square pixels, so what the vision tower got is what the page shows. A
single-turn row (a completion with its prompt text) is drawn as one turn.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

from PIL import Image

from ..tools.calls import ToolCall, parse_tool_calls
from ..models import load_tokenizer
from ..track import RunDir, _io
from .html import CSS, fmt

SOURCES = {"A": "policy", "O": "observation", "T": "template"}

SHOW_CSS = """
.tok { white-space: pre-wrap; border-radius: 2px; box-shadow: inset -1px 0 0 rgba(31,35,40,.18); }
.tok.O { background: #ddeeff; color: #0a3069; }
.tok.T { background: #eaeef2; color: #6e7781; }
.tok.A { border-bottom: 2px solid #1f2328; }
.tok.A.zero { border-bottom: 2px dotted #8c959f; }
.stream { font: 12.5px/1.9 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; word-break: break-word; }
.turn { border-left: 3px solid #8c959f; padding: 2px 0 2px 10px; margin: 8px 0; }
.turn .label, .legend .label { font-size: 12px; font-weight: 600; color: #59636e; }
.calls { font-size: 13px; color: #59636e; margin: 4px 0 0; }
details.prompt summary { cursor: pointer; font-size: 12px; color: #59636e; }
.legend span.tok { padding: 1px 6px; margin-right: 8px; }
.images img { image-rendering: pixelated; border: 1px solid #d0d7de; margin: 4px 8px 4px 0; }
"""


def _adv_style(adv: float, scale: float) -> str:
    """Green for positive, red for negative advantage; opacity grows with |adv| / the page's largest."""
    if adv == 0 or scale == 0:
        return ""
    alpha = 0.15 + 0.6 * min(abs(adv) / scale, 1.0)
    rgb = "26,127,55" if adv > 0 else "207,34,46"
    return f' style="background: rgba({rgb},{alpha:.2f})"'


def _peak(adv: float | list[float]) -> float:
    """The largest |advantage| of a row: one number, or one per token (on-policy distillation logs a list)."""
    return max((abs(float(a)) for a in adv), default=0.0) if isinstance(adv, list) else abs(float(adv))


def _token_spans(pieces: list[str], source: str, tokens: list[int], logprobs: list[float], adv: float | list[float],
                 scale: float) -> str:
    """`adv`: the turn's advantage, or one per policy token of the turn (in order)."""
    out = []
    policy_adv = iter(adv) if isinstance(adv, list) else None
    for i, (piece, s, tok, lp) in enumerate(zip(pieces, source, tokens, logprobs)):
        a = (next(policy_adv, 0.0) if s == "A" else 0.0) if policy_adv is not None else adv
        # a newline shows as ↵; only the last of a run of newline tokens also breaks the line
        run_goes_on = i + 1 < len(pieces) and pieces[i + 1].strip("\n") == "" and pieces[i + 1] != ""
        text = html.escape(piece.replace("\n", "↵") + ("\n" if piece.endswith("\n") and not run_goes_on else ""))
        tip = f"id {tok} · {SOURCES[s]}" + (f" · logprob {lp:.3f} · advantage {a:.3g}" if s == "A" else " · not trained")
        cls = f"tok {s}" + (" zero" if s == "A" and a == 0 else "")
        out.append(f'<span class="{cls}" title="{html.escape(tip)}"{_adv_style(a, scale) if s == "A" else ""}>{text}</span>')
    return "".join(out)


def _calls(turn: dict) -> str:
    parsed = parse_tool_calls(turn["text"])
    if not isinstance(parsed, list):
        return f'<p class="calls">malformed tool call: {html.escape(parsed.reason)}</p>'
    rows = [f"→ {html.escape(c.name)}({html.escape(', '.join(f'{k}={v!r}' for k, v in c.arguments.items()))})"
            for c in parsed if isinstance(c, ToolCall)]
    rows += [f"← {html.escape(o[:300])}" for o in turn.get("observations", [])]
    return f'<p class="calls">{"<br>".join(rows)}</p>' if rows else ""


def _images(run: RunDir, names: list[str], what: str) -> str:
    """The named images of the run folder inline (data URIs: the page stands alone), twice their size."""
    tags = []
    for name in names:
        data = run.read_image(name)
        width, height = Image.open(io.BytesIO(data)).size
        tags.append(f'<img src="data:image/png;base64,{base64.b64encode(data).decode()}" width="{2 * width}" '
                    f'height="{2 * height}" alt="{html.escape(what)}" title="{html.escape(f"{what}: {name}, {width}x{height} px")}">')
    return f'<div class="images">{"".join(tags)}</div>' if tags else ""


def as_trajectory(row: dict, encode) -> dict:
    """A rollout row or evaluation item in the multi-turn layout: a single-turn row (its prompt text and
    one completion) becomes one turn of policy tokens. An evaluation item stores its completion as text
    only, so its tokens are the completion re-tokenised (`retokenised` set)."""
    if "turns" in row:
        return row
    tokens = row["tokens"] if isinstance(row.get("tokens"), list) else encode(row["completion"])
    out = {**row, "prompt_tokens": encode(row["prompt"]),
           "turns": [{"tokens": tokens, "source": "A" * len(tokens), "text": row["completion"], "reward": row.get("reward", 0.0),
                      "logprobs": row.get("logprobs") or [0.0] * len(tokens)}]}
    if not isinstance(row.get("tokens"), list):
        out["retokenised"] = True
    return out


def _trajectory(row: dict, decode, scale: float, index: int, trained: bool, run: RunDir) -> str:
    adv = row.get("advantage", 0.0)  # a number, or one per completion token (on-policy distillation)
    keys = ("step", "group", "hops", "figure", "kind", "answer", "reward", "advantage", "stop_reason") if trained \
        else ("hops", "id", "kind", "answer", "reward", "stop_reason")
    head = [f"#{index}"] + [f"{k} {fmt(row[k])}" if not isinstance(row[k], list) else
                            f"{k} per token (mean {fmt(sum(row[k]) / max(len(row[k]), 1))})" for k in keys if k in row]
    parts = [f'<div class="head">{html.escape(" · ".join(head))}</div>']
    if "question" in row:
        parts.append(f'<div><b>{html.escape(row["question"])}</b> — gold: {html.escape(", ".join(row.get("answers", [])))}</div>')
    prompt = row["prompt_tokens"]
    parts.append(f'<details class="prompt"><summary>prompt: {len(prompt)} tokens (system message, tools if shown, question), not trained'
                 + (f", and {len(row['images'])} image{'s' * (len(row['images']) > 1)} (below)" if row.get("images") else "")
                 + f'</summary><div class="stream">{_token_spans(decode(prompt), "T" * len(prompt), prompt, [0.0] * len(prompt), 0, 0)}'
                 "</div></details>")
    parts.append(_images(run, row.get("images", []), "prompt image"))
    if row.get("retokenised"):
        parts.append('<p class="calls">an evaluation item stores its answer as text: its tokens below are that text re-tokenised</p>')
    # a chapter that credits turns unequally (AgentOPSD) logs each turn's advantage and belief move
    turn_adv = row.get("turn_advantages") or [adv] * len(row["turns"])
    delta_b = row.get("turn_delta_b")
    for k, turn in enumerate(row["turns"]):
        n_policy = turn["source"].count("A")
        label = f"turn {k + 1}: {n_policy} policy tokens" + (f", reward {fmt(turn['reward'])}" if turn.get("reward") else "")
        if "turn_advantages" in row:
            label += f", advantage {fmt(turn_adv[k])}" + (f", belief move {fmt(delta_b[k])}" if delta_b else "")
        spans = _token_spans(decode(turn["tokens"]), turn["source"], turn["tokens"], turn["logprobs"], turn_adv[k], scale)
        parts.append(f'<div class="turn"><div class="label">{html.escape(label)}</div><div class="stream">{spans}</div>'
                     f"{_calls(turn)}{_images(run, turn.get('images', []), 'observation image')}</div>")
    return f'<div class="rollout">{"".join(parts)}</div>'


def token_totals(rows: list[dict], trained: bool = True) -> dict[str, int]:
    """Tokens by role over `rows`: policy tokens trained (non-zero advantage) and not (zero: a
    degenerate group), observation, template and prompt tokens (never trained); for an evaluation
    (`trained` False) the policy's tokens are one count."""
    policy = ("policy, trained", "policy, advantage 0") if trained else ("policy (evaluation: nothing trained)",) * 2
    totals = dict.fromkeys((*dict.fromkeys(policy), "observation", "template", "prompt"), 0)
    for r in rows:
        source = "".join(t["source"] for t in r["turns"])
        key = policy[0] if r.get("advantage") else policy[1]
        totals[key] += source.count("A")
        totals["observation"] += source.count("O")
        totals["template"] += source.count("T")
        totals["prompt"] += len(r["prompt_tokens"])
    return totals


def write_trajectories(run_dir, step: int | None = None, eval_name: str | None = None, limit: int = 32,
                       out: str | Path | None = None, group: int | None = None) -> Path:
    """Write the page for the trajectories of training step `step` (default: the last logged), or of
    the evaluation `eval_name` (e.g. step-0000), drawing only group `group` when given (the totals
    count the whole step); returns its path (default RUN/show-<what>.html)."""
    run = RunDir.open(run_dir)
    if eval_name is not None:
        rows, what = run.read_eval(eval_name).get("items", []), f"eval {eval_name}"
    else:
        rows = run.read_rollouts()
        if step is None:
            step = max((r["step"] for r in rows), default=None)
        rows, what = [r for r in rows if r.get("step") == step], f"training step {step}"
    tokenizer = load_tokenizer(run.config["model"])
    rows = [as_trajectory(r, lambda text: tokenizer.encode(text, add_special_tokens=False))
            for r in rows if "turns" in r or ("completion" in r and "prompt" in r)]
    if not rows:
        raise ValueError(f"{run.path}: no trajectories for {what}; `arl show` reads rollouts.jsonl rows with 'turns' "
                         "(agent chapters) or a 'prompt' and a 'completion' — pick another --step or --eval")
    cache: dict[int, str] = {}

    def decode(ids: list[int]) -> list[str]:
        return [cache.setdefault(i, tokenizer.decode([i])) for i in ids]

    trained = eval_name is None
    totals = token_totals(rows, trained)
    all_tokens = sum(totals.values())
    shown = [r for r in rows if group is None or r.get("group") == group][:limit]
    scale = max((_peak(r.get("advantage", 0.0)) for r in rows), default=0.0)
    legend = ('<p class="legend"><span class="tok A" style="background: rgba(26,127,55,.5)">policy, A &gt; 0</span>'
              '<span class="tok A" style="background: rgba(207,34,46,.5)">policy, A &lt; 0</span>'
              '<span class="tok A zero">policy, A = 0</span><span class="tok O">observation</span>'
              '<span class="tok T">template</span></p>')
    table = "".join(f"<tr><td>{html.escape(k)}</td><td class=\"num\">{v}</td><td class=\"num\">{100 * v / all_tokens:.1f}%</td>"
                    "</tr>" for k, v in totals.items())
    title = f"{run.chapter} / {run.name}: {what}"
    body = [f"<h1>{html.escape(title)}</h1>",
            f'<p class="meta">{len(rows)} trajectories ({len(shown)} shown) · model {html.escape(run.config["model"])}</p>',
            "<h2>Which tokens were optimised</h2>",
            f'<table><thead><tr><th>tokens</th><th class="num">count</th><th class="num">share</th></tr></thead>'
            f"<tbody>{table}</tbody></table>",
            "<p>Only policy tokens with a non-zero advantage receive gradient; observation, template and prompt tokens "
            "are context (advantage 0, weight 0, logprob 0 in the datum).</p>",
            "<h2>Trajectories</h2>", legend,
            *(_trajectory(r, decode, scale, i + 1, trained, run) for i, r in enumerate(shown))]
    page = ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{CSS}{SHOW_CSS}</style></head>\n<body><main>\n"
            + "\n".join(body) + "\n</main></body></html>\n")
    slug = f"eval-{eval_name}" if eval_name is not None else f"step-{step:04d}"
    path = Path(out) if out else run.path / f"show-{slug}.html"
    _io.atomic_write_text(path, page)
    return path
