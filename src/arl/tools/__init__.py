"""Tools that model-written actions run through: the Python sandbox (`Sandbox`, `code_interpreter`)."""

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

__all__ = ["Sandbox", "SandboxCapabilities", "SandboxConfig", "SandboxError", "SandboxResult",
           "code_interpreter", "format_result", "make_code_interpreter", "sandbox_metrics"]
