"""Sync entry points onto async implementations: each API is written once, async, and sync callers use `run_sync`."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code.

    Inside a running event loop (a notebook, a sync helper called from async code) `asyncio.run` refuses, so the
    coroutine then runs on its own loop in a worker thread while this thread waits."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
