"""Tinker's exception names, so that a script's `except tinker.TinkerError` (or a subclass) keeps its
meaning with `import arl as tinker` (exported as `arl.TinkerError` etc.; kept beside the types so that
every layer may raise them).

The local engine mostly raises Python's own errors (ValueError, TypeError) for bad arguments, as
the SDKs do client-side; these classes are raised where Tinker's server would answer with a status
error. Each also derives from the matching built-in, so existing `except FileExistsError` code works.
"""

from __future__ import annotations


class TinkerError(Exception):
    """Base of the errors below."""


class APIError(TinkerError):
    pass


class APIStatusError(APIError):
    pass


class APIConnectionError(APIError):
    pass


class APITimeoutError(APIConnectionError):
    pass


class APIResponseValidationError(APIError):
    pass


class BadRequestError(APIStatusError, ValueError):
    pass


class AuthenticationError(APIStatusError):
    pass


class PermissionDeniedError(APIStatusError):
    pass


class NotFoundError(APIStatusError, LookupError):
    pass


class ConflictError(APIStatusError, FileExistsError):
    """A checkpoint name that exists already (`save_state(..., overwrite=False)`)."""


class UnprocessableEntityError(APIStatusError):
    pass


class RateLimitError(APIStatusError):
    pass


class InternalServerError(APIStatusError):
    pass


class RequestFailedError(TinkerError):
    """An operation that failed after it was accepted (Tinker's failed future)."""

