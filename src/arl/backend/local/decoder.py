"""Incremental decoding for Llama-family models (Llama, Qwen2, Qwen3, SmolLM2, and Qwen2-VL's language
model) with shared-prefix attention.

`transformers`' `generate` spends most of a tiny model's time on per-step bookkeeping, copies the
prompt for every sample, and re-reads those copies at every step. A sampler's weights are frozen, so
this packs them once (q/k/v into one matrix, gate/up into another), takes the rotary table from the
model's own rotary embedding, and decodes with two caches:

- a **prefix cache** holding each request's prompt keys/values once, shared by all its samples;
- a **suffix cache** holding each sample's generated keys/values.

Every decode step attends to both: one softmax over [prompt scores, generated scores], the prompt
part computed per request for all of its samples at once (cascade attention). With a group of G
samples per prompt the prompt's cache is read once instead of G times per step.

A prompt that starts with a sequence decoded before (a multi-turn rollout's next turn) is prefilled from
that sequence's keys/values on (`extend`), so only its new tokens run.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


def upcast(t: torch.Tensor) -> torch.Tensor:
    """Logits in at least float32 (a bf16 or fp16 model's are upcast; a float64 model's stay float64)."""
    return t if t.dtype == torch.float64 else t.float()


SUPPORTED_MODEL_TYPES = {"llama", "qwen2", "qwen3", "mistral", "qwen2_vl_text"}


def unsupported(model) -> str | None:
    """Why the fast decoder cannot run `model` (None: it can); the sampler then decodes through the
    model's own forward (forward_decoder.py)."""
    cfg = model.config.get_text_config()
    if cfg.model_type not in SUPPORTED_MODEL_TYPES:
        return f"fast decoding supports {sorted(SUPPORTED_MODEL_TYPES)}, not {cfg.model_type}"
    if cfg.hidden_act != "silu":
        return f"fast decoding expects a SiLU MLP, not {cfg.hidden_act}"
    return None


@dataclass
class _Layer:
    """One decoder layer's weights, packed. The RMSNorm scales that precede a projection are folded
    into its columns (W diag(g) x_hat = W (g * x_hat)), which saves a kernel per norm per step."""

    w_qkv: torch.Tensor
    b_qkv: torch.Tensor | None
    qk_norm: torch.Tensor | None
    """Qwen3's per-head q/k RMSNorm weights, stacked per head: [H + H_kv, D]."""
    w_o: torch.Tensor
    b_o: torch.Tensor | None
    w_gate_up: torch.Tensor
    b_gate_up: torch.Tensor | None
    w_down: torch.Tensor
    b_down: torch.Tensor | None


def _cat_bias(*linears):
    biases = [lin.bias for lin in linears]
    if all(b is None for b in biases):
        return None
    return torch.cat([b if b is not None else torch.zeros(lin.out_features) for b, lin in zip(biases, linears)])


@dataclass
class PrefixCache:
    """Prompt keys/values per request, left-padded to the longest prompt: [R, H_kv, P, D] per layer."""

    k: list[torch.Tensor]
    v: list[torch.Tensor]
    bias_R11P: torch.Tensor
    """0 on prompt columns, -inf on padding: added to the scores."""
    n_slots: int
    """Samples per request, at most (rows are placed at slot = their sample index)."""


class SuffixCache:
    """Generated keys/values per sample: [B, H_kv, capacity, D] per layer, grown by doubling."""

    def __init__(self, n_layers, batch, n_kv_heads, capacity, head_dim, dtype, device):
        shape = (batch, n_kv_heads, capacity, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]

    @property
    def capacity(self) -> int:
        return self.k[0].shape[2]

    def ensure(self, length: int) -> None:
        if length <= self.capacity:
            return
        extra = max(self.capacity, length - self.capacity)
        self.k = [torch.cat([t, t.new_zeros(*t.shape[:2], extra, t.shape[3])], dim=2) for t in self.k]
        self.v = [torch.cat([t, t.new_zeros(*t.shape[:2], extra, t.shape[3])], dim=2) for t in self.v]

    def select_rows(self, rows: torch.Tensor) -> None:
        self.k = [k.index_select(0, rows) for k in self.k]
        self.v = [v.index_select(0, rows) for v in self.v]


class Decoder:
    """Prefill and batched decode steps for one frozen causal LM."""

    @torch.no_grad()
    def __init__(self, model):
        reason = unsupported(model)
        if reason is not None:
            raise NotImplementedError(reason)
        cfg = model.config.get_text_config()
        self.vlm = model.model if hasattr(model.model, "language_model") else None
        """The multimodal body (vision tower, RoPE index) of a vision-language model; None for text models."""
        body = self.vlm.language_model if self.vlm is not None else model.model
        attn0 = body.layers[0].self_attn
        self.head_dim = attn0.head_dim
        self.n_heads = cfg.num_attention_heads
        self.n_kv_heads = cfg.num_key_value_heads
        self.group = self.n_heads // self.n_kv_heads
        self.scaling = attn0.scaling
        self.eps = cfg.rms_norm_eps
        self.embed = body.embed_tokens.weight
        self.lm_head = model.get_output_embeddings().weight * body.norm.weight  # a copy: never the tied embedding
        self.layers = []
        for layer in body.layers:
            a, m = layer.self_attn, layer.mlp
            self.layers.append(_Layer(
                w_qkv=torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]) * layer.input_layernorm.weight,
                b_qkv=_cat_bias(a.q_proj, a.k_proj, a.v_proj),
                qk_norm=torch.cat([a.q_norm.weight.expand(self.n_heads, -1),
                                   a.k_norm.weight.expand(self.n_kv_heads, -1)]) if hasattr(a, "q_norm") else None,
                w_o=a.o_proj.weight, b_o=a.o_proj.bias,
                w_gate_up=torch.cat([m.gate_proj.weight, m.up_proj.weight]) * layer.post_attention_layernorm.weight,
                b_gate_up=_cat_bias(m.gate_proj, m.up_proj),
                w_down=m.down_proj.weight, b_down=m.down_proj.bias,
            ))
        self.dtype, self.device = self.embed.dtype, self.embed.device
        positions = torch.arange(cfg.max_position_embeddings, device=self.device)[None]
        cos, sin = body.rotary_emb(self.embed[:1], positions)  # the model's own RoPE, scaling included
        half = self.head_dim // 2
        self.cos_PD = cos[0]
        self.sin_PD = torch.cat([-sin[0, :, :half], sin[0, :, half:]], dim=-1)
        if self.vlm is not None:  # which of the three coordinates rotates each dimension
            sections = cfg.rope_parameters["mrope_section"]
            axis_F = torch.cat([torch.full((n,), i % 3) for i, n in enumerate(sections)])
            self.axis_D = torch.cat([axis_F, axis_F]).to(self.device)

    # -- pieces shared by prefill and decode ---------------------------------------------------
    def _rope(self, x_BHTD, cos_B1TD, sin_B1TD):
        """x cos + rotate_half(x) sin, with rotate_half(x) = roll(x, D/2) * [-1]*D/2 + [1]*D/2; the sign
        is folded into the sine table."""
        return x_BHTD * cos_B1TD + x_BHTD.roll(self.head_dim // 2, dims=-1) * sin_B1TD

    def _qkv(self, L: _Layer, x_BTC, cos, sin):
        """Queries [B, H, T, D] and keys/values [B, H_kv, T, D] of one layer, RoPE applied.

        Queries and keys are adjacent in the packed projection, so they are normalised and rotated
        as one tensor of H + H_kv heads (fewer kernel launches per step)."""
        B, T, _ = x_BTC.shape
        hd, H, Hkv = self.head_dim, self.n_heads, self.n_kv_heads
        h = self._normalize(x_BTC)
        qk, v = F.linear(h, L.w_qkv, L.b_qkv).split([(H + Hkv) * hd, Hkv * hd], dim=-1)
        qk = qk.view(B, T, H + Hkv, hd)
        if L.qk_norm is not None:
            qk = self._normalize(qk) * L.qk_norm
        q, k = self._rope(qk.transpose(1, 2), cos, sin).split([H, Hkv], dim=1)
        return q, k, v.view(B, T, Hkv, hd).transpose(1, 2)

    def _finish_layer(self, L: _Layer, x_BTC, attn_BTC):
        x_BTC = x_BTC + F.linear(attn_BTC, L.w_o, L.b_o)
        h = self._normalize(x_BTC)
        gate, up = F.linear(h, L.w_gate_up, L.b_gate_up).chunk(2, dim=-1)
        return x_BTC + F.linear(F.silu(gate) * up, L.w_down, L.b_down)

    def _logits(self, x):
        return F.linear(self._normalize(x), self.lm_head)

    def _normalize(self, x):
        """RMSNorm without its scale (folded into the next projection)."""
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def _rope_tables(self, positions):
        return self.cos_PD[positions][:, None], self.sin_PD[positions][:, None]

    def _mrope_tables(self, positions_R3T):
        """Multimodal RoPE: dimension d of position t rotates by coordinate `axis_D[d]` of its triple."""
        R, _, T = positions_R3T.shape
        index = self.axis_D.view(1, 1, 1, -1).expand(R, 1, T, -1)
        cos = self.cos_PD[positions_R3T].gather(1, index)
        sin = self.sin_PD[positions_R3T].gather(1, index)
        return cos, sin

    @torch.inference_mode()
    def vision_prompt(self, ids: list[int], types: list[int], pixel_values, grid_thw):
        """(embeddings [L, C], positions [3, L], delta) of a prompt holding images: the vision tower's
        features at the image positions (`types` 1), Qwen2-VL's RoPE index, and the shift of the
        positions after the prompt (generated token s sits at position len(ids) + delta + s)."""
        ids_1L = torch.tensor([ids], device=self.device)
        x_LC = F.embedding(ids_1L[0], self.embed)
        features = self.vlm.get_image_features(pixel_values.to(self.device), grid_thw.to(self.device), return_dict=True)
        is_image_L = torch.tensor(types, device=self.device) == 1
        x_LC[is_image_L] = torch.cat(features.pooler_output).to(x_LC.dtype)
        positions_31L, delta = self.vlm.get_rope_index(ids_1L, mm_token_type_ids=torch.tensor([types], device=self.device),
                                                       image_grid_thw=grid_thw.to(self.device))
        return x_LC, positions_31L[:, 0], int(delta)

    # -- prefill -------------------------------------------------------------------------------
    @torch.inference_mode()
    def prefill(self, prompts: list[list[int]], all_logits: bool, vision: list | None = None):
        """Run prompts as one right-padded batch (causal attention never looks at the padding after a
        prompt). Per prompt: (logits [L, V] if `all_logits` else [1, V] for the next token, keys,
        values), keys/values [H_kv, L, D] per layer. `vision[r]`, when given and not None, is prompt
        r's (embeddings, positions) from `vision_prompt`."""
        lengths = [len(p) for p in prompts]
        R, T = len(prompts), max(lengths)
        ids_RT = torch.zeros(R, T, dtype=torch.long)
        for r, p in enumerate(prompts):
            ids_RT[r, : len(p)] = torch.tensor(p)
        x = F.embedding(ids_RT.to(self.device), self.embed)
        if vision is not None and any(v is not None for v in vision):
            positions_R3T = torch.arange(T, device=self.device).expand(R, 3, T).clone()
            for r, v in enumerate(vision):
                if v is not None:
                    x[r, : lengths[r]] = v[0]
                    positions_R3T[r, :, : lengths[r]] = v[1]
            cos, sin = self._mrope_tables(positions_R3T)
        else:
            cos, sin = self._rope_tables(torch.arange(T, device=self.device)[None])
        ks, vs = [], []
        for L in self.layers:
            q, k, v = self._qkv(L, x, cos, sin)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scaling,
                                                 enable_gqa=self.n_kv_heads != self.n_heads)
            x = self._finish_layer(L, x, out.transpose(1, 2).reshape(R, T, -1))
            ks.append(k)
            vs.append(v)
        if all_logits:
            logits = [row[:n] for row, n in zip(self._logits(x), lengths)]
        else:
            last = x[torch.arange(R), torch.tensor(lengths) - 1]
            logits = list(self._logits(last)[:, None])
        return [(logits[r], [k[r, :, :n] for k in ks], [v[r, :, :n] for v in vs]) for r, n in enumerate(lengths)]

    @torch.inference_mode()
    def extend(self, pasts: list[tuple[list, list]], tails: list[list[int]]):
        """Prefill `tails[r]` after the tokens whose keys/values `pasts[r]` holds ([H_kv, m_r, D] per layer, from
        position 0): a multi-turn rollout's next prompt is its last one, the sampled turn and the observation,
        and only that tail is run again. Per prompt: (logits [1, V] for the next token, keys, values of the whole
        prompt). Rows are right-padded; the cached keys are left-aligned and padded to the longest past."""
        R, T, M = len(tails), max(len(t) for t in tails), max(ks[0].shape[1] for ks, _ in pasts)
        past_R = torch.tensor([ks[0].shape[1] for ks, _ in pasts], device=self.device)
        lengths = [len(t) for t in tails]
        ids_RT = torch.zeros(R, T, dtype=torch.long)
        for r, t in enumerate(tails):
            ids_RT[r, : len(t)] = torch.tensor(t)
        positions_RT = past_R[:, None] + torch.arange(T, device=self.device)[None]
        cos, sin = self._rope_tables(positions_RT.clamp(max=self.cos_PD.shape[0] - 1))
        col = torch.arange(M + T, device=self.device)
        query_T1 = torch.arange(T, device=self.device)[:, None]
        # a query sees its row's cached columns (< m_r) and the tail up to itself (causal)
        mask_R1TC = ((col[None, None] < past_R[:, None, None]) | ((col[None] >= M) & (col[None] - M <= query_T1))[None])[:, None]
        x = F.embedding(ids_RT.to(self.device), self.embed)
        ks, vs = [], []
        for i, L in enumerate(self.layers):
            q, k, v = self._qkv(L, x, cos, sin)
            past_k, past_v = k.new_zeros(R, self.n_kv_heads, M, self.head_dim), v.new_zeros(R, self.n_kv_heads, M, self.head_dim)
            for r, (pk, pv) in enumerate(pasts):
                past_k[r, :, : pk[i].shape[1]] = pk[i]
                past_v[r, :, : pv[i].shape[1]] = pv[i]
            out = F.scaled_dot_product_attention(q, torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2),
                                                 attn_mask=mask_R1TC, scale=self.scaling,
                                                 enable_gqa=self.n_kv_heads != self.n_heads)
            x = self._finish_layer(L, x, out.transpose(1, 2).reshape(R, T, -1))
            ks.append(k)
            vs.append(v)
        last = x[torch.arange(R), torch.tensor(lengths) - 1]
        logits = self._logits(last)[:, None]
        return [(logits[r], [torch.cat([pk, ks[i][r, :, :n]], dim=1) for i, pk in enumerate(pasts[r][0])],
                 [torch.cat([pv, vs[i][r, :, :n]], dim=1) for i, pv in enumerate(pasts[r][1])])
                for r, n in enumerate(lengths)]

    def build_prefix(self, prompts_kv: list[tuple[list, list]], n_slots: int) -> PrefixCache:
        """Stack the prefilled prompts' keys/values, right-aligned, into one PrefixCache."""
        P = max(ks[0].shape[1] for ks, _ in prompts_kv)
        R = len(prompts_kv)
        shape = (R, self.n_kv_heads, P, self.head_dim)
        k = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in self.layers]
        v = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in self.layers]
        bias = torch.full((R, 1, 1, P), float("-inf"), dtype=self.dtype, device=self.device)
        for r, (ks, vs) in enumerate(prompts_kv):
            n = ks[0].shape[1]
            bias[r, ..., P - n:] = 0.0
            for i in range(len(self.layers)):
                k[i][r, :, P - n:] = ks[i]
                v[i][r, :, P - n:] = vs[i]
        return PrefixCache(k, v, bias, n_slots)

    def new_suffix(self, batch: int, capacity: int) -> SuffixCache:
        return SuffixCache(len(self.layers), batch, self.n_kv_heads, capacity, self.head_dim, self.dtype, self.device)

    # -- decode --------------------------------------------------------------------------------
    @staticmethod
    def _to_slots(x_BKGX, R, S, owner_B, slot_B):
        """Rows [B, Hkv, G, X] -> per-request blocks [R, Hkv, S*G, X] (empty slots zero)."""
        B, Hkv, G, X = x_BKGX.shape
        if owner_B is None:
            x_RSKGX = x_BKGX.view(R, S, Hkv, G, X)
        else:
            x_RSKGX = x_BKGX.new_zeros(R, S, Hkv, G, X)
            x_RSKGX[owner_B, slot_B] = x_BKGX
        return x_RSKGX.transpose(1, 2).reshape(R, Hkv, S * G, X)

    def _from_slots(self, x_RKSGX, owner_B, slot_B):
        """Inverse of `_to_slots`: [R, Hkv, S*G, X] -> rows [B, Hkv, G, X]."""
        R, Hkv, SG, X = x_RKSGX.shape
        x_RSKGX = x_RKSGX.view(R, Hkv, SG // self.group, self.group, X).transpose(1, 2)
        if owner_B is None:
            return x_RSKGX.reshape(-1, Hkv, self.group, X)
        return x_RSKGX[owner_B, slot_B]

    @torch.inference_mode()
    def decode(self, tokens_B, positions_B, prefix: PrefixCache, suffix: SuffixCache, t: int, owner_B, slot_B):
        """Logits [B, V] for one new token per row; row b is sample `slot_B[b]` of request `owner_B[b]`,
        and its token is the (t+1)-th generated one (written at suffix column t)."""
        B = tokens_B.shape[0]
        Hkv, G, D = self.n_kv_heads, self.group, self.head_dim
        R, S, P = prefix.bias_R11P.shape[0], prefix.n_slots, prefix.bias_R11P.shape[-1]
        if B == R * S:  # every request's rows all present, in slot order: slots are a plain view
            owner_B = slot_B = None
        suffix.ensure(t + 1)
        x = F.embedding(tokens_B[:, None], self.embed)
        cos, sin = self._rope_tables(positions_B[:, None])
        for i, L in enumerate(self.layers):
            q, k, v = self._qkv(L, x, cos, sin)
            suffix.k[i][:, :, t] = k[:, :, 0]
            suffix.v[i][:, :, t] = v[:, :, 0]
            qg_BKGD = q.view(B, Hkv, G, D) * self.scaling  # query head h = kv head h // G (repeat_kv order)
            ks, vs = suffix.k[i][:, :, : t + 1], suffix.v[i][:, :, : t + 1]
            s_suf = qg_BKGD @ ks.transpose(-1, -2)  # [B, Hkv, G, t+1]
            s_pre_rows = self._from_slots(self._to_slots(qg_BKGD, R, S, owner_B, slot_B) @ prefix.k[i].transpose(-1, -2)
                                          + prefix.bias_R11P, owner_B, slot_B)  # [B, Hkv, G, P]
            probs = torch.softmax(torch.cat([s_pre_rows, s_suf], dim=-1), dim=-1)
            p_pre, p_suf = probs.split([P, t + 1], dim=-1)
            o_pre = self._from_slots(self._to_slots(p_pre, R, S, owner_B, slot_B) @ prefix.v[i], owner_B, slot_B)
            out = (o_pre + p_suf @ vs).reshape(B, 1, Hkv * G * D)
            x = self._finish_layer(L, x, out)
        return self._logits(x)[:, 0]
