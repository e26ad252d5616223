"""Token and latency accounting per role (thread-safe)."""

from __future__ import annotations

import threading
from typing import Any

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
    empty_completions: int = Field(0, description="Uncached completions that came back with no text.")
    faults: dict[str, int] = Field(default_factory=dict, description="Retried attempts per fault kind "
                                   "(rate_limit, server, timeout, connection, invalid_body).")
    failures: dict[str, int] = Field(default_factory=dict, description="Calls given up on per fault kind (retries "
                                     "spent) or per fatal kind (auth, unreachable).")

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
        """Increment a counter field (retries, repairs, errors, empty_completions)."""
        with self._lock:
            u = self._get(role)
            setattr(u, field, getattr(u, field) + n)

    def add_kind(self, role: str, field: str, kind: str, n: int = 1) -> None:
        """Increment one kind of a per-kind counter (faults, failures)."""
        with self._lock:
            counts: dict[str, int] = getattr(self._get(role), field)
            counts[kind] = counts.get(kind, 0) + n

    def snapshot(self) -> dict[str, RoleUsage]:
        """A copy of the per-role totals."""
        with self._lock:
            return {role: u.model_copy(deep=True) for role, u in sorted(self._roles.items())}

    def total(self) -> RoleUsage:
        with self._lock:
            out = RoleUsage()
            for u in self._roles.values():
                for name in RoleUsage.model_fields:
                    mine, theirs = getattr(out, name), getattr(u, name)
                    if isinstance(mine, dict):
                        for kind, n in theirs.items():
                            mine[kind] = mine.get(kind, 0) + n
                    else:
                        setattr(out, name, mine + theirs)
            return out

    def reset(self) -> None:
        with self._lock:
            self._roles.clear()


def fault_summary(before: dict[str, RoleUsage], after: dict[str, RoleUsage]) -> dict[str, dict[str, Any]]:
    """What went wrong between two :meth:`UsageTracker.snapshot` s, per role with anything to report:
    ``{role: {"retried": {kind: n}, "failed": {kind: n}, "empty_completions": n}}`` (zero counts left out)."""
    out: dict[str, dict[str, Any]] = {}
    for role, now in after.items():
        was = before.get(role, RoleUsage())
        entry: dict[str, Any] = {"retried": _diff(was.faults, now.faults), "failed": _diff(was.failures, now.failures),
                                 "empty_completions": now.empty_completions - was.empty_completions}
        entry = {k: v for k, v in entry.items() if v}
        if entry:
            out[role] = entry
    return out


def _diff(was: dict[str, int], now: dict[str, int]) -> dict[str, int]:
    return {k: n - was.get(k, 0) for k, n in sorted(now.items()) if n - was.get(k, 0)}
