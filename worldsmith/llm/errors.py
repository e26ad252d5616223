"""Errors of the LLM layer. Each message is one line that says what failed and which setting to fix."""

from __future__ import annotations

from typing import Any

from worldsmith.core.llm_config import RoleConfigError

#: What a retried attempt failed on; accounting counts faults per role and kind.
FAULT_KINDS = ("rate_limit", "server", "timeout", "connection", "invalid_body")


def error_kind(exc: BaseException) -> str:
    """A short machine-readable kind for any LLM error (``llm ping --json``, run events)."""
    kind = getattr(exc, "kind", None)
    if isinstance(kind, str):
        return kind
    for cls, name in ((LLMOutputError, "output"), (LLMContextError, "context"), (LLMRequestError, "request"), (LLMConfigError, "config"),
                      (LLMUnavailableError, "unavailable")):
        if isinstance(exc, cls):
            return name
    return "error"


class LLMError(Exception):
    """Base class of every error the LLM layer raises."""

    def __reduce__(self) -> tuple[Any, ...]:
        # keyword-only fields (kind, role, raw_text, ...) survive pickling (checkpoints, worker processes)
        return _rebuild, (type(self), self.args, dict(self.__dict__))


def _rebuild(cls: type[LLMError], args: tuple[Any, ...], state: dict[str, Any]) -> LLMError:
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class LLMConfigError(LLMError, RoleConfigError):
    """The configuration is wrong (unknown model, missing key, bad value); the message names the key."""


class LLMUnavailableError(LLMError):
    """The model or endpoint cannot be used right now (unreachable, not found, package missing, retries spent).

    ``kind``: the fault kind whose retries were spent (rate_limit, server, invalid_body, ...), else 'unavailable'."""

    def __init__(self, message: str, *, kind: str = "unavailable") -> None:
        super().__init__(message)
        self.kind = kind


class LLMFatalError(LLMUnavailableError):
    """No request to this endpoint can succeed until someone acts: the key is rejected (``kind='auth'``) or the
    endpoint is unreachable or hangs after every retry (``kind='unreachable'``). Batch runs stop on it at once
    instead of failing each item in turn."""

    def __init__(self, message: str, *, kind: str, role: str = "", endpoint: str = "") -> None:
        super().__init__(message, kind=kind)
        self.role = role
        self.endpoint = endpoint


class LLMAuthError(LLMFatalError, LLMConfigError):
    """HTTP 401/403: the endpoint rejected the API key (a configuration problem, and fatal for a batch)."""

    def __init__(self, message: str, *, role: str = "", endpoint: str = "") -> None:
        super().__init__(message, kind="auth", role=role, endpoint=endpoint)


class LLMRequestError(LLMError):
    """The endpoint rejected the request itself (HTTP 400 and similar); retrying will not help."""


class LLMContextError(LLMRequestError):
    """The prompt does not fit the model's context window: a longer conversation will not fit either, so a caller
    that grows one (the analyst's turns) ends it here instead of failing the whole run."""


class LLMOutputError(LLMError):
    """The model's output did not validate against the schema, even after one repair retry."""

    def __init__(self, message: str, *, raw_text: str, errors: list[str], role: str, schema_name: str) -> None:
        super().__init__(message)
        self.raw_text = raw_text
        self.errors = errors
        self.role = role
        self.schema_name = schema_name


class TransientError(LLMError):
    """One attempt failed in a way that a retry may fix (429, 5xx, timeout, connection error).

    Providers raise it; the client retries with backoff and, once retries are spent, turns it into
    :class:`LLMUnavailableError` with the config keys to check.
    """

    def __init__(self, message: str, *, retry_after: float | None = None, kind: str = "error", detail: Any = None):
        super().__init__(message)
        self.retry_after = retry_after
        self.kind = kind  # one of FAULT_KINDS
        self.detail = detail
