"""The fixed evaluation protocol of the agent chapters: one greedy episode per held-out item
(temperature 0, seed 0, the same budgets every time), so "before" and "after" compare like with like.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..rollout.multiturn import Budgets, ChatTokens, rollout_groups, summarize


def evaluate_agent(run, step: int, sampler, envs: Sequence, tags: Sequence[str], chat: ChatTokens, budgets: Budgets,
                   items: Sequence[dict], main: str, name: str | None = None, counters: Sequence[str] = (),
                   stop_reasons: Sequence[str] = (), score=None) -> dict[str, float]:
    """Play every environment once, greedily; write `eval/step-NNNN.json` (or `eval/NAME.json`): the
    summary (`summarize`), the same per tag (`<tag>/<key>`, e.g. `hop2/correct`) and every trajectory
    with its item (question, answers, ...); return the summary as `eval/` metrics, `main` (the
    chapter's headline, e.g. "em") first, which is the one comparisons test. `counters` and
    `stop_reasons` go to `summarize` (an environment's metrics reported even when no episode had them);
    `score(envs)`, given, adds scores of the played environments as a whole (Spec-o3's macro-F1)."""
    trajectories = [g[0] for g in rollout_groups(sampler, [[e] for e in envs], chat, budgets, 0.0, 0)]
    scored = score(envs) if score is not None else {}
    summary = {main: 0.0, **summarize(trajectories, counters, stop_reasons), **scored}  # a metric no episode reported (none answered) is 0
    for tag in sorted(set(tags)):
        tagged = [t for t, tg in zip(trajectories, tags) if tg == tag]
        per_tag = {**({} if main in scored else {main: 0.0}), **summarize(tagged, counters)}
        summary.update({f"{tag}/{k}": v for k, v in per_tag.items() if not k.startswith("stop/")})
    rows = [{**item, "tag": tag, **t.to_json()} for item, tag, t in zip(items, tags, trajectories)]
    run.write_eval(name or f"step-{step:04d}", {**summary, "n": len(trajectories), "items": rows})
    return {f"eval/{main}": summary[main], **{f"eval/{k}": v for k, v in summary.items()}}

