"""The OpenAI-compatible endpoints of `arl serve` (src/arl/serve/openai_api.py), driven by the real `openai`
client on loopback: models, chat and text completions, stop, n, seed, streaming, tool calls, errors.

One server (a subprocess, tests/serve_util.py) serves the module, with an API key (sent as the openai
client's Bearer token) and `--model tiny=arl/tiny-qwen3-0.5m`. While it starts, the tiny model is trained
here for a few steps to answer the tool-call prompt below with one fixed call (a checkpoint the tests name
by its folder, URIs and a run folder), so that greedy decoding makes the endpoint parse a real model
output into `tool_calls`. The other tests sample the random tiny model,
whose text is noise, and check what the API promises about it: the same seed gives the same text, a
stream adds up to the non-streamed answer, a stop string cuts it.
"""

from __future__ import annotations

import concurrent.futures
import json
import shutil
import uuid

import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")

from conftest import TINY
from serve_util import serving

KEY = "sk-arl-test"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "the city"}},
                   "required": ["city"]}}}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
CALL = {"name": "get_weather", "arguments": {"city": "Paris"}}
HI = [{"role": "user", "content": "Say something."}]


def train_toolbot(service):
    """(checkpoint folder, its arl:// URI): the tiny model taught to answer ASK (with TOOLS) with CALL."""
    from arl import checkpoints, types
    from arl.models import load_tokenizer
    from arl.tools.calls import format_tool_call

    tok = load_tokenizer(TINY)
    prompt = tok.apply_chat_template(ASK, tools=TOOLS, add_generation_prompt=True, tokenize=True, return_dict=False)
    answer = tok.encode(format_tool_call(CALL["name"], CALL["arguments"]) + "<|im_end|>", add_special_tokens=False)
    tokens = prompt + answer
    datum = types.Datum(model_input=types.ModelInput.from_ints(tokens[:-1]),
                        loss_fn_inputs={"target_tokens": tokens[1:],
                                        "weights": [0.0] * (len(prompt) - 1) + [1.0] * len(answer)})
    client = service.create_full_training_client(TINY, seed=0)
    for _ in range(40):
        client.forward_backward([datum], "cross_entropy")
        client.optim_step(types.AdamParams(learning_rate=3e-3))
    uri = client.save_weights_for_sampler(f"openai-toolbot-{uuid.uuid4().hex[:8]}").result().path
    return checkpoints.resolve(uri), uri


@pytest.fixture(scope="module")
def server(tmp_path_factory, service):
    """(base URL, server home, toolbot): the model is trained here while the server starts (its imports)."""
    home = tmp_path_factory.mktemp("openai-serve")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        training = pool.submit(train_toolbot, service)
        with serving(home, api_key=KEY, args=("--model", f"tiny={TINY}")) as url:
            toolbot = training.result()
            # the same checkpoint inside the server's home, to be named by arl:// and tinker:// URIs
            shutil.copytree(toolbot[0], home / "checkpoints" / "bot" / "sampler_weights" / "final")
            yield url, home, toolbot


@pytest.fixture(scope="module")
def toolbot(server):
    return server[2]


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=f"{server[0]}/v1", api_key=KEY, max_retries=0, timeout=60)


def chat(client, **kwargs):
    return client.chat.completions.create(**{"model": TINY, "messages": HI, "max_tokens": 24, **kwargs})


def streamed(stream) -> tuple[dict[int, str], dict[int, str], dict[int, list], object]:
    """(text, finish reason, tool-call deltas) per choice index, and the usage of a stream's chunks."""
    text, finish, calls, usage = {}, {}, {}, None
    for chunk in stream:
        usage = chunk.usage or usage
        for c in chunk.choices:
            delta = getattr(c, "delta", None)
            piece = c.text if delta is None else (delta.content or "")
            text[c.index] = text.get(c.index, "") + piece
            calls.setdefault(c.index, []).extend((delta.tool_calls or []) if delta is not None else [])
            if c.finish_reason:
                finish[c.index] = c.finish_reason
    return text, finish, calls, usage


def test_models_listing(client):
    ids = [m.id for m in client.models.list().data]
    assert TINY in ids and "tiny" in ids  # a base model, and the --model name given to the server
    assert client.models.retrieve(TINY).id == TINY
    assert client.models.retrieve("tiny").owned_by == "local"
    assert chat(client, model="tiny", seed=1).choices[0].message.content == chat(client, seed=1).choices[0].message.content


def test_chat_completion_usage_n_and_seed(client):
    from arl.models import load_tokenizer

    r = chat(client, n=2, seed=7)
    assert r.object == "chat.completion" and r.model == TINY and len(r.choices) == 2
    assert [c.index for c in r.choices] == [0, 1]
    assert all(c.message.role == "assistant" and c.finish_reason in ("stop", "length") for c in r.choices)
    assert r.choices[0].message.content != r.choices[1].message.content  # two samples, not one copied
    prompt = load_tokenizer(TINY).apply_chat_template(HI, add_generation_prompt=True, tokenize=True, return_dict=False)
    assert r.usage.prompt_tokens == len(prompt)
    assert 2 <= r.usage.completion_tokens <= 48 and r.usage.total_tokens == len(prompt) + r.usage.completion_tokens
    again = chat(client, n=2, seed=7)
    assert [c.message.content for c in again.choices] == [c.message.content for c in r.choices]
    other = chat(client, n=2, seed=8)
    assert [c.message.content for c in other.choices] != [c.message.content for c in r.choices]


def test_stop_string_cuts_the_answer(client):
    full = chat(client, seed=3, max_completion_tokens=40).choices[0].message.content
    # a stop string from the middle of the answer (letters only, so it decodes the same in any window)
    at = next(i for i in range(len(full) // 3, len(full) - 3) if full[i:i + 3].isascii() and full[i:i + 3].isalpha())
    stop = full[at:at + 3]
    r = chat(client, seed=3, max_completion_tokens=40, stop=[stop, "never-seen-stop"])
    assert r.choices[0].message.content == full[:full.find(stop)]
    assert r.choices[0].finish_reason == "stop"


def test_streaming_equals_non_streamed(client):
    plain = chat(client, n=2, seed=11)
    text, finish, _, usage = streamed(chat(client, n=2, seed=11, stream=True, stream_options={"include_usage": True}))
    assert text == {i: c.message.content for i, c in enumerate(plain.choices)}
    assert finish == {i: c.finish_reason for i, c in enumerate(plain.choices)}
    assert usage.completion_tokens == plain.usage.completion_tokens

    kwargs = {"model": TINY, "prompt": "Once upon a time", "max_tokens": 20, "seed": 5}
    plain = client.completions.create(**kwargs)
    assert plain.object == "text_completion" and plain.choices[0].text
    from arl.models import load_tokenizer
    assert plain.usage.prompt_tokens == len(load_tokenizer(TINY).encode(kwargs["prompt"], add_special_tokens=False))
    text, finish, _, _ = streamed(client.completions.create(**kwargs, stream=True))
    assert text == {0: plain.choices[0].text} and finish == {0: plain.choices[0].finish_reason}
    assert client.completions.create(**kwargs, echo=True).choices[0].text == kwargs["prompt"] + plain.choices[0].text


def test_tool_call_round_trip(client, toolbot):
    r = client.chat.completions.create(model=str(toolbot[0]), messages=ASK, tools=TOOLS, temperature=0, max_tokens=60)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == CALL["name"] and json.loads(call.function.arguments) == CALL["arguments"]

    _, finish, calls, _ = streamed(client.chat.completions.create(model=str(toolbot[0]), messages=ASK, tools=TOOLS,
                                                                  temperature=0, max_tokens=60, stream=True))
    assert finish == {0: "tool_calls"}
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls[0]] == [(CALL["name"], CALL["arguments"])]

    # the call goes back with its result, as an agent loop sends it: the template renders both
    history = ASK + [choice.message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 C"}]
    follow = client.chat.completions.create(model=str(toolbot[0]), messages=history, tools=TOOLS, max_tokens=8, seed=0)
    assert follow.choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_models_by_uri_and_folder(client, server, toolbot):
    """The trained checkpoint by its arl:// URI, the server's tinker:// path and its folder, and a run
    folder holding it, all give the taught call; a Hugging Face folder serves as a base model."""
    from arl.models import model_dir

    run = server[1] / "runs" / "grpo" / "r1"
    shutil.copytree(toolbot[0], run / "checkpoints" / "training_state" / "step-0001")
    (run / "checkpoints" / "latest.json").write_text(json.dumps({"step": 1, "path": "checkpoints/training_state/step-0001"}))
    for model in ("arl://bot/sampler_weights/final", "tinker://bot/sampler_weights/final", str(toolbot[0]), str(run)):
        r = client.chat.completions.create(model=model, messages=ASK, tools=TOOLS, temperature=0, max_tokens=60)
        assert r.model == model and r.choices[0].finish_reason == "tool_calls", model
    r = chat(client, model=str(model_dir(TINY)), seed=7)
    assert r.choices[0].message.content == chat(client, seed=7).choices[0].message.content


def test_errors(client, server):
    def error(call, **kwargs):
        with pytest.raises(openai.APIStatusError) as e:
            call(**kwargs)
        assert set(e.value.body) == {"message", "type", "param", "code"}  # the client unwraps {"error": {...}}
        return e.value

    e = error(chat, client=client, model="no-such-model")
    assert e.status_code == 404 and e.body["code"] == "model_not_found" and e.body["param"] == "model"
    e = error(chat, client=client, temperature=-1)
    assert e.status_code == 400 and e.body["param"] == "temperature"
    e = error(chat, client=client, messages=[{"role": "user", "content": "word " * 3000}])
    assert e.status_code == 400 and e.body["code"] == "context_length_exceeded"
    e = error(client.completions.create, model=TINY, prompt="Hi", max_tokens=5000)
    assert e.status_code == 400 and e.body["param"] == "max_tokens" and e.body["code"] == "context_length_exceeded"
    e = error(chat, client=client, logprobs=True)
    assert e.status_code == 400 and e.body["param"] == "logprobs"
    wrong = openai.OpenAI(base_url=f"{server[0]}/v1", api_key="sk-wrong", max_retries=0)
    e = error(wrong.models.list)
    assert isinstance(e, openai.AuthenticationError) and e.body["code"] == "invalid_api_key"


def test_tool_call_parsing_and_model_specs(tmp_path):
    """Without a server: what the endpoint makes of a completion's text, and `arl serve --model` checks."""
    from arl.serve.openai_api import Choice, _with_tool_calls, parse_model_specs

    def parsed(text):
        return _with_tool_calls(Choice([], text, [text], "stop", content=text))

    c = parsed('Let me look.\n<tool_call><function=get_weather><parameter=city>\nOslo\n</parameter></function></tool_call>')
    assert c.finish == "tool_calls" and c.content == "Let me look."
    assert [(t["function"]["name"], json.loads(t["function"]["arguments"])) for t in c.tool_calls] == \
        [("get_weather", {"city": "Oslo"})]
    for text in ("<tool_call>{not json</tool_call>", '<tool_call>{"name": "f", "arguments": {}}</tool_call> and more',
                 "no call at all"):
        c = parsed(text)
        assert c.finish == "stop" and c.tool_calls is None and c.content == text  # left as the model wrote it

    for spec in ("no-equals-sign", "x=", f"x={tmp_path / 'missing'}", f"x={tmp_path}"):
        with pytest.raises(ValueError, match="--model"):
            parse_model_specs([spec])
    assert parse_model_specs([f"tiny={TINY}"]) == {"tiny": TINY}
