"""The environment protocol: messages in, messages out.

An episode is one `Env` instance. The rollout asks it for the opening messages (system and user),
then hands it each assistant message; it answers with a `StepResult`: the observation messages to
append (tool results, or a user turn), the reward of that turn, and whether the episode is over and
why. Budgets (turns, tool calls, tokens) are not the environment's business: the rollout enforces
them, so every environment gets the same, named truncation reasons (`arl.rollout.multiturn`).

As in Gymnasium, an episode that the environment ends ("answered", "malformed_call", "won") is kept
apart from one the rollout cuts short ("max_turns", ...): the first is graded by the environment,
the second gets the environment's `truncation_reward`.

An environment whose set-up is slow (a game file loaded) may define `prepare()`: the rollout calls it in a
worker thread while the first turn decodes, so that the set-up and the decoding overlap.
"""

from __future__ import annotations

import copy
import importlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..tools.calls import MalformedCall, call_tool, format_tool_call, parse_tool_calls, tool_schema

ROLES = ("system", "user", "assistant", "tool")


@dataclass
class StepResult:
    messages: list[dict]
    """Observation messages to append to the conversation (role "tool" or "user"); empty when done."""
    reward: float = 0.0
    done: bool = False
    """The environment ended the episode (answered, failed, won): never a budget running out."""
    stop_reason: str | None = None
    """Why the environment ended the episode (set exactly when `done`)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Per-turn counts the rollout sums over the episode, e.g. {"tool_calls": 1, "tool_errors": 0}."""


@runtime_checkable
class Env(Protocol):
    tools: Sequence[Callable[..., str]]
    """Typed functions the model may call; their schemas go to the chat template's `tools=`."""
    truncation_reward: float
    """Reward of an episode the rollout cut short (a budget ran out before the environment ended it)."""

    def initial_messages(self) -> list[dict]: ...

    def step(self, message: dict) -> StepResult: ...


class ToolEnv:
    """Turn handling that tool-using environments share.

    A turn with tool calls runs them all, in order (a tool that raises becomes an error observation; one
    that returns bytes, an encoded image, becomes an image observation),
    and answers with one `tool` message per call: a prompt may ask for one call per turn, but extra
    calls are not malformed, they count against the rollout's `max_tool_calls`; a turn whose call cannot be parsed ends the episode with
    `malformed_reward` ("malformed_call"); a turn without a call is the final answer, which `grade`
    scores ("answered"). A subclass sets `tools`, the rewards and `initial_messages`, and writes `grade`.
    """

    tools: Sequence[Callable[..., str]] = ()
    truncation_reward: float = 0.0
    malformed_reward: float = 0.0

    def initial_messages(self) -> list[dict]:
        raise NotImplementedError

    def grade(self, answer: str) -> tuple[float, dict[str, float]]:
        """(reward, metrics) of a final answer."""
        raise NotImplementedError

    def step(self, message: dict) -> StepResult:
        parsed = parse_tool_calls(message["content"])
        if isinstance(parsed, MalformedCall):
            return StepResult([], self.malformed_reward, True, "malformed_call", {"malformed_calls": 1.0})
        if not parsed:
            reward, metrics = self.grade(message["content"])
            return StepResult([], reward, True, "answered", metrics)
        outputs = [call_tool(self.tools, call) for call in parsed]
        # a tool that returns bytes returned an image (Spec-o3's rendered window)
        return StepResult([{"role": "tool", "content": out if isinstance(out, str) else [{"type": "image", "image": out}]}
                           for out, _ in outputs],
                          metrics={"tool_calls": float(len(outputs)), "tool_errors": float(sum(not ok for _, ok in outputs))})


@dataclass(frozen=True)
class EnvSpec:
    name: str
    examples: Callable[[], list[Env]]
    """Fresh small episodes of this environment, for the conformance check and the mask tests."""
    description: str


REGISTRY: dict[str, EnvSpec] = {}
ENV_MODULES = ("arl.envs.search_r1", "arl.envs.retool", "arl.envs.textworld", "arl.envs.spec_o3")
"""Every module that registers an environment: a new environment adds its module here."""


def register(name: str, examples: Callable[[], list[Env]], description: str) -> None:
    """Add an environment to the registry that the conformance tests run over."""
    if name in REGISTRY:
        raise ValueError(f"environment {name!r} is registered twice")
    REGISTRY[name] = EnvSpec(name, examples, description)


def registered() -> dict[str, EnvSpec]:
    """The registry with every environment of `ENV_MODULES` loaded."""
    for module in ENV_MODULES:
        importlib.import_module(module)
    return REGISTRY


def check_env(env: Env) -> None:
    """The conformance check every registered environment passes (raises AssertionError naming the rule).

    Opening messages are well-formed chat messages ending with a user turn (content: a string, or a list of
    `{"type": "text", "text": str}` and `{"type": "image", "image": bytes}` parts); every tool has a schema;
    a final answer ends the episode with a named reason and a finite reward; an unreadable tool call
    ends it as "malformed_call"; a well-formed call to each tool is answered with tool messages and
    does not end it; observations are strings; rewards are finite floats.
    """
    assert isinstance(env, Env), f"{type(env).__name__} does not implement the Env protocol"
    opening = env.initial_messages()
    assert opening and all(m.get("role") in ROLES and _content_ok(m.get("content")) for m in opening), \
        "initial_messages: a non-empty list of {role, content} messages (content: str or text/image parts)"
    assert opening[-1]["role"] == "user", "initial_messages must end with the user turn the model answers"
    assert math.isfinite(env.truncation_reward), "truncation_reward must be a finite float"
    for tool in env.tools:
        tool_schema(tool)  # raises naming the missing annotation or docstring line
    # each probe steps a copy in the start state, so the probes do not spend the episode's own state
    for message, expect in [("Answer: 42", "final"), ("<tool_call>{not json</tool_call>", "malformed")] + \
            [(format_tool_call(t.__name__, _example_arguments(t)), "call") for t in env.tools]:
        result = copy.deepcopy(env).step({"role": "assistant", "content": message})
        assert isinstance(result, StepResult), "step must return a StepResult"
        assert math.isfinite(result.reward), f"step({message!r}): reward {result.reward} is not finite"
        assert result.done == (result.stop_reason is not None), "stop_reason is set exactly when done"
        assert all(m.get("role") in ("tool", "user") and _content_ok(m.get("content")) for m in result.messages), \
            "observations are tool or user messages whose content is a string or text/image parts"
        if expect == "call":
            assert not result.done and len(result.messages) == 1 and result.messages[0]["role"] == "tool", \
                f"a well-formed call ({message!r}) gets one tool message and the episode goes on"
        else:
            assert result.done and not result.messages, f"{expect} turn {message!r} ends the episode"
        if expect == "malformed":
            assert result.stop_reason == "malformed_call", "an unreadable tool call ends as 'malformed_call'"


def _content_ok(content) -> bool:
    """A message's content: a string, or a non-empty list of text parts (a string) and image parts (bytes)."""
    if isinstance(content, str):
        return True
    return isinstance(content, list) and bool(content) and all(
        (p.get("type") == "text" and isinstance(p.get("text"), str))
        or (p.get("type") == "image" and isinstance(p.get("image"), bytes | bytearray) and len(p["image"]) > 0)
        for p in content if isinstance(p, dict)) and all(isinstance(p, dict) for p in content)


def _example_arguments(tool: Callable) -> dict:
    props = tool_schema(tool)["function"]["parameters"]["properties"]
    values = {"string": "example", "integer": 1, "number": 1.0, "boolean": True}
    return {name: [values[p["items"]["type"]], 2 * values[p["items"]["type"]]] if p["type"] == "array" else values[p["type"]]
            for name, p in props.items()}
