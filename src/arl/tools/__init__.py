"""Tools an agent calls: typed functions whose signature and docstring become the tool schema — the
local BM25 search (`search_tool`) and the Python sandbox (`Sandbox`, `code_interpreter`) — and the
tool-call text the model writes (`calls`: schema, format, parser; used by data, envs and rollout alike)."""

from arl.tools.sandbox import (
    Sandbox,
    SandboxCapabilities,
    SandboxConfig,
    SandboxError,
    SandboxResult,
    code_interpreter,
    format_result,
    make_code_interpreter,
    sandbox_metrics,
)
from arl.tools.search import BM25Index, Passage, format_passages, search_tool

__all__ = ["BM25Index", "Passage", "Sandbox", "SandboxCapabilities", "SandboxConfig", "SandboxError", "SandboxResult",
           "code_interpreter", "format_passages", "format_result", "make_code_interpreter", "sandbox_metrics", "search_tool"]
