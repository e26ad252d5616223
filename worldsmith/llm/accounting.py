"""Token and latency accounting per role (thread-safe)."""

from __future__ import annotations

import threading

from pydantic import BaseModel, Field


class RoleUsage(BaseModel):
    """Totals for one role. Tokens and latency count only calls that reached a model (not cache hits)."""

    calls: int = Field(0, description="Completions returned (cached or not), repair retries included.")
    cached_calls: int = Field(0, description="Completions answered from the on-disk cache.")
    prompt_tokens: int = Field(0, description="Prompt tokens of uncached calls.")
    completion_tokens: int = Field(0, description="Completion tokens of uncached calls.")
    latency_s: float = Field(0.0, description="Summed wall time of all calls, in seconds.")
    retries: int = Field(0, description="Attempts repeated after a transient error (429/5xx/timeout/connection).")
    repairs: int = Field(0, description="Structured answers that needed the repair retry.")
    errors: int = Field(0, description="Calls that ended in an error.")

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class UsageTracker:
    """Accumulates :class:`RoleUsage` per role; every method is safe to call from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roles: dict[str, RoleUsage] = {}

    def _get(self, role: str) -> RoleUsage:
        usage = self._roles.get(role)
        if usage is None:
            usage = self._roles[role] = RoleUsage()
        return usage

    def record_call(
        self, role: str, *, cached: bool, prompt_tokens: int, completion_tokens: int, latency_s: float
    ) -> None:
        with self._lock:
            u = self._get(role)
            u.calls += 1
            u.latency_s += latency_s
            if cached:
                u.cached_calls += 1
            else:
                u.prompt_tokens += prompt_tokens
                u.completion_tokens += completion_tokens

    def add(self, role: str, field: str, n: int = 1) -> None:
        """Increment a counter field (retries, repairs, errors)."""
        with self._lock:
            u = self._get(role)
            setattr(u, field, getattr(u, field) + n)

    def snapshot(self) -> dict[str, RoleUsage]:
        """A copy of the per-role totals."""
        with self._lock:
            return {role: u.model_copy() for role, u in sorted(self._roles.items())}

    def total(self) -> RoleUsage:
        with self._lock:
            out = RoleUsage()
            for u in self._roles.values():
                for name in RoleUsage.model_fields:
                    setattr(out, name, getattr(out, name) + getattr(u, name))
            return out

    def reset(self) -> None:
        with self._lock:
            self._roles.clear()
