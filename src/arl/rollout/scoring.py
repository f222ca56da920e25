"""Scoring sampled tokens under another model (a teacher, or a KL reference)."""

from __future__ import annotations

from collections.abc import Sequence

from ..types import ModelInput


def score_completions(sampler, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[list[float]]:
    """For each (prompt, completion): the sampler's logprob of every completion token given the prompt
    and the completion tokens before it, aligned with the completion (entry i scores completion[i]).

    `compute_logprobs` returns one value per input token, entry j being log p(token j | tokens < j)
    (entry 0 is None), so the completion's entries start at index len(prompt). All requests are in
    flight at once.
    """
    futures = [sampler.compute_logprobs(ModelInput.from_ints(list(p) + list(c))) for p, c in pairs]
    out = []
    for f, (p, c) in zip(futures, pairs):
        scored = f.result()[len(p):]
        if len(scored) != len(c) or any(x is None for x in scored):
            raise ValueError(f"score_completions: got {len(scored)} logprobs for {len(c)} completion tokens")
        out.append(scored)
    return out


def forward_tokens(prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[Sequence[int]]]) -> float:
    """Tokens another model's forward passes read for these requests, as a compute ledger counts them
    (`teacher/forward_tokens`, `critic/forward_tokens`): each prompt once with all of its completions
    (`completions[i]` are prompt i's, which share its cache), sum_i |prompt_i| + sum_k |completion_ik|."""
    return float(sum(len(p) + sum(len(c) for c in cs) for p, cs in zip(prompts, completions, strict=True)))
