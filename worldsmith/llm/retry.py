"""One retry policy for every provider: exponential backoff with jitter, honouring Retry-After."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, TypeVar

from worldsmith.llm.errors import TransientError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int
    base_s: float
    max_s: float

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based)."""
        if retry_after is not None and retry_after >= 0:
            # The server said when; add a little jitter so a burst of clients does not return in lockstep.
            return min(retry_after, self.max_s) * random.uniform(1.0, 1.1)
        ceiling = min(self.max_s, self.base_s * (2**attempt))
        return random.uniform(ceiling / 2, ceiling)  # "equal jitter": never less than half the ceiling


OnRetry = Callable[[int, TransientError, float], None]


async def retry(fn: Callable[[], Awaitable[T]], policy: RetryPolicy, on_retry: OnRetry | None = None) -> T:
    """Await ``fn()`` until it stops raising :class:`TransientError` or retries run out (then re-raise)."""
    attempt = 0
    while True:
        try:
            return await fn()
        except TransientError as exc:
            if attempt >= policy.max_retries:
                raise
            wait = policy.delay(attempt, exc.retry_after)
            if on_retry:
                on_retry(attempt, exc, wait)
            await asyncio.sleep(wait)
            attempt += 1


def parse_retry_after(headers: object) -> float | None:
    """Seconds from ``retry-after-ms`` / ``retry-after`` headers (number or HTTP date), else None."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    ms = get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
