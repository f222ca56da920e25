"""Environments behind one small protocol (messages in, messages out), tools as typed functions.

`registered()` imports every environment module (`ENV_MODULES`) and returns the registry, so the
conformance tests cover them all; importing this package alone loads no environment.
"""

from .base import ENV_MODULES, REGISTRY, Env, EnvSpec, StepResult, ToolEnv, check_env, register, registered
from ..tools.calls import MalformedCall, ToolCall, call_tool, format_tool_call, parse_tool_calls, tool_schema

__all__ = ["ENV_MODULES", "REGISTRY", "Env", "EnvSpec", "MalformedCall", "StepResult", "ToolCall", "ToolEnv", "call_tool",
           "check_env", "format_tool_call", "parse_tool_calls", "register", "registered", "tool_schema"]
