"""Tools as typed Python functions, and the tool-call text the model writes.

A tool is a plain function with annotated parameters and a Google-style docstring; `tool_schema`
turns it into the JSON schema the chat template's `tools=` argument takes, so what the model is told
about a tool can never drift from the code that runs it. The model calls a tool by writing one of
the two forms Qwen models use inside its turn:

    <tool_call>
    {"name": "search", "arguments": {"query": "Velmora"}}
    </tool_call>

    <tool_call><function=search><parameter=query>Velmora</parameter></function></tool_call>

`parse_tool_calls` reads both; anything else that opens a `<tool_call>` is malformed, which is a
counted outcome of its own (`MalformedCall`), not an exception.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass

JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}
LIST_TYPES = {list[t]: name for t, name in JSON_TYPES.items()}
"""`list[float]` and the like: a JSON array of that type (Spec-o3's `wavelength_range`)."""
OPEN, CLOSE = "<tool_call>", "</tool_call>"
_XML_CALL = re.compile(r"^\s*<function=([\w.-]+)>(.*)</function>\s*$", re.S)
_XML_PARAM = re.compile(r"<parameter=([\w.-]+)>\n?(.*?)\n?</parameter>", re.S)


def tool_schema(fn: Callable) -> dict:
    """The `{"type": "function", "function": {name, description, parameters}}` schema of `fn`.

    The description is the docstring's first paragraph; each parameter's description is its line
    under `Args:`; types come from the annotations (str, int, float, bool, or a list of one of them). A
    parameter without an
    annotation or an `Args:` line is an error naming it: the model would be told nothing about it.
    """
    doc = inspect.getdoc(fn)
    if not doc:
        raise ValueError(f"tool {fn.__name__}: add a docstring (its first paragraph is what the model is told)")
    summary = doc.split("\n\n")[0].replace("\n", " ").strip()
    arg_docs = dict(re.findall(r"^\s+(\w+)(?: \([^)]*\))?:\s*(.+)$", doc.split("Args:", 1)[1], re.M)) if "Args:" in doc else {}
    hints = typing.get_type_hints(fn)
    properties, required = {}, []
    for name, param in inspect.signature(fn).parameters.items():
        hint = hints.get(name)
        if hint not in JSON_TYPES and hint not in LIST_TYPES:
            raise ValueError(f"tool {fn.__name__}: annotate parameter {name!r} as str, int, float or bool "
                             "(or a list of one of them)")
        if name not in arg_docs:
            raise ValueError(f"tool {fn.__name__}: describe parameter {name!r} under 'Args:' in the docstring")
        kind = {"type": JSON_TYPES[hint]} if hint in JSON_TYPES else {"type": "array", "items": {"type": LIST_TYPES[hint]}}
        properties[name] = {**kind, "description": arg_docs[name].strip()}
        if param.default is inspect.Parameter.empty:
            required.append(name)
    return {"type": "function", "function": {"name": fn.__name__, "description": summary,
                                             "parameters": {"type": "object", "properties": properties,
                                                            "required": required}}}


def format_tool_call(name: str, arguments: dict) -> str:
    """The JSON form of a call, byte for byte as Qwen's chat template renders an assistant tool call."""
    return f'{OPEN}\n{json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)}\n{CLOSE}'


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict


@dataclass(frozen=True)
class MalformedCall:
    """A turn that opened a `<tool_call>` the parser could not read; `reason` says what was wrong."""

    reason: str


def parse_tool_calls(text: str) -> list[ToolCall] | MalformedCall:
    """The tool calls in an assistant turn, in order ([] when the turn calls none).

    Malformed: an unclosed or nested tag, a body that is neither form, JSON without a string "name"
    and an object "arguments", or text after the last call (the call must end the turn, so the model
    cannot write an answer and a call in one turn)."""
    calls: list[ToolCall] = []
    pos = 0
    while (start := text.find(OPEN, pos)) != -1:
        end = text.find(CLOSE, start)
        if end == -1:
            return MalformedCall("unclosed <tool_call>")
        body = text[start + len(OPEN):end]
        if OPEN in body:
            return MalformedCall("nested <tool_call>")
        call = _parse_body(body)
        if isinstance(call, MalformedCall):
            return call
        calls.append(call)
        pos = end + len(CLOSE)
    if CLOSE in text[pos:]:
        return MalformedCall("</tool_call> without <tool_call>")
    if calls and text[pos:].strip():
        return MalformedCall("text after the tool call")
    return calls


def _parse_body(body: str) -> ToolCall | MalformedCall:
    xml = _XML_CALL.match(body)
    if xml:
        return ToolCall(xml.group(1), dict(_XML_PARAM.findall(xml.group(2))))
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return MalformedCall("the call is neither JSON nor <function=...> XML")
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not isinstance(obj.get("arguments", {}), dict):
        return MalformedCall('the JSON needs a string "name" and an object "arguments"')
    return ToolCall(obj["name"], obj.get("arguments", {}))


def call_tool(tools: Sequence[Callable], call: ToolCall) -> tuple[str | bytes, bool]:
    """(observation, ok): the tool's return value (text, or bytes: an encoded image, which the
    environment returns as an image observation), or an error observation when the name is unknown,
    the arguments do not fit its signature, or the tool raises: an agent's mistake (or a tool's
    failure) is something to observe and learn from, never a crashed rollout."""
    by_name = {t.__name__: t for t in tools}
    fn = by_name.get(call.name)
    if fn is None:
        return f"Error: unknown tool {call.name!r}; available: {', '.join(by_name)}", False
    try:
        inspect.signature(fn).bind(**call.arguments)
    except TypeError as e:
        return f"Error: bad arguments for {call.name}: {e}", False
    try:
        out = fn(**call.arguments)
        return (bytes(out) if isinstance(out, bytes | bytearray) else str(out)), True
    except Exception as e:  # noqa: BLE001 - any tool failure becomes an observation (see docstring)
        return f"Error: {call.name} failed: {type(e).__name__}: {e}", False
