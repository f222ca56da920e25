"""A tiny vision-language model in the Qwen2-VL architecture, built locally from a fixed seed.

It is the policy of the multimodal chapters (Vision GRPO, Spec-o3). The architecture is the one
`transformers` ships (`Qwen2VLForConditionalGeneration`: a ViT over 14x14 patches, 2x2 patch merging,
multimodal RoPE in the language model) and the image processor is Qwen2-VL's own, saved beside the
weights, so an `ImageChunk`'s `expected_tokens` is computed exactly as for a real Qwen2-VL or
Qwen2.5-VL checkpoint: `get_number_of_image_patches(h, w) // merge_size**2`.

Decisions:
- The language model reuses the text models' tokenizer and chat template (tokenizer.py), whose
  special tokens already include `<|vision_start|>`, `<|image_pad|>` and `<|vision_end|>`.
- The processor's pixel bounds are small (56x56 to 224x224 pixels): a 112x112 image is 8x8 patches,
  16 image tokens, which a 2-core CPU trains on in minutes.
- Weights come from the same portable bit stream as the text models (`tiny._portable_normal`), so
  the name gives bit-identical weights on every machine; biases start at 0 and norm scales at 1.
- A module of its own (not a spec in tiny.py): tiny.py's source hash decides the text models' cache,
  and adding a vision model must not rebuild them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from transformers import GenerationConfig, Qwen2VLConfig, Qwen2VLForConditionalGeneration

from arl.models import cache, tiny
from arl.models import tokenizer as tok

BUILD_VERSION = 1
CONTEXT_LENGTH = 2048
MIN_PIXELS = 56 * 56
MAX_PIXELS = 224 * 224
VIDEO_TOKEN_ID = tok.special_token_id(tok.ENDOFTEXT)
"""Qwen2-VL's config needs a video placeholder id; the tiny models take no video, and the engine passes
token types explicitly, so the id is never looked for."""


@dataclass(frozen=True)
class TinyVLMSpec:
    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    vision_dim: int
    vision_depth: int
    vision_heads: int
    seed: int = 0

    def config(self) -> Qwen2VLConfig:
        head_dim = self.hidden_size // self.num_heads
        # mrope sections (temporal, height, width) over the head_dim/2 frequencies, in Qwen2-VL's
        # proportions (16, 24, 24 of 64)
        temporal = head_dim // 8
        spatial = (head_dim // 2 - temporal) // 2
        return Qwen2VLConfig(
            text_config=dict(
                vocab_size=tok.VOCAB_SIZE, hidden_size=self.hidden_size, num_hidden_layers=self.num_layers,
                num_attention_heads=self.num_heads, num_key_value_heads=self.num_kv_heads,
                intermediate_size=self.intermediate_size, max_position_embeddings=CONTEXT_LENGTH,
                tie_word_embeddings=True, bos_token_id=None, eos_token_id=tok.special_token_id(tok.IM_END),
                pad_token_id=tok.special_token_id(tok.ENDOFTEXT),
                rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0,
                                 "mrope_section": [temporal, spatial, spatial]},
            ),
            vision_config=dict(depth=self.vision_depth, embed_dim=self.vision_dim, hidden_size=self.hidden_size,
                               num_heads=self.vision_heads, mlp_ratio=2, patch_size=14, spatial_merge_size=2,
                               temporal_patch_size=2, in_channels=3),
            image_token_id=tok.special_token_id("<|image_pad|>"), video_token_id=VIDEO_TOKEN_ID,
            vision_start_token_id=tok.special_token_id("<|vision_start|>"),
            vision_end_token_id=tok.special_token_id("<|vision_end|>"),
            tie_word_embeddings=True, dtype="float32",
        )


TINY_VLM_SPECS = {
    spec.name: spec
    for spec in [TinyVLMSpec("arl/tiny-qwen2-vl-3m", hidden_size=192, num_layers=4, num_heads=6, num_kv_heads=2,
                             intermediate_size=512, vision_dim=96, vision_depth=2, vision_heads=4)]
}


def image_processor():
    """Qwen2-VL's image processor (its PIL backend, as the reference lab loads it) with the tiny
    model's pixel bounds."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    return Qwen2VLImageProcessorPil(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS, patch_size=14, merge_size=2,
                                    temporal_patch_size=2)


@lru_cache(maxsize=None)
def parameter_count(spec: TinyVLMSpec) -> int:
    with torch.device("meta"):
        return tiny.count_parameters(Qwen2VLForConditionalGeneration(spec.config()))


def init_weights(model: Qwen2VLForConditionalGeneration, seed: int) -> None:
    """Normal weights from the portable stream, zero biases, unit norm scales, a zero padding embedding."""
    bits = np.random.PCG64(seed)
    std = model.config.get_text_config().initializer_range
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.zero_()
            elif param.ndim == 1:
                param.fill_(1.0)
            else:
                param.copy_(tiny._portable_normal(bits, param.shape, std))
        embedding = model.get_input_embeddings()
        embedding.weight[embedding.padding_idx].zero_()


def build(spec: TinyVLMSpec, folder: Path) -> dict:
    tokenizer = tok.train_tokenizer()
    config = spec.config()
    with torch.random.fork_rng(devices=[]):
        model = Qwen2VLForConditionalGeneration(config)
    init_weights(model, spec.seed)
    text = config.get_text_config()
    model.generation_config = GenerationConfig(eos_token_id=[text.eos_token_id, text.pad_token_id],
                                               pad_token_id=text.pad_token_id)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    image_processor().save_pretrained(folder)
    return {"seed": spec.seed, "params": tiny.count_parameters(model)}


@lru_cache(maxsize=1)
def builder_hash() -> str:
    from arl.models import corpus

    digest = hashlib.sha256()
    for module in (__file__, tiny.__file__, corpus.__file__, tok.__file__):
        digest.update(Path(module).read_bytes())
    return digest.hexdigest()[:12]


def model_dir(spec: TinyVLMSpec) -> Path:
    stamp = {"name": spec.name, "build_version": BUILD_VERSION, "builder": builder_hash()}
    return cache.ensure_built(cache.cache_dir(spec.name), stamp, lambda tmp: build(spec, tmp))
