"""OpenAI-compatible endpoints of `arl serve`: `GET /v1/models`, `POST /v1/chat/completions` and
`POST /v1/completions` over the local engine's sampler (docs/serve.md, "OpenAI-compatible endpoints").

Which model a request's `model` names, tried in this order:

1. a name given to `arl serve --model NAME=PATH` (listed by `/v1/models`; PATH is any of 3-5);
2. a base model name the engine knows (`arl models`: `arl/tiny-qwen3-2m`, `smollm2-135m`, ...);
3. a checkpoint URI: `arl://RUN/sampler_weights/NAME` (or `training_state`), or a `tinker://` path this
   server issued (`tinker://RUN/weights/NAME`, `tinker://RUN/sampler_weights/NAME`);
4. a folder: a checkpoint folder (with `arl_checkpoint.json`), a run folder (its newest checkpoint, as
   `arl export` picks it), or a Hugging Face model folder (with `config.json`, e.g. an `arl export`);
   a relative path resolves against the server's working folder.

A sampler is loaded once per model (and per version of a checkpoint folder, so a re-saved checkpoint is
reloaded) and kept for the next requests; the `MAX_SAMPLERS` most recently used stay loaded. Loading
and sampling run on arl's engine thread, never on the event loop, as the Tinker routes do.

Chat: the messages go through the model's own chat template (`tokenizer.apply_chat_template`, `tools`
passed to it); the model's end-of-turn token ends a completion. With `tools`, a completion that ends
in tool calls written in the Qwen form the project's tools use (`<tool_call>{"name", "arguments"}
</tool_call>`, or the XML `<function=...>` form; `arl.tools.calls`) is returned as `message.tool_calls`
with `finish_reason: "tool_calls"`; text before the first call is the message's `content`.

Streaming: the engine decodes a whole batch before it answers, so a stream's chunks (OpenAI's
`chat.completion.chunk` / `text_completion` format, one per token, ending with `data: [DONE]`) are sent
once the completion is done; their text is the non-streamed answer's, chunk by chunk.

Errors are OpenAI's `{"error": {"message", "type", "param", "code"}}`: 400 for a bad or unsupported
field and a prompt too long for the model's context (`code: context_length_exceeded`), 404 for an
unknown model (`code: model_not_found`), 401 for a missing or wrong API key, 500 for a failure of the
server's own.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from .. import checkpoints, models
from ..models.zoo import check_name
from ..backend.local.engine import ENGINE
from ..client import ServiceClient
from ..tools.calls import OPEN, parse_tool_calls
from ..types import ModelInput, SamplingParams

MAX_SAMPLERS = 4
"""Loaded samplers kept (least recently used dropped first): each holds a copy of its model's weights."""
MAX_N = 128
CHAT_STOPS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>")
"""End-of-turn tokens of common chat templates: those the tokenizer has as special tokens end a chat
completion, besides its eos token."""
IGNORED = {"user", "metadata", "store", "service_tier", "parallel_tool_calls", "stream_options", "prediction",
           "web_search_options", "modalities"}
"""Fields an OpenAI client may send that do not change what is sampled here: accepted and ignored."""


class OpenAIError(Exception):
    """Answered as `{"error": {"message", "type", "param", "code"}}` with HTTP `status`."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 type_: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.type = type_ or ("server_error" if status >= 500 else "invalid_request_error")


def error_response(status: int, message: str, param: str | None = None, code: str | None = None,
                   type_: str | None = None) -> JSONResponse:
    e = OpenAIError(status, message, param, code, type_)
    return JSONResponse({"error": {"message": e.message, "type": e.type, "param": e.param, "code": e.code}},
                        status_code=status)


# -- requests -----------------------------------------------------------------------------------
class _Common(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = None
    """Not OpenAI's; vLLM's extension, passed to the sampler (-1 or None: off)."""
    n: int | None = Field(None, ge=1, le=MAX_N)
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool | None = False
    stream_options: dict | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    logit_bias: dict | None = None


class ChatRequest(_Common):
    messages: list[dict] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    tools: list[dict] | None = None
    tool_choice: str | dict | None = None
    response_format: dict | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    chat_template_kwargs: dict | None = None
    """Not OpenAI's; vLLM's extension: extra variables for the chat template (e.g. `enable_thinking`)."""


class CompletionRequest(_Common):
    prompt: str | list[str] | list[int] | list[list[int]]
    echo: bool | None = False
    suffix: str | None = None
    best_of: int | None = None
    logprobs: int | None = None


def _unsupported(req: _Common) -> None:
    """Refuse a field this server would otherwise silently ignore while it changes the answer."""
    extra = sorted(set(req.model_extra or {}) - IGNORED)
    if extra:
        raise OpenAIError(400, f"Unrecognized request argument supplied: {extra[0]}", param=extra[0])
    checks = [("frequency_penalty", req.frequency_penalty not in (None, 0)),
              ("presence_penalty", req.presence_penalty not in (None, 0)),
              ("logit_bias", bool(req.logit_bias))]
    if isinstance(req, ChatRequest):
        checks += [("logprobs", bool(req.logprobs)), ("top_logprobs", bool(req.top_logprobs)),
                   ("response_format", req.response_format not in (None, {"type": "text"}))]
        if req.tool_choice not in (None, "auto", "none"):
            checks.append(("tool_choice", True))
    else:
        checks += [("logprobs", bool(req.logprobs)), ("suffix", bool(req.suffix)),
                   ("best_of", req.best_of not in (None, 1, req.n or 1))]
    for name, bad in checks:
        if bad:
            raise OpenAIError(400, f"{name}: not supported by arl serve; leave it unset (or at its default)",
                              param=name)
    stops = [req.stop] if isinstance(req.stop, str) else req.stop
    if stops is not None and (not stops or "" in stops):
        raise OpenAIError(400, "stop: give one or more non-empty strings", param="stop")


async def _parse(request: Request, cls: type[BaseModel]):
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise OpenAIError(400, f"the body is not JSON ({e}); send a JSON object") from None
    if not isinstance(body, dict):
        raise OpenAIError(400, "the body must be a JSON object")
    try:
        return cls.model_validate(body)
    except pydantic.ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(map(str, err["loc"]))
        raise OpenAIError(400, f"{loc or 'body'}: {err['msg']}", param=str(err["loc"][0]) if err["loc"] else None,
                          code="missing_required_parameter" if err["type"] == "missing" else None) from None


# -- models -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """What a `model` names: a base model (name or folder) or a checkpoint."""

    base_model: str | None
    model_path: str | None
    version: int = 0
    """A checkpoint's metadata mtime (a folder's newest file's): a re-saved checkpoint is a new version, loaded
    again."""


def resolve_model(name: str, extra: dict[str, str] | None = None) -> Target:
    """The model a request's `model` names (see the module doc); OpenAIError 404/400 when it names none."""
    if extra and name in extra:
        return resolve_model(extra[name])
    if name in models.supported_model_names():
        try:
            check_name(name)
        except models.ModelNotFoundError as e:
            raise OpenAIError(404, f"model {name!r}: {e}", param="model", code="model_not_found") from None
        return Target(name, None)
    if name.startswith(checkpoints.SCHEMES):
        uri = name
        parts = name[len("tinker://"):].split("/") if name.startswith("tinker://") else []
        if len(parts) == 3 and parts[1] == "weights":  # the Tinker routes' name for a training state
            uri = f"tinker://{parts[0]}/training_state/{parts[2]}"
        return _checkpoint(name, uri)
    folder = Path(name).expanduser()
    if (folder / checkpoints.META_FILE).is_file():
        return _checkpoint(name, str(folder.resolve()))
    if folder.is_dir() and ((folder / "checkpoints").is_dir() or (folder / "run.json").is_file()):
        from ..export import checkpoint_of

        try:
            path = checkpoint_of(str(folder.resolve()))
        except ValueError as e:
            raise OpenAIError(404, f"model {name!r}: {e}", param="model", code="model_not_found") from None
        # a run of backend=tinker records a tinker:// path: served when its checkpoints are this server's
        return resolve_model(path) if path.startswith(checkpoints.SCHEMES) else _checkpoint(name, path)
    if (folder / "config.json").is_file():  # versioned by its files: an export replaced with --force is reloaded
        return Target(str(folder.resolve()), None, max(p.stat().st_mtime_ns for p in folder.iterdir() if p.is_file()))
    if (folder / "adapter_config.json").is_file():
        raise OpenAIError(400, f"model {name!r} is a LoRA adapter folder; serve its checkpoint (arl://... or the run "
                          "folder) or an export made with `arl export --merge`", param="model")
    raise OpenAIError(404, f"The model {name!r} does not exist: not a name `arl models` lists, a --model name of "
                      "this server, an arl:// or tinker:// checkpoint, a checkpoint or run folder, or a Hugging Face "
                      "model folder (with config.json)", param="model", code="model_not_found")


def _checkpoint(name: str, uri: str) -> Target:
    try:
        folder, _ = checkpoints.read_meta(uri)
    except FileNotFoundError:
        raise OpenAIError(404, f"The model {name!r} does not exist: no checkpoint there (checkpoint URIs resolve "
                          "under this server's home)", param="model", code="model_not_found") from None
    except ValueError as e:
        raise OpenAIError(400, f"model {name!r}: {e}", param="model") from None
    return Target(None, uri, (folder / checkpoints.META_FILE).stat().st_mtime_ns)


def parse_model_specs(specs: list[str] | None) -> dict[str, str]:
    """`NAME=PATH` pairs of `arl serve --model`, each checked now (a relative PATH made absolute)."""
    out: dict[str, str] = {}
    for spec in specs or []:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--model {spec!r}: expected NAME=PATH (PATH: a checkpoint URI or folder, a run folder, a "
                             "Hugging Face model folder or a model name)")
        if not path.startswith(checkpoints.SCHEMES) and Path(path).expanduser().exists():
            path = str(Path(path).expanduser().resolve())
        try:
            resolve_model(path)
        except OpenAIError as e:
            raise ValueError(f"--model {spec!r}: {e.message}") from None
        out[name] = path
    return out


# -- output -------------------------------------------------------------------------------------
def _special_ids(tokenizer) -> dict[str, int]:
    return {t.content: i for i, t in tokenizer.added_tokens_decoder.items() if t.special}


def _stops(tokenizer, user_stop: str | list[str] | None, chat: bool) -> tuple[list[str], set[int], list[str]]:
    """(the sampler's stop list, the stop token ids among it, the user's stop strings)."""
    user = [user_stop] if isinstance(user_stop, str) else list(user_stop or [])
    specials = _special_ids(tokenizer)
    ends = [tokenizer.eos_token] if tokenizer.eos_token else []
    if chat:
        ends += [s for s in CHAT_STOPS if s in specials]
    stop = list(dict.fromkeys(ends + user))
    return stop, {specials[s] for s in stop if s in specials}, [s for s in user if s not in specials]


@dataclass
class Choice:
    tokens: list[int]
    """The sampled tokens (the stop token included), what usage counts."""
    text: str
    """The answer: special tokens kept (tool-call tags are special tokens), stop token and stop string cut."""
    pieces: list[str]
    """`text` split as a stream sends it (one piece per token)."""
    finish: str
    tool_calls: list[dict] | None = None
    content: str | None = None


def _choice(tokenizer, seq, stop_ids: set[int], stop_strings: list[str]) -> Choice:
    tokens = list(seq.tokens)
    finish = "stop" if seq.stop_reason == "stop" else "length"
    shown = tokens[:-1] if finish == "stop" and tokens and tokens[-1] in stop_ids else tokens
    text = tokenizer.decode(shown)
    cuts = [i for i in (text.find(s) for s in stop_strings) if i != -1]
    if cuts:
        text, finish = text[:min(cuts)], "stop"
    return Choice(tokens, text, _pieces(tokenizer, shown, text), finish, content=text)


def _pieces(tokenizer, tokens: list[int], text: str) -> list[str]:
    """`text` cut into one piece per token decoded (a token that ends inside a multi-byte character
    waits for the next), the way a streaming server detokenises; pieces past `text` (a cut stop string)
    dropped. Their concatenation is always `text`."""
    pieces, prefix_at, read_at, sent = [], 0, 0, 0
    for k in range(1, len(tokens) + 1):
        before = tokenizer.decode(tokens[prefix_at:read_at])
        now = tokenizer.decode(tokens[prefix_at:k])
        if len(now) > len(before) and not now.endswith("\ufffd"):
            piece = now[len(before):][:max(len(text) - sent, 0)]
            if piece:
                pieces.append(piece)
                sent += len(piece)
            prefix_at, read_at = read_at, k
    if "".join(pieces) != text:  # a tokenizer whose pieces do not add up (spaces merged on decode): one piece
        return [text] if text else []
    return pieces


def _with_tool_calls(c: Choice) -> Choice:
    """A chat choice whose text ends in well-formed tool calls: those as OpenAI `tool_calls`."""
    if OPEN not in c.text:
        return c
    parsed = parse_tool_calls(c.text)
    if not isinstance(parsed, list) or not parsed:
        return c  # malformed: the text is the answer, as the model wrote it
    c.tool_calls = [{"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                     "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)}}
                    for call in parsed]
    c.content = c.text[:c.text.find(OPEN)].rstrip() or None
    c.finish = "tool_calls"
    return c


def _messages(raw: list[dict]) -> list[dict]:
    """OpenAI chat messages as chat templates take them: text parts joined, `developer` as `system`,
    tool-call arguments as objects (the Hugging Face convention)."""
    out = []
    for i, m in enumerate(raw):
        role = m.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise OpenAIError(400, f"messages[{i}].role: {role!r} is not one of system, developer, user, assistant, "
                              "tool", param=f"messages[{i}].role")
        msg = {k: v for k, v in m.items() if v is not None}
        msg["role"] = "system" if role == "developer" else role
        content = m.get("content")
        if isinstance(content, list):
            if not all(isinstance(p, dict) and p.get("type") == "text" for p in content):
                raise OpenAIError(400, f"messages[{i}].content: only text parts are supported by arl serve's "
                                  "OpenAI endpoints", param=f"messages[{i}].content")
            content = "".join(str(p.get("text", "")) for p in content)
        elif content is not None and not isinstance(content, str):
            raise OpenAIError(400, f"messages[{i}].content: a string or a list of text parts",
                              param=f"messages[{i}].content")
        msg["content"] = content if content is not None else ""
        calls = m.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise OpenAIError(400, f"messages[{i}].tool_calls: a list", param=f"messages[{i}].tool_calls")
            msg["tool_calls"] = [_call_in(c, i) for c in calls]
        out.append(msg)
    return out


def _call_in(call: Any, i: int) -> dict:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise OpenAIError(400, f"messages[{i}].tool_calls: each needs function.name and function.arguments",
                          param=f"messages[{i}].tool_calls")
    args = fn.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            pass  # kept as written: the template renders a string as it is
    return {**call, "function": {**fn, "arguments": args}}


# -- routes -------------------------------------------------------------------------------------
def mount(app: FastAPI, extra_models: dict[str, str] | None = None) -> None:
    """Add the /v1 routes to `app` (the server of `create_app`); `extra_models`: `--model` NAME -> PATH."""
    extra = dict(extra_models or {})
    samplers: OrderedDict[Target, asyncio.Future] = OrderedDict()

    @app.exception_handler(OpenAIError)
    async def _openai_error(_, e: OpenAIError):
        return error_response(e.status, e.message, e.param, e.code, e.type)

    async def sampler_for(target: Target):
        """The loaded sampler of `target`: loaded once on the engine thread, shared by concurrent requests."""
        if target not in samplers:
            work = ENGINE.submit(lambda: ServiceClient().create_sampling_client(base_model=target.base_model,
                                                                               model_path=target.model_path))
            samplers[target] = asyncio.ensure_future(asyncio.wrap_future(work))
            while len(samplers) > MAX_SAMPLERS:
                samplers.popitem(last=False)
        samplers.move_to_end(target)
        try:
            return await asyncio.shield(samplers[target])
        except Exception as e:
            samplers.pop(target, None)
            if isinstance(e, FileNotFoundError):
                raise OpenAIError(404, f"model: {e}", param="model", code="model_not_found") from None
            if isinstance(e, ValueError | NotImplementedError):
                raise OpenAIError(400, f"model: the model does not load: {e}", param="model") from None
            raise

    def params(req: _Common, max_tokens: int | None, prompt_len: int, context: int, stop: list[str],
               prompt_field: str) -> SamplingParams:
        room = context - prompt_len
        if room <= 0:
            raise OpenAIError(400, f"This model's maximum context length is {context} tokens, but the prompt "
                              f"({prompt_field}) has {prompt_len} tokens; shorten it", param=prompt_field,
                              code="context_length_exceeded")
        if max_tokens is not None and max_tokens > room:
            field = "max_completion_tokens" if isinstance(req, ChatRequest) and req.max_completion_tokens else "max_tokens"
            raise OpenAIError(400, f"This model's maximum context length is {context} tokens; the prompt ({prompt_field}) has "
                              f"{prompt_len} tokens, so {field} can be at most {room}, not {max_tokens}",
                              param=field, code="context_length_exceeded")
        try:
            return SamplingParams(max_tokens=max_tokens, seed=req.seed, stop=stop or None,
                                  temperature=1.0 if req.temperature is None else req.temperature,
                                  top_k=-1 if req.top_k in (None, 0) else req.top_k,
                                  top_p=1.0 if req.top_p is None else req.top_p)
        except ValueError as e:
            raise OpenAIError(400, str(e).removeprefix("SamplingParams."), param="top_k") from None

    async def sample(client, tokens: list[int], n: int, sp: SamplingParams):
        try:
            return await client.sample(ModelInput.from_ints(tokens), n, sp)
        except ValueError as e:
            raise OpenAIError(400, str(e), param="prompt") from None

    def usage(prompt_tokens: int, choices: list[Choice]) -> dict:
        completion = sum(len(c.tokens) for c in choices)
        return {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                "total_tokens": prompt_tokens + completion}

    def guard(route):
        """Any failure of a /v1 route in OpenAI's error shape (a 500 for the server's own)."""
        async def wrapped(request: Request):
            try:
                return await route(request)
            except OpenAIError:
                raise
            except Exception as e:  # noqa: BLE001 - answered in the API's format; uvicorn logs nothing else
                import logging
                logging.getLogger("arl.serve").exception("openai route failed")
                raise OpenAIError(500, f"arl serve: internal error ({type(e).__name__}: {e}); the server log has "
                                  "the traceback") from None
        wrapped.__name__ = route.__name__
        return wrapped

    # -- /v1/models -------------------------------------------------------------------------
    def listed() -> list[dict]:
        names = [m.name for m in models.list_models() if m.available] + list(extra)
        return [{"id": name, "object": "model", "created": 0, "owned_by": "arl" if name not in extra else "local"}
                for name in dict.fromkeys(names)]

    @app.get("/v1/models")
    async def list_models_route():
        return {"object": "list", "data": listed()}

    @app.get("/v1/models/{model:path}")
    async def get_model(model: str):
        for row in listed():
            if row["id"] == model:
                return row
        resolve_model(model, extra)
        return {"id": model, "object": "model", "created": 0, "owned_by": "local"}

    # -- /v1/chat/completions ---------------------------------------------------------------
    async def chat(request: Request):
        req = await _parse(request, ChatRequest)
        _unsupported(req)
        target = resolve_model(req.model, extra)
        client = await sampler_for(target)
        tok = client.get_tokenizer()
        if not getattr(tok, "chat_template", None):
            raise OpenAIError(400, f"model {req.model!r} has no chat template; use /v1/completions with a prompt",
                              param="model")
        tools = req.tools if req.tools and req.tool_choice != "none" else None
        try:
            prompt = tok.apply_chat_template(_messages(req.messages), tools=tools, add_generation_prompt=True,
                                             tokenize=True, return_dict=False, **(req.chat_template_kwargs or {}))
        except OpenAIError:
            raise
        except Exception as e:  # noqa: BLE001 - the template refused these messages (a jinja error)
            raise OpenAIError(400, f"messages: the model's chat template cannot render them ({type(e).__name__}: "
                              f"{e})", param="messages") from None
        prompt = list(prompt["input_ids"] if isinstance(prompt, dict) else prompt)
        stop, stop_ids, stop_strings = _stops(tok, req.stop, chat=True)
        max_tokens = req.max_completion_tokens or req.max_tokens
        sp = params(req, max_tokens, len(prompt), client.context_length, stop, "messages")
        response = await sample(client, prompt, req.n or 1, sp)
        choices = [_choice(tok, s, stop_ids, stop_strings) for s in response.sequences]
        if tools:
            choices = [_with_tool_calls(c) for c in choices]
        head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": req.model,
                "system_fingerprint": None}
        use = usage(len(prompt), choices)
        if req.stream:
            return _sse(_chat_chunks(head, choices, use if _include_usage(req) else None))
        return {**head, "object": "chat.completion", "usage": use, "choices": [
            {"index": i, "message": {"role": "assistant", "content": c.content, "refusal": None,
                                     **({"tool_calls": c.tool_calls} if c.tool_calls else {})},
             "logprobs": None, "finish_reason": c.finish} for i, c in enumerate(choices)]}

    # -- /v1/completions --------------------------------------------------------------------
    async def completions(request: Request):
        req = await _parse(request, CompletionRequest)
        _unsupported(req)
        target = resolve_model(req.model, extra)
        client = await sampler_for(target)
        tok = client.get_tokenizer()
        raw = req.prompt
        if isinstance(raw, str) or (isinstance(raw, list) and raw and all(isinstance(t, int) for t in raw)):
            raw = [raw]
        if not raw or any(isinstance(p, list) and not p for p in raw):
            raise OpenAIError(400, "prompt: give a non-empty string (or strings, or token ids)", param="prompt")
        prompts = [tok.encode(p, add_special_tokens=False) if isinstance(p, str) else list(p) for p in raw]
        if any(not p for p in prompts):
            raise OpenAIError(400, "prompt: an empty string encodes to no tokens; give some text", param="prompt")
        stop, stop_ids, stop_strings = _stops(tok, req.stop, chat=False)
        n = req.n or 1
        sps = [params(req, req.max_tokens or 16, len(p), client.context_length, stop, "prompt") for p in prompts]
        # every prompt submitted before any is awaited: the engine decodes them as one batch
        responses = await asyncio.gather(*[sample(client, p, n, sp) for p, sp in zip(prompts, sps)])
        choices = []
        for p_raw, p, response in zip(raw, prompts, responses):
            for s in response.sequences:
                c = _choice(tok, s, stop_ids, stop_strings)
                if req.echo:
                    echo = p_raw if isinstance(p_raw, str) else tok.decode(p)
                    c.text, c.pieces = echo + c.text, [echo, *c.pieces]
                choices.append(c)
        head = {"id": f"cmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": req.model,
                "system_fingerprint": None}
        use = usage(sum(len(p) for p in prompts), choices)
        if req.stream:
            return _sse(_completion_chunks(head, choices, use if _include_usage(req) else None))
        return {**head, "object": "text_completion", "usage": use, "choices": [
            {"index": i, "text": c.text, "logprobs": None, "finish_reason": c.finish} for i, c in enumerate(choices)]}

    app.post("/v1/chat/completions")(guard(chat))
    app.post("/v1/completions")(guard(completions))


def _include_usage(req: _Common) -> bool:
    return bool((req.stream_options or {}).get("include_usage"))


def _sse(chunks: list[dict]) -> StreamingResponse:
    async def events() -> AsyncIterator[str]:
        for chunk in chunks:
            yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
        yield "data: [DONE]\n\n"
    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def _chat_chunks(head: dict, choices: list[Choice], use: dict | None) -> list[dict]:
    base = {**head, "object": "chat.completion.chunk"}

    def chunk(i: int, delta: dict, finish: str | None = None) -> dict:
        return {**base, "choices": [{"index": i, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    out = []
    for i, c in enumerate(choices):
        out.append(chunk(i, {"role": "assistant", "content": "", "refusal": None}))
        content, sent = c.content or "", 0
        for piece in c.pieces:
            piece = piece[:max(len(content) - sent, 0)]
            if piece:
                out.append(chunk(i, {"content": piece}))
                sent += len(piece)
        for k, call in enumerate(c.tool_calls or []):
            out.append(chunk(i, {"tool_calls": [{"index": k, **call}]}))
        out.append(chunk(i, {}, c.finish))
    if use is not None:
        out.append({**base, "choices": [], "usage": use})
    return out


def _completion_chunks(head: dict, choices: list[Choice], use: dict | None) -> list[dict]:
    base = {**head, "object": "text_completion"}

    def chunk(i: int, text: str, finish: str | None = None) -> dict:
        return {**base, "choices": [{"index": i, "text": text, "logprobs": None, "finish_reason": finish}]}

    out = []
    for i, c in enumerate(choices):
        out += [chunk(i, piece) for piece in c.pieces]
        out.append(chunk(i, "", c.finish))
    if use is not None:
        out.append({**base, "choices": [], "usage": use})
    return out

