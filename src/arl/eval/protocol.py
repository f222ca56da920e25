"""A fixed evaluation protocol: greedy decoding (temperature 0), one sample per item, the same
`max_tokens` and prompts every time, so that "before" and "after" numbers are comparable.

A higher training reward does not prove improvement (it is measured on the training prompts, at
temperature 1, on a moving policy); this is the number the chapter notes report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..models.images import as_model_input
from ..rewards import any_format_reward, boxed_reward, extract_boxed
from ..types import ModelInput, SamplingParams


@dataclass
class EvalResult:
    accuracy: float
    n: int
    mean_tokens: float
    truncated: float
    """Fraction of completions that hit max_tokens without stopping."""
    format_rate: float | None = None
    """Fraction with an answer in the requested format (when `evaluate` was given `extract`)."""
    extra: dict[str, float] = field(default_factory=dict)
    """Mean of each diagnostic reward `evaluate` was given (`extra_rewards`)."""
    items: list[dict] = field(default_factory=list)

    @property
    def accuracy_given_format(self) -> float | None:
        """Accuracy among the answers given in the requested format: separates "learned the format"
        from "learned the task" when both move."""
        if not self.format_rate:
            return None
        return sum(i["reward"] for i in self.items if i["extracted"] is not None) / (self.format_rate * self.n)

    def summary(self) -> dict:
        out = {"accuracy": self.accuracy, "n": self.n, "mean_tokens": self.mean_tokens, "truncated": self.truncated}
        if self.format_rate is not None:
            out.update(format_rate=self.format_rate, accuracy_given_format=self.accuracy_given_format)
        return {**out, **self.extra}


def evaluate(sampler, prompts: Sequence[list[int] | ModelInput], answers: Sequence[str], reward_fn: Callable[[str, str], float],
             max_tokens: int, stop: list[str] | None = None,
             extract: Callable[[str], str | None] | None = None,
             extra_rewards: dict[str, Callable[[str, str], float]] | None = None) -> EvalResult:
    """Greedy-decode every prompt (submitted together, so they decode as one batch) and score it;
    `extract` (the reward's answer extractor) adds the format rate, `extra_rewards` diagnostics."""
    extra_rewards = extra_rewards or {}
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, seed=0, stop=stop)
    futures = [sampler.sample(as_model_input(p), 1, params) for p in prompts]
    items = []
    for future, answer in zip(futures, answers):
        seq = future.result().sequences[0]
        items.append({"completion": seq.text, "answer": answer, "reward": reward_fn(seq.text, answer),
                      "tokens": len(seq.tokens), "stop_reason": seq.stop_reason,
                      "extracted": extract(seq.text) if extract else None,
                      **{name: fn(seq.text, answer) for name, fn in extra_rewards.items()}})
    n = len(items)
    return EvalResult(
        accuracy=sum(i["reward"] for i in items) / n,
        n=n,
        mean_tokens=sum(i["tokens"] for i in items) / n,
        truncated=sum(i["stop_reason"] == "length" for i in items) / n,
        format_rate=sum(i["extracted"] is not None for i in items) / n if extract else None,
        extra={name: sum(i[name] for i in items) / n for name in extra_rewards},
        items=items,
    )


LABELS = {"accuracy": "held-out accuracy", "format_rate": "answers in the requested format",
          "accuracy_given_format": "accuracy among answers in the format",
          "accuracy_any_format": "accuracy, any format (last number)"}
"""Report labels of the summary keys."""


def evaluate_boxed(run, step: int, sampler, prompts: Sequence[list[int]], answers: Sequence[str], max_tokens: int,
                   stop: list[str] | None, name: str | None = None) -> dict[str, float]:
    """The math chapters' held-out evaluation at `step`: `evaluate` with the `\\boxed{}` reward, its
    format rate and the any-format diagnostic; writes `eval/step-NNNN.json` (or `eval/NAME.json`, for a
    model that is not the one trained, e.g. a teacher) and returns the `eval/` metrics."""
    result = evaluate(sampler, prompts, answers, boxed_reward, max_tokens, stop, extract_boxed,
                      {"accuracy_any_format": any_format_reward})
    run.write_eval(name or f"step-{step:04d}", {**result.summary(), "items": result.items})
    return {"eval/accuracy": result.accuracy, "eval/format_rate": result.format_rate,
            "eval/accuracy_any_format": result.extra["accuracy_any_format"]}


def before_after(run, keys: Sequence[str], main: str = "accuracy") -> tuple[dict[str, dict], dict]:
    """(every `step-*` evaluation of a run by name, a summary with `KEY/before` and `KEY/after` for
    each of `keys` plus `before` / `after` of the headline `main`): the first and last held-out evaluations."""
    evals = {name: run.read_eval(name) for name in run.eval_names() if name.startswith("step-")}
    first, last = evals[min(evals)], evals[max(evals)]
    summary = {"before": first[main], "after": last[main]}
    summary.update({f"{k}/{when}": e.get(k) for k in keys for when, e in (("before", first), ("after", last))})
    return evals, summary


def summary_rows(summary: dict, keys: Sequence[str]) -> list[dict]:
    """Rows of a report's before/after table for `keys` of a `before_after` summary (a key without a
    label in `LABELS` is its own label)."""
    return [{"metric": LABELS.get(k, k), "before": summary[f"{k}/before"], "after": summary[f"{k}/after"]} for k in keys]
