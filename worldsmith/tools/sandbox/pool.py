"""A warm pool of started sandbox sessions, for workloads that open many fresh sessions (RL rollouts).

Starting a session costs a worker process plus the analysis-stack import (seconds under load); a pool keeps `size`
sessions started with `config.preload` imported, hands one out at once, and starts a replacement in the background.
Sessions are never reused: each `acquire` returns a session no code has run in, and `release` closes it.

    async with SandboxPool(config, size=8) as pool:
        sb = await pool.acquire(inputs=[Path("sales.csv")])   # input files are copied into its workspace
        r = await sb.run("import pandas as pd; pd.read_csv('sales.csv').shape")
        await pool.release(sb)

Inputs are copied (`Sandbox.upload`), not bound, because a started session's mounts are fixed: fine for the small
tables of analysis tasks; large inputs should use `open_sandbox(..., inputs=...)` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from worldsmith.core.inputs import input_mounts
from worldsmith.core.sandbox_config import SandboxConfig
from worldsmith.tools.sandbox.base import Sandbox, SandboxError


class SandboxPool:
    def __init__(self, config: SandboxConfig | None = None, size: int = 4) -> None:
        if size < 0:
            raise ValueError(f"SandboxPool size must be ≥ 0, got {size}")
        self.config = config or SandboxConfig()
        self.size = size
        self._ready: deque[asyncio.Task[Sandbox]] | None = None  # oldest first
        self._closed = False

    async def __aenter__(self) -> SandboxPool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Begin starting `size` sessions (returns at once; `wait_ready` waits for them)."""
        if self._ready is None:
            self._ready = deque()
            for _ in range(self.size):
                self._refill()

    async def wait_ready(self) -> None:
        """Wait until every pooled session has started (a benchmark's or a trainer's warm-up)."""
        if self._ready is not None:
            await asyncio.gather(*list(self._ready), return_exceptions=True)

    def _refill(self) -> None:
        if not self._closed and self._ready is not None:
            self._ready.append(asyncio.ensure_future(self._new()))

    async def _new(self) -> Sandbox:
        from worldsmith.tools.sandbox import open_sandbox  # the package's factory (imports this module lazily)

        sb = open_sandbox(self.config, mode="persistent")
        await sb.start()
        return sb

    async def acquire(self, inputs: Sequence[Path] = ()) -> Sandbox:
        """A started, unused session with `inputs` (files or folders) copied into its workspace by base name."""
        if self._closed:
            raise RuntimeError("SandboxPool is closed")
        await self.start()
        assert self._ready is not None
        sb: Sandbox | None = None
        while sb is None and self._ready:
            task = self._ready.popleft()
            self._refill()
            try:
                sb = await task
            except (SandboxError, OSError):  # a failed warm start: a direct start below raises the real error
                sb = None
        if sb is None:
            sb = await self._new()
        try:
            for name, path in input_mounts([Path(p) for p in inputs]):  # awkward names: once more as an alias
                files = sorted(f for f in path.rglob("*") if f.is_file()) if path.is_dir() else [path]
                for f in files:  # a folder input (e.g. memos/) keeps its layout under its own name
                    await sb.upload(f, name if f == path else f"{name}/{f.relative_to(path).as_posix()}")
        except BaseException:
            await sb.close()
            raise
        return sb

    async def release(self, sandbox: Sandbox) -> None:
        await sandbox.close()

    async def close(self) -> None:
        """Close every pooled session (started or still starting)."""
        self._closed = True
        if self._ready is None:
            return
        while self._ready:
            task = self._ready.popleft()
            if not task.done():
                task.cancel()
            with contextlib.suppress(BaseException):
                await (await task).close()
