"""Host side of the worker protocol: spawn the worker (inside bwrap or not), exchange frames, kill it.

Frames are a 4-byte big-endian length + UTF-8 JSON. The worker is untrusted: replies are size-capped and
must parse, and anything unexpected counts as a crash of the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import struct
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import psutil

HEAD = struct.Struct(">I")


class WorkerDied(Exception):
    """The worker process exited or broke the protocol."""


class WorkerTimeout(Exception):
    """No reply within the allowed time."""


@dataclass
class LaunchSpec:
    """Everything needed to start one worker process."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    pass_fds: Sequence[int] = ()
    kill_tree: bool = False  # no PID namespace: also kill descendants one by one
    cleanup: list[Any] = field(default_factory=list)  # callables run after the process is gone


class WorkerProcess:
    def __init__(self, spec: LaunchSpec, max_frame_bytes: int) -> None:
        self.spec = spec
        self.max_frame = max_frame_bytes
        self.proc: asyncio.subprocess.Process | None = None
        self.info: dict[str, Any] = {}
        self._stderr: deque[bytes] = deque(maxlen=64)
        self._stderr_task: asyncio.Task[None] | None = None
        self._seq = 0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def stderr_text(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")[-4000:]

    async def start(self, timeout: float) -> dict[str, Any]:
        self.proc = await asyncio.create_subprocess_exec(
            *self.spec.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=self.spec.env, cwd=self.spec.cwd, pass_fds=tuple(self.spec.pass_fds),
            start_new_session=True, limit=2**16)
        for fd in self.spec.pass_fds:  # the child holds its own copies now
            with contextlib.suppress(OSError):
                os.close(fd)
        self._stderr_task = asyncio.create_task(self._drain_stderr())
        try:
            ready = await self._read(timeout)
        except (WorkerDied, WorkerTimeout):
            await self.kill()
            raise
        if ready.get("op") != "ready":
            await self.kill()
            raise WorkerDied(f"worker sent {ready.get('op')!r} instead of 'ready'")
        self.info = ready
        return ready

    async def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        if not self.alive or self.proc is None or self.proc.stdin is None:
            raise WorkerDied("worker is not running")
        self._seq = secrets.randbits(62)  # unguessable: a cell writing blind frames can't pass one as a reply
        body = json.dumps({**message, "id": self._seq}).encode()
        try:
            self.proc.stdin.write(HEAD.pack(len(body)) + body)
            await self.proc.stdin.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise WorkerDied(f"could not send to worker: {exc}") from exc
        reply = await self._read(timeout)
        if reply.get("id") != self._seq:  # e.g. a cell wrote its own frames on the control pipe
            raise WorkerDied(f"reply out of sequence (expected id {self._seq}, got {reply.get('id')!r})")
        return reply

    async def _read(self, timeout: float) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        stdout = self.proc.stdout
        try:
            async with asyncio.timeout(timeout):
                head = await stdout.readexactly(4)
                (size,) = HEAD.unpack(head)
                if size > self.max_frame:
                    raise WorkerDied(f"worker sent a {size}-byte frame (limit {self.max_frame})")
                body = await stdout.readexactly(size)
        except asyncio.IncompleteReadError as exc:
            await self._reap()
            raise WorkerDied(f"worker exited (code {self.proc.returncode}); stderr: {self.stderr_text()!r}") from exc
        except TimeoutError as exc:
            raise WorkerTimeout(f"no reply from worker within {timeout:.1f} s") from exc
        try:
            reply = json.loads(body)
        except ValueError as exc:
            raise WorkerDied(f"worker sent invalid JSON: {exc}") from exc
        if not isinstance(reply, dict):
            raise WorkerDied("worker sent a frame that is not a JSON object")
        return reply

    async def _drain_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        with contextlib.suppress(Exception):
            while chunk := await self.proc.stderr.read(4096):
                self._stderr.append(chunk)

    async def _reap(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2):
                    await self.proc.wait()

    def _sigkill(self, proc: asyncio.subprocess.Process) -> None:
        if proc.returncode is not None:
            return
        if self.spec.kill_tree:
            with contextlib.suppress(psutil.Error):
                for child in psutil.Process(proc.pid).children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        child.kill()
        # the worker leads its own process group (start_new_session). No proc.kill() after this:
        # Popen.send_signal() polls first and would reap the child behind asyncio's child watcher.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    def abort(self) -> None:
        """SIGKILL the worker's tree now, from outside a pending request: that request then fails with
        WorkerDied, and the owner recovers as after any crash (call kill() to reap)."""
        if self.proc is not None:
            self._sigkill(self.proc)

    async def kill(self) -> None:
        """Kill the worker and everything it started; wait for it; run cleanups."""
        proc, self.proc = self.proc, None
        if proc is not None:
            self._sigkill(proc)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await proc.wait()
            if proc.stdin is not None:
                proc.stdin.close()
                with contextlib.suppress(Exception):
                    await proc.stdin.wait_closed()
        if self._stderr_task is not None:
            self._stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._stderr_task
            self._stderr_task = None
        for fn in self.spec.cleanup:
            fn()
        self.spec.cleanup = []

    def _tree(self) -> list[psutil.Process]:
        if self.proc is None:
            return []
        try:
            root = psutil.Process(self.proc.pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    def _tree_sum(self, measure: Callable[[psutil.Process], int]) -> int:
        total = 0
        for p in self._tree():
            with contextlib.suppress(psutil.Error):
                total += measure(p)
        return total

    def tree_tasks(self) -> int:
        """Threads of every process in the worker's tree (what RLIMIT_NPROC counts)."""
        return self._tree_sum(lambda p: p.num_threads())

    def tree_rss(self) -> int:
        """Resident memory of the worker process tree (bytes)."""
        return self._tree_sum(lambda p: p.memory_info().rss)
