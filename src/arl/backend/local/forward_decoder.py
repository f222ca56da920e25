"""Decoding through the model's own forward and its KV cache: how the sampler serves a model that the
fast decoder (decoder.py) does not implement (GPT-2, Phi, OPT, ...).

It has the fast decoder's interface (`prefill`, `build_prefix`, `new_suffix`, `decode`), so the
sampler's batching, per-request seeding, stop handling and row compaction are the same code for both
and a seed gives the same tokens whatever else is in the batch. The logits are the model's own, from
the same forward the trainer runs, so the sampled tokens' logprobs are the trainer's.

It is slower than decoder.py: every sample row carries its own copy of its prompt's keys/values (the
model's attention has no shared-prefix form) and every step pays `transformers`' per-call bookkeeping.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


def cache_argument(model) -> str:
    """The name of the forward's KV-cache argument (and output field): transformers 5.24 renamed
    `past_key_values` to `cache`, and the engine runs on both sides of the rename."""
    return "cache" if "cache" in inspect.signature(type(model).forward).parameters else "past_key_values"


@dataclass
class PromptCache:
    """Prompt keys/values per request, right-aligned to the longest prompt: [R, H, P, D] per layer."""

    k: list[torch.Tensor]
    v: list[torch.Tensor]
    mask_RP: torch.Tensor
    """1 on prompt columns, 0 on the padding before them: the rows' attention mask over the prompt."""


class RowCache:
    """The model's own cache over the batch's rows, prompt then generated keys/values. It is made at
    the first decode step, one copy of the prompt per row, because rows may already have been dropped
    (`select_rows`) after the first token; the model appends to it from then on."""

    def __init__(self):
        self.cache: DynamicCache | None = None
        self.mask_BT: torch.Tensor | None = None

    def select_rows(self, rows: torch.Tensor) -> None:
        if self.cache is not None:
            rows = rows.to(self.mask_BT.device)
            self.cache.batch_select_indices(rows)
            self.mask_BT = self.mask_BT.index_select(0, rows)


class ForwardDecoder:
    """Prefill and batched decode steps for one frozen causal LM, through `model.forward`. The
    arguments that only the fast decoder's cascade attention needs (slots, capacities, the step) are
    accepted so that the sampler calls both alike."""

    def __init__(self, model):
        layer_types = {type(layer) for layer in DynamicCache(config=model.config).layers}
        if layer_types != {DynamicLayer}:  # a sliding window or recurrent state drops or folds positions
            raise NotImplementedError(f"sampling {model.config.model_type!r} needs a full-attention KV cache, and this "
                                      f"model's has {sorted(t.__name__ for t in layer_types)} layers")
        self.model = model
        self.device = model.get_output_embeddings().weight.device
        self.cache_arg = cache_argument(model)
        self.keeps_logits = "logits_to_keep" in inspect.signature(type(model).forward).parameters
        """Whether the forward can return the logits of chosen positions only (a batch of 8192 prompt
        tokens' full logits would take gigabytes for a 50k vocabulary)."""

    def vision_prompt(self, ids, types, pixel_values, grid_thw):
        raise NotImplementedError(f"images need the fast decoder, which does not support "
                                  f"{self.model.config.model_type!r}; use a Qwen2-VL model")

    @torch.inference_mode()
    def prefill(self, prompts: list[list[int]], all_logits: bool, vision: list | None = None):
        """Run prompts as one right-padded batch, as the trainer does. Per prompt: (logits [L, V] if
        `all_logits` else [1, V] for the next token, keys, values), keys/values [H, L, D] per layer.
        `vision` is always None here: `vision_prompt` refuses images first."""
        lengths = [len(p) for p in prompts]
        R, T = len(prompts), max(lengths)
        ids_RT = torch.zeros(R, T, dtype=torch.long)
        mask_RT = torch.zeros(R, T, dtype=torch.long)
        for r, p in enumerate(prompts):
            ids_RT[r, : len(p)] = torch.tensor(p)
            mask_RT[r, : len(p)] = 1
        last_K = torch.tensor(sorted(set(lengths))) - 1  # the positions whose logits are kept: every prompt's last
        keep = {"logits_to_keep": last_K.to(self.device)} if self.keeps_logits and not all_logits else {}
        out = self.model(input_ids=ids_RT.to(self.device), attention_mask=mask_RT.to(self.device), use_cache=True, **keep)
        layers = getattr(out, self.cache_arg).layers
        if all_logits:
            logits = [row[:n] for row, n in zip(out.logits, lengths)]
        else:
            column_R = torch.searchsorted(last_K, torch.tensor(lengths) - 1) if keep else torch.tensor(lengths) - 1
            logits = list(out.logits[torch.arange(R), column_R.to(self.device)][:, None])
        return [(logits[r], [layer.keys[r, :, :n] for layer in layers], [layer.values[r, :, :n] for layer in layers])
                for r, n in enumerate(lengths)]

    def build_prefix(self, prompts_kv: list[tuple[list, list]], n_slots: int) -> PromptCache:
        """Stack the prefilled prompts' keys/values, right-aligned (keys carry their positions already,
        so their column does not matter; the mask hides the padding)."""
        P = max(ks[0].shape[1] for ks, _ in prompts_kv)
        R = len(prompts_kv)
        k = [x.new_zeros(R, x.shape[0], P, x.shape[2]) for x in prompts_kv[0][0]]
        v = [x.new_zeros(R, x.shape[0], P, x.shape[2]) for x in prompts_kv[0][1]]
        mask_RP = torch.zeros(R, P, dtype=torch.long, device=self.device)
        for r, (ks, vs) in enumerate(prompts_kv):
            n = ks[0].shape[1]
            mask_RP[r, P - n:] = 1
            for i in range(len(k)):
                k[i][r, :, P - n:] = ks[i]
                v[i][r, :, P - n:] = vs[i]
        return PromptCache(k, v, mask_RP)

    def new_suffix(self, batch: int, capacity: int) -> RowCache:
        return RowCache()

    @torch.inference_mode()
    def decode(self, tokens_B, positions_B, prefix: PromptCache, suffix: RowCache, t: int, owner_B, slot_B):
        """Logits [B, V] for one new token per row; row b belongs to request `owner_B[b]`, and its token
        is the (t+1)-th generated one, at position `positions_B[b]`."""
        if suffix.cache is None:
            rows = owner_B.to(self.device)
            suffix.cache = DynamicCache(ddp_cache_data=[(k.index_select(0, rows), v.index_select(0, rows))
                                                        for k, v in zip(prefix.k, prefix.v)])
            suffix.mask_BT = prefix.mask_RP.index_select(0, rows)
        suffix.mask_BT = torch.cat([suffix.mask_BT, suffix.mask_BT.new_ones(len(tokens_B), 1)], dim=1)
        out = self.model(input_ids=tokens_B[:, None].to(self.device), attention_mask=suffix.mask_BT,
                         position_ids=positions_B[:, None].to(self.device), use_cache=True,
                         **{self.cache_arg: suffix.cache})
        return out.logits[:, -1]
