"""The package's optional parts: the extras of `pip install 'agentic-rl-lab[EXTRA]'` and the platform a
chapter needs, checked before a run starts so that a missing one is one line naming the fix.

`pip install agentic-rl-lab` alone runs every chapter that needs none of them, on Linux, macOS and Windows.
"""

from __future__ import annotations

import importlib
import sys

EXTRAS = {
    "textworld": ("textworld",),
    "search": ("bm25s",),
    "serve": ("fastapi", "uvicorn", "tinker"),
}
"""Extra -> the modules it brings (pyproject.toml's [project.optional-dependencies])."""

LINUX = "linux"
"""A need that is no package: the retool sandbox's layers (namespaces, seccomp) exist only on Linux."""


class MissingExtra(RuntimeError):
    """A chapter or feature needs an extra (or a platform) this installation lacks."""

    def __init__(self, message: str, extra: str):
        super().__init__(message)
        self.extra = extra


def install_line(extra: str) -> str:
    return f"pip install 'agentic-rl-lab[{extra}]'"


def missing(extra: str) -> str | None:
    """The first module of `extra` that does not import, or None when all do."""
    if extra == LINUX:
        return None if sys.platform.startswith("linux") else sys.platform
    for module in EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ImportError:
            return module
    return None


def require(extra: str, what: str):
    """The extra's first module, or `MissingExtra` saying that `what` (e.g. "the textworld chapter") needs it."""
    if extra == LINUX:
        if missing(LINUX):
            raise MissingExtra(f"{what} runs model-written code in a sandbox made of Linux namespaces and seccomp, "
                               f"which {sys.platform} does not have: run it on Linux (a container, or WSL 2 on Windows)",
                               extra)
        return None
    module = missing(extra)
    if module is not None:
        raise MissingExtra(f"{what} needs the {module} package: {install_line(extra)}", extra)
    return importlib.import_module(EXTRAS[extra][0])


def check(needs, what: str) -> None:
    """Raise `MissingExtra` for the first of `needs` (extra names, or LINUX) that is missing."""
    for extra in needs:
        require(extra, what)
