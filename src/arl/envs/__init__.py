"""Environments behind one small protocol (messages in, messages out), tools as typed functions."""

from .tools import MalformedCall, ToolCall, call_tool, format_tool_call, parse_tool_calls, tool_schema

__all__ = ["MalformedCall", "ToolCall", "call_tool", "format_tool_call", "parse_tool_calls", "tool_schema"]
