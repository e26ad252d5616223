"""The one bridge from sync callers to the async LLM layer: a private event loop in a daemon thread.

Every operation of the LLM layer is written once, async. A sync method submits its coroutine to this loop
and waits for the result, so it works from any thread: one with no event loop, a worker thread of a pool,
and also a thread whose own loop is running (that loop is blocked while it waits, as with any blocking
call; async code should await the ``a…`` method instead).

Why one long-lived loop rather than ``asyncio.run`` per call: HTTP connection pools and asyncio semaphores
belong to one loop, so a shared loop keeps connections alive between sync calls and makes the per-endpoint
concurrency limit hold across every thread that uses the sync API.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")


class LoopThread:
    """An event loop running in a daemon thread, started on first use and restarted after a fork."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        return self._loop is not None and self._pid == os.getpid()

    @property
    def thread(self) -> threading.Thread | None:
        """The thread serving the loop (None before the first :meth:`run` and after :meth:`stop`)."""
        return self._thread if self.started else None

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():  # a forked child has the loop but not its thread
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(target=self._serve, args=(loop, ready), name=self.name, daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            loop.close()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and return its result (or raise its exception) in the calling thread."""
        loop = self._ensure()
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(f"{self.name}: a sync LLM method was called from inside the LLM's own event loop "
                               "(e.g. in a scripted responder); await the async method (acomplete, astructured, "
                               "aembed) there instead")
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # Ctrl-C in the caller: stop the request too (no-op when it already finished)
            raise

    def stop(self) -> None:
        """Stop the loop and wait for its thread (a later :meth:`run` starts a fresh one)."""
        with self._lock:
            loop, thread, pid = self._loop, self._thread, self._pid
            self._loop = self._thread = None
        if loop is None or thread is None or pid != os.getpid():
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not threading.current_thread():
            thread.join(timeout=5)
