"""Tools an agent calls: typed functions whose signature and docstring become the tool schema — the
local BM25 search (`search_tool`) and the Python sandbox (`Sandbox`, `code_interpreter`) — and the
tool-call text the model writes (`calls`: schema, format, parser; used by data, envs and rollout alike).

The names below load their module on first use: the sandbox is Linux-only (namespaces, seccomp, fcntl) and
the search index needs the `search` extra, so importing `arl.tools.calls` (every multi-turn chapter does)
must not import either."""

from __future__ import annotations

import importlib

_SANDBOX = ("Sandbox", "SandboxCapabilities", "SandboxConfig", "SandboxError", "SandboxResult", "code_interpreter",
            "format_result", "make_code_interpreter", "sandbox_metrics")
_SEARCH = ("BM25Index", "Passage", "format_passages", "search_tool")
_WHERE = {**{name: "arl.tools.sandbox" for name in _SANDBOX}, **{name: "arl.tools.search" for name in _SEARCH}}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'arl.tools' has no attribute {name!r}")
