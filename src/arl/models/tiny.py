"""Tiny Qwen3-architecture models, randomly initialised from a fixed seed and built on first use.

They are the mini world's policies: small enough to train in minutes on 2 CPU cores, and the same
architecture, tokenizer layout and chat template as Qwen3, so a recipe runs unchanged on either.
The same name gives bit-identical weights on every machine: the seed drives a portable random
stream (see `init_weights`) rather than torch's CPU-dependent normal sampler.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

from arl.models import cache
from arl.models import tokenizer as tok

BUILD_VERSION = 1
"""Bump when the corpus, tokenizer or configs change, so cached folders are rebuilt (the manifest also
records a hash of the builder's source, so a forgotten bump cannot leave a stale model in use)."""
CONTEXT_LENGTH = 2048


@dataclass(frozen=True)
class TinySpec:
    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    seed: int = 0

    def config(self) -> Qwen3Config:
        return Qwen3Config(
            vocab_size=tok.VOCAB_SIZE,
            hidden_size=self.hidden_size,
            num_hidden_layers=self.num_layers,
            num_attention_heads=self.num_heads,
            num_key_value_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            intermediate_size=self.intermediate_size,
            max_position_embeddings=CONTEXT_LENGTH,
            tie_word_embeddings=True,
            bos_token_id=None,
            eos_token_id=tok.special_token_id(tok.IM_END),
            pad_token_id=tok.special_token_id(tok.ENDOFTEXT),
            dtype="float32",
        )


TINY_SPECS = {
    spec.name: spec
    for spec in [
        TinySpec("arl/tiny-qwen3-0.5m", 128, 2, 4, 2, 32, 256),
        TinySpec("arl/tiny-qwen3-2m", 192, 4, 6, 2, 32, 512),
        TinySpec("arl/tiny-qwen3-5m", 256, 6, 4, 2, 64, 768),
        TinySpec("arl/tiny-qwen3-10m", 384, 6, 6, 2, 64, 1024),
    ]
}


def count_parameters(model: torch.nn.Module) -> int:
    """Parameters counted once each (`parameters()` skips the tied output embedding)."""
    return sum(p.numel() for p in model.parameters())


@lru_cache(maxsize=None)
def parameter_count(spec: TinySpec) -> int:
    """Exact count without allocating weights, for `list_models`."""
    with torch.device("meta"):
        return count_parameters(Qwen3ForCausalLM(spec.config()))


def _portable_normal(bits: np.random.PCG64, shape: torch.Size, std: float) -> torch.Tensor:
    """Approximately N(0, std²) values that are bit-identical on every machine.

    `torch.normal_` is not: its AVX2 and scalar kernels round differently, so the weights would
    depend on the CPU. Here each value is the sum of 12 uniform 16-bit integers (Irwin-Hall: close
    to normal, bounded at ±6 std), which is exact integer arithmetic on a bit stream numpy
    guarantees stable, followed by one correctly rounded IEEE scaling.
    """
    raw = bits.random_raw(size=shape.numel() * 3).astype("<u8")  # fixed byte order: same chunks
    uniforms = raw.view("<u2").reshape(-1, 12)  # on big- and little-endian hosts
    centred = 2 * uniforms.sum(axis=1, dtype=np.int64) - 12 * 0xFFFF  # mean 0, std ≈ 2**17
    values = (centred.astype(np.float64) * (std / 2**17)).astype(np.float32)
    return torch.from_numpy(values).reshape(shape)


def init_weights(model: Qwen3ForCausalLM, seed: int) -> None:
    """Qwen3's initialisation (normal weights, unit RMSNorm scales, a zero padding embedding)
    drawn from a portable stream.

    Every 1-D parameter of this architecture is an RMSNorm scale (there are no biases).
    """
    bits = np.random.PCG64(seed)
    embedding = model.get_input_embeddings()
    with torch.no_grad():
        for param in model.parameters():
            if param.ndim == 1:
                param.fill_(1.0)
            else:
                param.copy_(_portable_normal(bits, param.shape, model.config.initializer_range))
        embedding.weight[embedding.padding_idx].zero_()


def build(spec: TinySpec, folder: Path) -> dict:
    """Write config, weights, generation config and tokenizer for `spec` into `folder`."""
    tokenizer = tok.train_tokenizer()
    config = spec.config()
    # fork_rng: the default initialisation, overwritten next, must not use up the caller's stream.
    with torch.random.fork_rng(devices=[]):
        model = Qwen3ForCausalLM(config)
    init_weights(model, spec.seed)
    # Stop on the end of a turn, and on end-of-text as Qwen3 does.
    model.generation_config = GenerationConfig(
        eos_token_id=[config.eos_token_id, config.pad_token_id],
        pad_token_id=config.pad_token_id,
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return {"seed": spec.seed, "params": count_parameters(model)}


@lru_cache(maxsize=1)
def builder_hash() -> str:
    """Hash of the modules that decide a tiny model's bytes (this one, the corpus and the tokenizer)."""
    from arl.models import corpus
    digest = hashlib.sha256()
    for module in (__file__, corpus.__file__, tok.__file__):
        digest.update(Path(module).read_bytes())
    return digest.hexdigest()[:12]


def model_dir(spec: TinySpec) -> Path:
    """The built model in the cache, building it first if missing or from an older build."""
    stamp = {"name": spec.name, "build_version": BUILD_VERSION, "builder": builder_hash()}
    return cache.ensure_built(cache.cache_dir(spec.name), stamp, lambda tmp: build(spec, tmp))
