"""The local training engine: a Hugging Face causal LM (LoRA via peft, or full fine-tuning) that runs
`forward`, `forward_backward` with the built-in losses, and AdamW steps, in PyTorch.

Every method runs on the engine thread (engine.py). Loss reduction follows Tinker: a call's loss is the sum over all its tokens, so splitting a call into
micro-batches (to bound memory) and summing their gradients gives the same gradient as one pass.
"""

from __future__ import annotations

import copy
import math
import warnings
from dataclasses import asdict, dataclass

import torch
from transformers import DynamicCache

from ... import checkpoints, losses, models, settings
from ...types import Datum, ForwardBackwardOutput, ImageChunk, NonFiniteError, SampledProvenanceSpan, TensorData
from .decoder import upcast
from .forward_decoder import cache_argument

ATTN_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_MODULES = ("gate_proj", "up_proj", "down_proj")
LORA_ALPHA = 32
LOGIT_BUDGET = 64 * 2**20
"""Max logits (tokens x vocab) materialised per micro-batch: 256 MB in float32."""
MIN_SHARED_PREFIX = 16
"""Consecutive datums that start with the same this-many tokens or more (a GRPO group: one prompt,
several completions) run that prefix once and their suffixes on its keys and values."""


def prefix_groups(seqs: list[list[int]], min_shared: int = MIN_SHARED_PREFIX) -> list[tuple[list[int], int]]:
    """Runs of consecutive sequences with a common prefix of at least `min_shared` tokens, as
    (indices, prefix length); the prefix stops one token short of the shortest member, so every member
    keeps a suffix. Sequences without such a neighbour come back alone with prefix length 0."""
    groups: list[tuple[list[int], int]] = []
    for i, seq in enumerate(seqs):
        if groups:
            idx, shared = groups[-1]
            first = seqs[idx[0]]
            limit = min(shared if len(idx) > 1 else len(first) - 1, len(seq) - 1)
            n = 0
            while n < limit and first[n] == seq[n]:
                n += 1
            if n >= min_shared:
                groups[-1] = (idx + [i], n)
                continue
        groups.append(([i], 0))
    return groups


@dataclass(frozen=True)
class TrainerSpec:
    base_model: str
    lora_rank: int | None
    """None = full fine-tuning (sensible for the tiny models only)."""
    seed: int | None = None
    train_mlp: bool = True
    train_attn: bool = True
    train_unembed: bool = True

    @classmethod
    def from_meta(cls, meta: dict) -> "TrainerSpec":
        """The spec recorded in a checkpoint's arl_checkpoint.json."""
        return cls(**{k: meta[k] for k in ("base_model", "lora_rank", "seed", "train_mlp", "train_attn", "train_unembed")})


def lora_config(spec: TrainerSpec, language_only: bool = False):
    """LoRA on the chosen projections; `language_only` (a vision-language model) keeps the adapters
    out of the vision tower, whose MLP may share the names (Qwen2.5-VL's gate/up/down_proj)."""
    from peft import LoraConfig

    layers = [*(ATTN_MODULES if spec.train_attn else ()), *(MLP_MODULES if spec.train_mlp else ())]
    head = ["lm_head"] if spec.train_unembed else []
    if not layers and not head:
        raise ValueError("create_lora_training_client: train_attn, train_mlp and train_unembed are all False; "
                         "set at least one to True")
    if language_only:  # a regex is matched against the full module name
        parts = ([rf".*language_model\..*\.({'|'.join(layers)})"] if layers else []) + head
        return LoraConfig(r=spec.lora_rank, lora_alpha=LORA_ALPHA, lora_dropout=0.0, target_modules="|".join(parts))
    return LoraConfig(r=spec.lora_rank, lora_alpha=LORA_ALPHA, lora_dropout=0.0, target_modules=layers + head)


def apply_lora(model, spec: TrainerSpec):
    """Wrap `model` with LoRA adapters, initialised from `spec.seed` without touching the global RNG.

    With tied embeddings, `train_unembed` adapts the output projection only; the input embedding
    keeps the base weights (peft warns about exactly this, and it is what we want).
    """
    from peft import get_peft_model

    with torch.random.fork_rng(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*tie.*", category=UserWarning)
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        torch.manual_seed(spec.seed or 0)
        return get_peft_model(model, lora_config(spec, language_only=getattr(model.config, "vision_config", None) is not None))


def merge_lora(peft_model):
    """Fold LoRA into the base weights. A tied output projection is untied first, or the merge
    would also change the input embedding and the merged model would no longer match the trainer."""
    lm = peft_model.get_base_model()
    head = lm.get_output_embeddings()
    base = getattr(head, "base_layer", head)
    if base.weight is lm.get_input_embeddings().weight:
        base.weight = torch.nn.Parameter(base.weight.detach().clone(), requires_grad=False)
        lm.config.tie_word_embeddings = False
    return peft_model.merge_and_unload()


class LocalTrainer:
    def __init__(self, spec: TrainerSpec):
        self.spec = spec
        loaded = models.load_model(spec.base_model)
        self.tokenizer = loaded.tokenizer
        self.context_length = loaded.context_length
        self.images = loaded.images
        """The model's `ImageEncoder` (None: a text-only model)."""
        device = settings.torch_device()
        model = loaded.model.to(device)
        model.eval()  # no dropout: a forward is a deterministic function of the weights
        if spec.lora_rank is None:
            model.requires_grad_(True)
        else:
            model = apply_lora(model, spec)
        self.model = model
        self._cache_arg = cache_argument(loaded.model)
        self.device = device
        self.vocab_size = model.get_output_embeddings().weight.shape[0]
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=1e-4, betas=(0.9, 0.95), eps=1e-12, weight_decay=0.0)
        self.optim_steps = 0
        self.usage = {"forward_tokens": 0, "train_tokens": 0, "optim_steps": 0}
        self._best_logp = -math.inf
        self._collapse_warned = False

    # -- validation ---------------------------------------------------------------------------
    def validate(self, data: list[Datum], loss_fn: str, loss_fn_config: dict | None):
        spec, config = losses.get_loss(loss_fn, loss_fn_config)
        if not isinstance(data, (list, tuple)) or not data:
            raise ValueError("data must be a non-empty list of Datum")
        allowed = set(spec.inputs) | set(spec.optional_inputs)
        for i, d in enumerate(data):
            if not isinstance(d, Datum):
                raise TypeError(f"data[{i}] is a {type(d).__name__}, not a Datum")
            missing = [k for k in spec.inputs if k not in d.loss_fn_inputs]
            if missing:
                raise ValueError(f"data[{i}].loss_fn_inputs lacks {missing}; loss_fn={loss_fn!r} needs "
                                 f"{list(spec.inputs)}" + (f" (optional: {list(spec.optional_inputs)})" if spec.optional_inputs else ""))
            if "sampled" in spec.engine_inputs and d.loss_fn_input_spans is None:
                raise ValueError(f"data[{i}] has no provenance; loss_fn={loss_fn!r} needs every datum to name the "
                                 "sampled sequence behind its tokens: datum.with_provenance(model_input=[...], "
                                 "loss_fn_inputs=[...]) with SampledProvenanceSpan(sequence_id=seq.sequence_id, ...)")
            unknown = sorted(set(d.loss_fn_inputs) - allowed)
            if unknown:
                raise ValueError(f"data[{i}].loss_fn_inputs has unknown key(s) {unknown}; loss_fn={loss_fn!r} "
                                 f"takes {sorted(allowed)}")
            if d.model_input.has_images:
                if self.images is None:
                    raise ValueError(f"data[{i}].model_input holds an ImageChunk but {self.spec.base_model!r} is a "
                                     "text-only model; use a vision-language model (arl/tiny-qwen2-vl-3m, a local "
                                     "Qwen2-VL folder) or drop the image")
                self.images.expand(d.model_input, f"data[{i}].model_input")  # checks expected_tokens
            n = d.model_input.length
            if n == 0:
                raise ValueError(f"data[{i}].model_input is empty")
            if n > self.context_length:
                raise ValueError(f"data[{i}].model_input has {n} tokens, more than the context of "
                                 f"{self.spec.base_model!r} ({self.context_length}); truncate it")
            for name in ("target_tokens",):
                arr = d.loss_fn_inputs[name].to_numpy()
                bad = (arr < 0) | (arr >= self.vocab_size)
                if bad.any():
                    raise ValueError(f"data[{i}].loss_fn_inputs['target_tokens'] holds id {int(arr[bad][0])}, "
                                     f"outside the vocabulary [0, {self.vocab_size})")
            ids = [t for c in d.model_input.chunks if not isinstance(c, ImageChunk) for t in c.tokens]
            if ids and (min(ids) < 0 or max(ids) >= self.vocab_size):
                raise ValueError(f"data[{i}].model_input holds a token id outside [0, {self.vocab_size})")
        return spec, config

    # -- compute ------------------------------------------------------------------------------
    def _micro_batches(self, data: list[Datum]) -> list[list[int]]:
        """Datum indices per micro-batch, keeping (padded tokens x vocab) under LOGIT_BUDGET."""
        max_tokens = max(LOGIT_BUDGET // self.vocab_size, 1)
        batches, current, longest = [], [], 0
        for i, d in enumerate(data):
            n = d.model_input.length
            if current and max(longest, n) * (len(current) + 1) > max_tokens:
                batches.append(current)
                current, longest = [], 0
            current.append(i)
            longest = max(longest, n)
        batches.append(current)
        return batches

    def _logp(self, data: list[Datum]) -> list[torch.Tensor]:
        """logp of each datum's target tokens, [len(model_input)] per datum. Datums that share a long
        prefix (`prefix_groups`) run it once: the same logits, a fraction of the compute. Datums with
        images run as one padded batch through the vision tower (their ids alone cannot tell two
        images apart, so they never share a prefix)."""
        targets = [d.loss_fn_inputs["target_tokens"].to_torch().to(self.device) for d in data]
        out: list[torch.Tensor | None] = [None] * len(data)
        text = [i for i, d in enumerate(data) if not d.model_input.has_images]
        seqs = [data[i].model_input.to_ints() for i in text]
        alone = []
        for idx, shared in prefix_groups(seqs, MIN_SHARED_PREFIX):
            if shared == 0:
                alone += [text[j] for j in idx]
                continue
            for j, logp in zip(idx, self._logp_shared([seqs[j] for j in idx], [targets[text[j]] for j in idx], shared)):
                out[text[j]] = logp
        if alone:
            for i, logp in zip(alone, self._logp_padded([data[i].model_input.to_ints() for i in alone],
                                                        [targets[i] for i in alone])):
                out[i] = logp
        with_images = [i for i, d in enumerate(data) if d.model_input.has_images]
        if with_images:
            ids, extra = self._vision_batch([data[i] for i in with_images])
            for i, logp in zip(with_images, self._logp_padded(ids, [targets[i] for i in with_images], extra)):
                out[i] = logp
        return out

    def _vision_batch(self, batch: list[Datum]) -> tuple[list[list[int]], dict]:
        """The datums' expanded ids and what the vision model reads besides them: pixel patches, each
        image's patch grid, and the token types that place the multimodal RoPE (padded to the batch)."""
        expanded = [self.images.expand(d.model_input) for d in batch]
        pixel_values, grid_thw = self.images.pixels([c for _, _, chunks in expanded for c in chunks])
        T = max(len(ids) for ids, _, _ in expanded)
        types_BT = torch.zeros(len(batch), T, dtype=torch.long)
        for b, (_, types, _) in enumerate(expanded):
            types_BT[b, :len(types)] = torch.tensor(types)
        return [ids for ids, _, _ in expanded], {"pixel_values": pixel_values.to(self.device),
                                                 "image_grid_thw": grid_thw.to(self.device),
                                                 "mm_token_type_ids": types_BT.to(self.device)}

    def _logp_padded(self, seqs: list[list[int]], targets: list[torch.Tensor], extra: dict | None = None) -> list[torch.Tensor]:
        """One right-padded forward of independent sequences (`extra`: a vision model's image inputs)."""
        lengths = [len(x) for x in seqs]
        T = max(lengths)
        ids_BT = torch.zeros(len(seqs), T, dtype=torch.long)
        targets_BT = torch.zeros(len(seqs), T, dtype=torch.long, device=self.device)
        mask_BT = torch.zeros(len(seqs), T, dtype=torch.long)
        for b, (seq, n) in enumerate(zip(seqs, lengths)):
            ids_BT[b, :n] = torch.tensor(seq)
            targets_BT[b, :n] = targets[b]
            mask_BT[b, :n] = 1
        logits_BTV = upcast(self.model(input_ids=ids_BT.to(self.device), attention_mask=mask_BT.to(self.device),
                                       **(extra or {})).logits)
        logp_BT = logits_BTV.gather(-1, targets_BT[..., None]).squeeze(-1) - torch.logsumexp(logits_BTV, dim=-1)
        return [logp_BT[b, :n] for b, n in enumerate(lengths)]

    def _logp_shared(self, seqs: list[list[int]], targets: list[torch.Tensor], shared: int) -> list[torch.Tensor]:
        """The common prefix once, then every suffix on its keys and values (expanded, not copied, so
        each suffix's gradient flows back into the one prefix computation)."""
        G, L = len(seqs), shared
        prefix = self.model(input_ids=torch.tensor([seqs[0][:L]], device=self.device), use_cache=True)
        logits_LV = upcast(prefix.logits[0])
        logz_L = torch.logsumexp(logits_LV, dim=-1)
        prefix_cache = prefix.cache if self._cache_arg == "cache" else prefix.past_key_values
        cache = DynamicCache(ddp_cache_data=[(layer.keys.expand(G, -1, -1, -1), layer.values.expand(G, -1, -1, -1))
                                             for layer in prefix_cache.layers])
        lengths = [len(x) - L for x in seqs]
        S = max(lengths)
        ids_GS = torch.zeros(G, S, dtype=torch.long)
        mask_GT = torch.zeros(G, L + S, dtype=torch.long)
        for g, (seq, n) in enumerate(zip(seqs, lengths)):
            ids_GS[g, :n] = torch.tensor(seq[L:])
            mask_GT[g, :L + n] = 1
        positions_GS = torch.arange(L, L + S).expand(G, S)
        logits_GSV = upcast(self.model(input_ids=ids_GS.to(self.device), attention_mask=mask_GT.to(self.device),
                                position_ids=positions_GS.to(self.device), **{self._cache_arg: cache}).logits)
        logz_GS = torch.logsumexp(logits_GSV, dim=-1)
        out = []
        for g, n in enumerate(lengths):
            head = logits_LV.gather(-1, targets[g][:L, None]).squeeze(-1) - logz_L
            tail = logits_GSV[g, :n].gather(-1, targets[g][L:L + n, None]).squeeze(-1) - logz_GS[g, :n]
            out.append(torch.cat([head, tail]))
        return out

    def run_loss(self, data: list[Datum], loss_fn: str, loss_fn_config: dict | None, backward: bool) -> ForwardBackwardOutput:
        """Loss (and, with `backward`, accumulated gradients) of `data`, already checked by `validate`."""
        spec, config = losses.get_loss(loss_fn, loss_fn_config)
        outputs: list[dict[str, TensorData] | None] = [None] * len(data)
        loss_sum, logp_sum, n_active, n_tokens = 0.0, 0.0, 0, 0
        stat_sums: dict[str, float] = {}
        for idx in self._micro_batches(data):
            batch = [data[i] for i in idx]
            with torch.set_grad_enabled(backward):
                with settings.autocast(self.device):  # the forward only: the loss below is float32
                    logp_list = self._logp(batch)
                logp_N = torch.cat(logp_list)
                inputs_N = {f"{k}_N": torch.cat([d.loss_fn_inputs[k].to_torch() for d in batch]).to(self.device)
                            for k in (*spec.inputs, *spec.optional_inputs) if k in batch[0].loss_fn_inputs}
                inputs_N.update({f"{k}_N": engine_input(k, batch).to(self.device) for k in spec.engine_inputs})
                terms = spec.fn(logp_N, **inputs_N, **config)
                loss = terms.loss_N.sum()
                if not torch.isfinite(loss):
                    self._refuse(f"{loss_fn} loss is {float(loss.detach())}")
                if backward:
                    loss.backward()
            loss_sum += float(loss.detach())
            logp_sum += float(logp_N.detach().sum())
            active_N = terms.active_N
            n_active += int(active_N.sum())
            n_tokens += len(logp_N)
            for name, value_N in terms.stats_N.items():
                stat_sums[name] = stat_sums.get(name, 0.0) + float(value_N[active_N].sum())
            elementwise = terms.loss_N.detach().split([len(x) for x in logp_list])
            for i, lp, el in zip(idx, logp_list, elementwise):
                outputs[i] = {"logprobs": TensorData.from_torch(lp.detach()),
                              "elementwise_loss": TensorData.from_torch(el)}
        self.usage["train_tokens" if backward else "forward_tokens"] += n_tokens
        self._watch_collapse(logp_sum / max(n_tokens, 1))
        metrics = {
            "loss:sum": loss_sum,
            "loss/sum": loss_sum,
            "loss/mean": loss_sum / max(n_active, 1),
            "tokens/active": float(n_active),
            "tokens/total": float(n_tokens),
            **{f"{loss_fn}/{name}_mean": total / max(n_active, 1) for name, total in stat_sums.items()},
        }
        return ForwardBackwardOutput(loss_fn_output_type=loss_fn, loss_fn_outputs=outputs, metrics=metrics)

    def _watch_collapse(self, logp_mean: float) -> None:
        """Warn once when the model's mean logprob of the datums' tokens has fallen to the uniform
        distribution's (-log V: every token equally likely, what a far too large learning rate leaves)
        from well above it. A model that has always been there (random weights) is not warned about."""
        uniform = -math.log(self.vocab_size)
        self._best_logp = max(self._best_logp, logp_mean)
        if not self._collapse_warned and self._best_logp > 0.8 * uniform and logp_mean <= 0.95 * uniform:
            self._collapse_warned = True
            warnings.warn(f"the policy looks collapsed: its mean logprob of the trained tokens is {logp_mean:.2f}, "
                          f"the uniform distribution's is {uniform:.2f} (it was {self._best_logp:.2f} before); a "
                          f"learning rate far too large does this: lower learning_rate and start again",
                          RuntimeWarning, stacklevel=2)

    def _refuse(self, what: str) -> None:
        """Drop the accumulated gradients and raise: a non-finite value never reaches the weights."""
        self.optimizer.zero_grad(set_to_none=True)
        raise NonFiniteError(f"{what}: the step is refused and the accumulated gradients dropped, the weights "
                             f"are unchanged (a learning rate too large, or a NaN in the datums' advantages or "
                             f"weights, are the usual causes; lower learning_rate and resume)")

    def optim_step(self, adam) -> dict[str, float]:
        grads = [p.grad for p in self.params if p.grad is not None]
        grad_norm = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))) if grads else 0.0
        if not math.isfinite(grad_norm):
            self._refuse(f"optim_step: the gradient norm is {grad_norm}")
        if self.params and adam.learning_rate > torch.finfo(self.params[0].dtype).max:
            self._refuse(f"optim_step: learning rate {adam.learning_rate:g} is beyond {self.params[0].dtype}")
        if adam.grad_clip_norm > 0 and grads:
            torch.nn.utils.clip_grad_norm_(self.params, adam.grad_clip_norm)
        for group in self.optimizer.param_groups:
            group.update(lr=adam.learning_rate, betas=(adam.beta1, adam.beta2), eps=adam.eps,
                         weight_decay=adam.weight_decay)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if not all(bool(torch.isfinite(p).all()) for p in self.params):
            raise NonFiniteError(f"optim_step: the update at learning rate {adam.learning_rate:g} overflowed the "
                                 f"weights to inf/NaN; this client's weights are lost, the checkpoints saved before "
                                 f"are intact: lower learning_rate and resume or start again")
        self.optim_steps += 1
        self.usage["optim_steps"] += 1
        return {"optim/grad_norm": grad_norm, "optim/lr": adam.learning_rate, "optim/step": float(self.optim_steps)}

    # -- weights ------------------------------------------------------------------------------
    def frozen_copy(self):
        """A detached copy of the current weights for sampling (LoRA merged into the base weights)."""
        snap = copy.deepcopy(self.model)
        if self.spec.lora_rank is not None:
            snap = merge_lora(snap)
        snap.requires_grad_(False)
        return snap.eval()

    def _write_weights(self, folder) -> None:
        from safetensors.torch import save_model

        if self.spec.lora_rank is None:
            save_model(self.model, str(folder / "model.safetensors"))
        else:
            # adapter_model.safetensors + adapter_config.json; the (tied) base embedding is never
            # changed, so it is not copied into the adapter
            self.model.save_pretrained(str(folder), save_embedding_layers=False)

    def save(self, uri: str, kind: str, overwrite: bool = True) -> None:
        meta = {"kind": kind, "format_version": 1, "optim_steps": self.optim_steps, **asdict(self.spec)}
        with checkpoints.atomic_dir(checkpoints.resolve(uri), overwrite=overwrite) as tmp:
            self._write_weights(tmp)
            if kind == "training_state":
                torch.save(self.optimizer.state_dict(), tmp / "optimizer.pt")
            checkpoints.write_json(tmp / checkpoints.META_FILE, {**meta, "files": checkpoints.file_digests(tmp)})

    def load(self, path: str, with_optimizer: bool) -> None:
        folder, meta = checkpoints.read_meta(path)
        if with_optimizer and not (folder / "optimizer.pt").is_file():
            raise checkpoints.CheckpointNotFoundError(
                f"{path!r} holds weights only (a {meta['kind']} checkpoint); load_state_with_optimizer needs a "
                "save_state checkpoint")
        if (meta["lora_rank"] is None) != (self.spec.lora_rank is None) or meta["base_model"] != self.spec.base_model:
            raise ValueError(f"checkpoint {path!r} is for base_model={meta['base_model']!r}, "
                             f"lora_rank={meta['lora_rank']}; this client has {self.spec.base_model!r}, "
                             f"lora_rank={self.spec.lora_rank}")
        checkpoints.verify(folder, meta)
        load_weights(self.model, folder, meta)
        if with_optimizer:
            self.optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True))
            self.optim_steps = meta["optim_steps"]
        self.optimizer.zero_grad(set_to_none=True)


def load_weights(model, folder, meta: dict) -> None:
    """Load a checkpoint folder's weights into `model` (a peft model for LoRA checkpoints)."""
    from safetensors.torch import load_file, load_model

    if meta["lora_rank"] is None:
        load_model(model, str(folder / "model.safetensors"))
    else:
        from peft import set_peft_model_state_dict

        result = set_peft_model_state_dict(model, load_file(str(folder / "adapter_model.safetensors")))
        if result.unexpected_keys:
            raise ValueError(f"checkpoint {folder} does not match the model: unexpected keys {result.unexpected_keys[:3]}")


def engine_input(name: str, batch: list[Datum]) -> torch.Tensor:
    """A loss's `engine_inputs` tensor over the concatenated positions of `batch` (losses.py module doc)."""
    if name == "datum":
        return torch.cat([torch.full((d.model_input.length,), i, dtype=torch.long) for i, d in enumerate(batch)])
    if name == "sampled":
        parts = []
        for d in batch:
            parts += [torch.full((span.length,), float(isinstance(span, SampledProvenanceSpan)))
                      for span in d.loss_fn_input_spans]
        return torch.cat(parts)
    raise ValueError(f"unknown engine input {name!r}")


def sampling_model_from_checkpoint(path: str):
    """(model, loaded base) for a sampler over a saved checkpoint, LoRA merged in."""
    folder, meta = checkpoints.read_meta(path)
    checkpoints.verify(folder, meta)
    loaded = models.load_model(meta["base_model"])
    model = loaded.model.to(settings.torch_device())
    if meta["lora_rank"] is not None:
        model = apply_lora(model, TrainerSpec.from_meta(meta))
        load_weights(model, folder, meta)
        model = merge_lora(model)
    else:
        load_weights(model, folder, meta)
    model.requires_grad_(False)
    return model.eval(), loaded
