"""Incremental decoding for Llama-family models (Llama, Qwen2, Qwen3, SmolLM2) with a preallocated KV cache.

`transformers`' `generate` spends most of its time on per-step bookkeeping when the model is tiny. A
sampler's weights are frozen, so this packs them once (q/k/v into one matrix, gate/up into another),
takes the rotary table from the model's own rotary embedding, and runs each step as a short list of
fused kernels over a static cache with one boolean mask. That is what lets one prefill per prompt be
shared by all its samples and many requests decode as one batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

SUPPORTED_MODEL_TYPES = {"llama", "qwen2", "qwen3", "mistral"}


class KVCache:
    """Per-layer key/value tensors [B, H_kv, L_max, D]; column c of every row is absolute slot c."""

    def __init__(self, n_layers: int, batch: int, n_kv_heads: int, max_len: int, head_dim: int, dtype, device):
        shape = (batch, n_kv_heads, max_len, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]

    def select_rows(self, rows: torch.Tensor) -> None:
        self.k = [k.index_select(0, rows) for k in self.k]
        self.v = [v.index_select(0, rows) for v in self.v]


@dataclass
class _Layer:
    ln_attn: torch.Tensor
    w_qkv: torch.Tensor
    b_qkv: torch.Tensor | None
    q_norm: torch.Tensor | None
    k_norm: torch.Tensor | None
    w_o: torch.Tensor
    b_o: torch.Tensor | None
    ln_mlp: torch.Tensor
    w_gate_up: torch.Tensor
    b_gate_up: torch.Tensor | None
    w_down: torch.Tensor
    b_down: torch.Tensor | None


def _cat_bias(*linears):
    biases = [lin.bias for lin in linears]
    if all(b is None for b in biases):
        return None
    return torch.cat([b if b is not None else torch.zeros(lin.out_features) for b, lin in zip(biases, linears)])


class Decoder:
    """Runs a frozen causal LM over new tokens, writing their keys/values into a KVCache."""

    @torch.no_grad()
    def __init__(self, model):
        cfg = model.config
        if cfg.model_type not in SUPPORTED_MODEL_TYPES:
            raise NotImplementedError(f"fast decoding supports {sorted(SUPPORTED_MODEL_TYPES)}, not {cfg.model_type}")
        if cfg.hidden_act != "silu":
            raise NotImplementedError(f"fast decoding expects a SiLU MLP, not {cfg.hidden_act}")
        body = model.model
        attn0 = body.layers[0].self_attn
        self.head_dim = attn0.head_dim
        self.n_heads = cfg.num_attention_heads
        self.n_kv_heads = cfg.num_key_value_heads
        self.scaling = attn0.scaling
        self.eps = cfg.rms_norm_eps
        self.embed = body.embed_tokens.weight
        self.final_norm = body.norm.weight
        self.lm_head = model.get_output_embeddings().weight
        self.layers = []
        for layer in body.layers:
            a, m = layer.self_attn, layer.mlp
            self.layers.append(_Layer(
                ln_attn=layer.input_layernorm.weight,
                w_qkv=torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]),
                b_qkv=_cat_bias(a.q_proj, a.k_proj, a.v_proj),
                q_norm=a.q_norm.weight if hasattr(a, "q_norm") else None,
                k_norm=a.k_norm.weight if hasattr(a, "k_norm") else None,
                w_o=a.o_proj.weight, b_o=a.o_proj.bias,
                ln_mlp=layer.post_attention_layernorm.weight,
                w_gate_up=torch.cat([m.gate_proj.weight, m.up_proj.weight]),
                b_gate_up=_cat_bias(m.gate_proj, m.up_proj),
                w_down=m.down_proj.weight, b_down=m.down_proj.bias,
            ))
        self.dtype, self.device = self.embed.dtype, self.embed.device
        positions = torch.arange(cfg.max_position_embeddings, device=self.device)[None]
        cos, sin = body.rotary_emb(self.embed[:1], positions)  # the model's own RoPE, scaling included
        self.cos_PD, self.sin_PD = cos[0], sin[0]
        self.split = [self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim, self.n_kv_heads * self.head_dim]

    def new_cache(self, batch: int, max_len: int) -> KVCache:
        return KVCache(len(self.layers), batch, self.n_kv_heads, max_len, self.head_dim, self.dtype, self.device)

    def _rope(self, x_BHTD, cos_B1TD, sin_B1TD):
        half = x_BHTD.shape[-1] // 2
        rotated = torch.cat((-x_BHTD[..., half:], x_BHTD[..., :half]), dim=-1)
        return x_BHTD * cos_B1TD + rotated * sin_B1TD

    @torch.inference_mode()
    def forward(
        self,
        tokens_BT: torch.Tensor,
        positions_BT: torch.Tensor,
        cache: KVCache,
        start: int,
        mask_BTL: torch.Tensor | None,
        last_only: bool = False,
    ) -> torch.Tensor:
        """Logits [B, T, V] for `tokens_BT` written at cache columns [start, start+T).

        `positions_BT` are the tokens' positions within their own sequence (for RoPE); `mask_BTL` says
        which cache columns [0, start+T) each query may attend to (None = plain causal from column 0).
        `last_only` computes logits for the last position alone ([B, 1, V]).
        """
        B, T = tokens_BT.shape
        end = start + T
        hd, eps = self.head_dim, self.eps
        x = F.embedding(tokens_BT, self.embed)
        cos = self.cos_PD[positions_BT][:, None]
        sin = self.sin_PD[positions_BT][:, None]
        mask = None if mask_BTL is None else mask_BTL[:, None, :, :end]
        for i, L in enumerate(self.layers):
            h = F.rms_norm(x, (x.shape[-1],), L.ln_attn, eps)
            q, k, v = F.linear(h, L.w_qkv, L.b_qkv).split(self.split, dim=-1)
            q = q.view(B, T, self.n_heads, hd)
            k = k.view(B, T, self.n_kv_heads, hd)
            if L.q_norm is not None:
                q = F.rms_norm(q, (hd,), L.q_norm, eps)
                k = F.rms_norm(k, (hd,), L.k_norm, eps)
            q = self._rope(q.transpose(1, 2), cos, sin)
            cache.k[i][:, :, start:end] = self._rope(k.transpose(1, 2), cos, sin)
            cache.v[i][:, :, start:end] = v.view(B, T, self.n_kv_heads, hd).transpose(1, 2)
            out = F.scaled_dot_product_attention(
                q, cache.k[i][:, :, :end], cache.v[i][:, :, :end],
                attn_mask=mask, is_causal=mask is None and T > 1, scale=self.scaling,
                enable_gqa=self.n_kv_heads != self.n_heads,
            )
            x = x + F.linear(out.transpose(1, 2).reshape(B, T, -1), L.w_o, L.b_o)
            gate, up = F.linear(F.rms_norm(x, (x.shape[-1],), L.ln_mlp, eps), L.w_gate_up, L.b_gate_up).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, L.w_down, L.b_down)
        if last_only:
            x = x[:, -1:]
        return F.linear(F.rms_norm(x, (x.shape[-1],), self.final_norm, eps), self.lm_head)
