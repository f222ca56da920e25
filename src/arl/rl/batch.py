"""What a step samples and what it logs about it: the prompt stream, groups of samples with their
seeds, the rollouts that carry signal, and the step metrics every group chapter reports.

Advantages are values a recipe holds (`adv_BG`), never written into the trajectories they belong to.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence

from .. import advantages
from ..models.images import as_model_input
from ..rollout.multiturn import summarize
from ..rollout.seeds import request_seed
from ..types import ModelInput, SamplingParams
from .update import Rollout


def draw(items: Sequence, index: int):
    """The `index`-th item of the training stream: epoch after epoch (`len(items)` draws each) through
    `items`, each epoch in its own fixed shuffled order, the same for every arm and seed of a comparison,
    so prompts differ between two runs only if they sample differently."""
    epoch, position = divmod(index, len(items))
    return items[_order(len(items), epoch)[position]]


@functools.lru_cache(maxsize=64)
def _order(n: int, epoch: int) -> tuple[int, ...]:
    """A permutation of range(n), fixed by (n, epoch)."""
    order = list(range(n))
    random.Random(f"draw-{n}-{epoch}").shuffle(order)
    return tuple(order)


def step_items(items: Sequence, step: int, batch_prompts: int) -> list:
    """The items of step `step` (0-based): the next `batch_prompts` of the `draw` stream."""
    return [draw(items, step * batch_prompts + i) for i in range(batch_prompts)]


def sample_groups(sampler, prompts: Sequence[list[int] | ModelInput], cfg, step: int, stop: list[str], first: int = 0) -> list:
    """`cfg.group_size` samples of each prompt, all requests in flight at once; prompt i of the step
    (counted from `first`, for refills) is request `first + i` of `request_seed`, so no two share a seed."""
    futures = [sampler.sample(as_model_input(p), cfg.group_size,
                              SamplingParams(max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                                             seed=request_seed(cfg.seed, step, first + i), stop=stop))
               for i, p in enumerate(prompts)]
    return [f.result().sequences for f in futures]


def with_signal(prompts: Sequence[list[int]], groups, adv_BG) -> list[Rollout]:
    """The sampled completions that carry signal, as `Rollout`s of their prompt: a non-zero advantage
    (a group whose rewards all tie has none), or a per-token one (on-policy distillation: always)."""
    return [Rollout(p, s.tokens, s.logprobs, a) for p, seqs, advs in zip(prompts, groups, adv_BG)
            for s, a in zip(seqs, advs) if a != 0]


def by_group(values_K: Sequence, group_size: int) -> list[list]:
    """A flat list of per-completion values (prompt by prompt, `group_size` each) cut back into groups."""
    return [list(values_K[b:b + group_size]) for b in range(0, len(values_K), group_size)]


def episode_rewards(groups: Sequence[Sequence]) -> list[list[float]]:
    """Each episode's reward, as its environment graded it (`Trajectory.reward`), by group."""
    return [[t.reward for t in g] for g in groups]


def episode_advantages(groups: Sequence[Sequence], scale: str) -> tuple[list[list[float]], list[Rollout]]:
    """(each episode's group-relative advantage, r - mean(group) (`scale` "std": divided by the group's
    std; a degenerate group's all 0), the episodes with signal as `Rollout`s of their whole stream). The
    mask marks the policy's tokens: observation and template tokens are context, never trained."""
    adv_BG, _ = advantages.batch_advantages(episode_rewards(groups), scale)
    return adv_BG, [Rollout(t.model_prompt, t.tokens, t.logprobs, a, t.mask, t.images, t.image_pad_id)
                    for g, adv_G in zip(groups, adv_BG) for t, a in zip(g, adv_G) if a]


def frac_degenerate(rewards_BG: Sequence[Sequence[float]]) -> float:
    """The share of groups whose rewards all tie: they carry no signal (their advantages are 0)."""
    return sum(map(advantages.is_degenerate, rewards_BG)) / len(rewards_BG)


def group_metrics(rewards_BG, groups, kept: Sequence[Rollout], t_sample: float, t_total: float) -> dict[str, float]:
    """The step metrics every single-turn group chapter logs: rewards, the share of groups without
    signal, lengths, the share cut at max_tokens, the sampled tokens' entropy, what was trained, timings.

    `rollout/entropy` = -mean_t log pi(y_t) over every sampled token: the Monte-Carlo estimate of the
    sampling distribution's per-token entropy (exact in expectation), which clip-higher exists to keep
    from collapsing (DAPO, Yu et al. 2025, sec. 3.1)."""
    flat = [r for rs in rewards_BG for r in rs]
    seqs = [s for g in groups for s in g]
    logps = [x for s in seqs for x in s.logprobs]
    return {
        "reward/mean": sum(flat) / len(flat),
        "reward/frac_degenerate": frac_degenerate(rewards_BG),
        "rollout/len_mean": sum(len(s.tokens) for s in seqs) / len(flat),
        "rollout/truncated_frac": sum(s.stop_reason == "length" for s in seqs) / len(seqs),
        "rollout/entropy": -sum(logps) / len(logps) if logps else 0.0,
        "train/datums": float(len(kept)),
        "train/tokens": float(sum(r.trained_tokens() for r in kept)),
        "time/sample": t_sample,
        "time/train": t_total - t_sample,
        "time/step": t_total,
    }


def episode_metrics(groups: Sequence[Sequence], counters: Sequence[str] = (), stop_reasons: Sequence[str] = ()) -> dict[str, float]:
    """What an agent chapter's episodes (groups of multi-turn `Trajectory`s) did: the rollout summary
    (`rollout/...`, `arl.rollout.multiturn.summarize` with the environment's `counters` and
    `stop_reasons`), the mean reward and the share of groups without signal."""
    flat = [t for g in groups for t in g]
    return {**{f"rollout/{k}": v for k, v in summarize(flat, counters, stop_reasons).items()},
            "reward/mean": sum(t.reward for t in flat) / len(flat),
            "reward/frac_degenerate": frac_degenerate(episode_rewards(groups))}


def tagged_metrics(groups: Sequence[Sequence], tags: Sequence[str], key: str) -> dict[str, float]:
    """The episodes' mean `key` (an environment metric: em, won, ...) per tag of their item, as
    `rollout/TAG/KEY` (hop1/em, quest2/won): which kind of item the step's reward came from."""
    by_tag: dict[str, list[float]] = {}
    for tag, g in zip(tags, groups):
        by_tag.setdefault(tag, []).extend(t.metrics.get(key, 0.0) for t in g)
    return {f"rollout/{tag}/{key}": sum(v) / len(v) for tag, v in sorted(by_tag.items())}


def trained_metrics(kept: Sequence[Rollout], t_sample: float, t_total: float) -> dict[str, float]:
    """What a multi-turn step trained on (the policy's tokens) and what was masked context, and its timings."""
    return {"train/datums": float(len(kept)), "train/tokens": float(sum(r.trained_tokens() for r in kept)),
            "train/masked_tokens": float(sum(len(r.tokens) - r.trained_tokens() for r in kept)),
            "time/sample": t_sample, "time/train": t_total - t_sample, "time/step": t_total}
