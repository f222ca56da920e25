"""The one place that builds datums (DESIGN.md, "Datum alignment").

Position i of `model_input` predicts token i+1. For prompt P and completion C:
`model_input = P + C[:-1]`, `target_tokens = [0]*(len(P)-1) + C`; prompt positions carry advantage 0
and weight 0, so they never receive gradient. A multi-turn trajectory is the same shape with C the
whole stream after the prompt and a mask over it: observation and template tokens inside C carry
advantage 0, logprob 0 and weight 0 too (`trajectory_datum`, `sft_datum` with per-token weights).
A prompt is token ids or a `ModelInput` holding images; an image's positions are prompt positions,
so they carry weight 0 like the rest of the prompt. Images inside the completion (a tool's image
observations, `images`) sit on their `<|image_pad|>` positions, which the mask marks as observation:
context with weight 0 too.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..models.images import extend
from ..types import Datum, ImageChunk, ModelInput

Prompt = Sequence[int] | ModelInput


def rl_datum(prompt: Prompt, completion: Sequence[int], sampler_logprobs: Sequence[float],
             advantage: float | Sequence[float], images: Sequence[ImageChunk] = (),
             image_pad_id: int | None = None) -> Datum:
    """A policy-loss datum; `advantage` is one number for the whole completion or one per token;
    `images` are those inside the completion, each on its run of `image_pad_id` positions."""
    if len(completion) == 0:
        raise ValueError("rl_datum: the completion is empty; skip it instead of training on it")
    if len(sampler_logprobs) != len(completion):
        raise ValueError(f"rl_datum: {len(sampler_logprobs)} logprobs for {len(completion)} completion tokens")
    adv_T = [float(advantage)] * len(completion) if isinstance(advantage, (int, float)) else list(advantage)
    if len(adv_T) != len(completion):
        raise ValueError(f"rl_datum: {len(adv_T)} advantages for {len(completion)} completion tokens")
    n = len(prompt) - 1
    return Datum(
        model_input=extend(prompt, completion[:-1], images, image_pad_id),
        loss_fn_inputs={"target_tokens": [0] * n + list(completion), "logprobs": [0.0] * n + list(sampler_logprobs),
                        "advantages": [0.0] * n + adv_T},
    )


def trajectory_datum(prompt: Prompt, tokens: Sequence[int], mask: Sequence[int], sampler_logprobs: Sequence[float],
                     advantage: float | Sequence[float], images: Sequence[ImageChunk] = (),
                     image_pad_id: int | None = None) -> Datum:
    """A policy-loss datum of a (multi-turn) trajectory: `tokens` is everything after the prompt and
    `mask[t]` is 1 where the policy sampled token t. Token t's target position gets advantage
    A_t * mask_t and logprob lp_t * mask_t, so observation and template tokens are context only.
    A single-turn completion is the case mask = all ones. `images`: the observation images inside `tokens`."""
    if len(mask) != len(tokens):
        raise ValueError(f"trajectory_datum: {len(mask)} mask entries for {len(tokens)} tokens")
    adv_T = [float(advantage)] * len(tokens) if isinstance(advantage, (int, float)) else list(advantage)
    if len(adv_T) != len(tokens):
        raise ValueError(f"trajectory_datum: {len(adv_T)} advantages for {len(tokens)} tokens")
    return rl_datum(prompt, tokens, [lp if m else 0.0 for lp, m in zip(sampler_logprobs, mask, strict=True)],
                    [a if m else 0.0 for a, m in zip(adv_T, mask)], images, image_pad_id)


def sft_datum(prompt: Prompt, completion: Sequence[int], weight: float | Sequence[float] = 1.0,
              images: Sequence[ImageChunk] = (), image_pad_id: int | None = None) -> Datum:
    """A `cross_entropy` datum that trains on the completion only, each token with `weight` (the
    built-in loss is a sum, so 1 / tokens-in-batch makes it a token mean), or one weight per token
    (0 at the observation and template tokens of a multi-turn demonstration; `images`: the observation
    images inside `completion`)."""
    w_T = [float(weight)] * len(completion) if isinstance(weight, (int, float)) else [float(w) for w in weight]
    if len(w_T) != len(completion):
        raise ValueError(f"sft_datum: {len(w_T)} weights for {len(completion)} completion tokens")
    n = len(prompt) - 1
    return Datum(
        model_input=extend(prompt, completion[:-1], images, image_pad_id),
        loss_fn_inputs={"target_tokens": [0] * n + list(completion), "weights": [0.0] * n + w_T},
    )


def marker_datum(tokens: Sequence[int], positions: Sequence[int], targets: Sequence[int], weight: float = 1.0) -> Datum:
    """A `cross_entropy` datum over the whole sequence `tokens` that trains only the prediction at
    each `positions[j]`: there the target is `targets[j]` (not the token that sits there), with
    `weight`; every other position has target 0 and weight 0.

    Alignment as above: `model_input = tokens[:-1]`, and input position p - 1 predicts token p, so
    `target_tokens[p - 1] = targets[j]` for p = positions[j]. The Jev chapter puts a marker token at p
    and supervises the option symbol in its place.
    """
    if len(positions) != len(targets):
        raise ValueError(f"marker_datum: {len(positions)} positions for {len(targets)} targets")
    n = len(tokens) - 1
    target_T, weight_T = [0] * n, [0.0] * n
    for p, t in zip(positions, targets):
        if not 1 <= p <= n:
            raise ValueError(f"marker_datum: position {p} outside 1..{n} (position 0 has nothing before it)")
        target_T[p - 1], weight_T[p - 1] = int(t), float(weight)
    return Datum(model_input=ModelInput.from_ints(list(tokens[:-1])),
                 loss_fn_inputs={"target_tokens": target_T, "weights": weight_T})
