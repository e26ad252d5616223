"""The sandbox interface every backend implements, and the result of running one cell.

A `Sandbox` is an async context manager around one *session*: Python state persists between `run()` calls in
`persistent` mode; in `replay` mode every cell runs in a fresh process that first re-runs the earlier successful
cells silently (memory-frugal RL rollouts). Backends implement a handful of primitives (`_start`, `_exec`,
`_restart`, `_release`, `_close` and the file operations); mode handling, the static pre-check and the history
of successful cells live here, once.
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Coroutine, TypeVar

from pydantic import BaseModel, Field

from worldsmith.core.sandbox_config import Mode, SandboxConfig
from worldsmith.tools.sandbox.precheck import precheck

T = TypeVar("T")


class SandboxError(RuntimeError):
    """A sandbox could not do what was asked (not an error of the user's code, which goes into ExecResult)."""


class SandboxUnavailable(SandboxError):
    """The chosen backend cannot start on this host; the message names the fix."""


class SandboxClosed(SandboxError):
    """The session was used before `start()` / after `close()`."""


class PathOutsideWorkspace(SandboxError, ValueError):
    """A file path given to upload/download leaves the workspace (absolute, '..', or through a symlink)."""


class ExecError(BaseModel):
    type: str = Field(description="exception class name, e.g. 'KeyError', 'TimeoutError', 'PrecheckRejected'")
    message: str = Field(description="str(exception)")
    traceback: str = Field("", description="traceback limited to the cell's own frames")
    columns: list[str] | None = Field(None, description="for a KeyError raised by a pandas DataFrame lookup: that "
                                                        "DataFrame's columns (the first 60)")


class ExecResult(BaseModel):
    """What one cell did. `ok` is False when it raised, timed out, crashed the worker, or was refused."""

    stdout: str = ""
    stderr: str = ""
    error: ExecError | None = None
    duration_s: float = Field(0.0, description="wall-clock time of the cell itself (seconds)")
    truncated: bool = Field(False, description="stdout or stderr was cut to head + tail")
    timed_out: bool = False
    crashed: bool = Field(False, description="the worker process died (killed, segfault, os._exit)")
    restarted: bool = Field(False, description="the session was restarted after this cell: Python state is lost "
                            "(call `replay()` to rebuild it from the successful cells)")
    files_changed: list[str] = Field(default_factory=list, description="workspace paths created or modified by "
                                     "the cell, relative and sorted (saved plots included)")

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out and not self.crashed

    def to_observation(self, max_chars: int = 4000) -> str:
        """The text an agent sees: output, then the error, then notes on files/timeouts; cut head+tail to fit."""
        parts: list[str] = []
        if self.stdout:
            parts.append(self.stdout.rstrip("\n"))
        if self.stderr:
            parts.append("[stderr]\n" + self.stderr.rstrip("\n"))
        if self.error is not None:
            if self.error.type == "PrecheckRejected":
                parts.append(f"[refused before running] {self.error.message}")
            else:
                parts.append((self.error.traceback or f"{self.error.type}: {self.error.message}").rstrip("\n"))
        if self.timed_out:
            parts.append(f"[timed out after {self.duration_s:.1f} s" +
                         ("; the session was restarted and its variables are gone]" if self.restarted else "]"))
        elif self.crashed:
            parts.append("[the interpreter crashed; the session was restarted and its variables are gone]")
        if self.files_changed:
            shown = self.files_changed[:20]
            more = f" (+{len(self.files_changed) - 20} more)" if len(self.files_changed) > 20 else ""
            parts.append("[files written: " + ", ".join(shown) + more + "]")
        text = "\n".join(parts) if parts else "[no output]"
        return truncate_middle(text, max_chars)[0]


def truncate_middle(text: str, max_chars: int) -> tuple[str, bool]:
    """Keep the head and tail of `text` around a marker saying how much was dropped."""
    if len(text) <= max_chars:
        return text, False
    marker_room = 40
    keep = max(max_chars - marker_room, 2)
    head, tail = keep // 2, keep - keep // 2
    dropped = len(text) - head - tail
    return f"{text[:head]}\n... [truncated {dropped} chars] ...\n{text[len(text) - tail:]}", True


def rejected(message: str) -> ExecResult:
    return ExecResult(error=ExecError(type="PrecheckRejected", message=message))


class Sandbox(ABC):
    """One execution session. Use `async with open_sandbox(...) as sb: r = await sb.run("print(1)")`."""

    isolated: bool = True  # False for backends that do not contain hostile code (the `process` backend)

    def __init__(self, config: SandboxConfig, mode: Mode | None = None) -> None:
        self.config = config
        self.mode: Mode = mode or config.mode
        self._history: list[str] = []
        self.lost_history: list[str] = []
        self._state = "new"
        self._lock = asyncio.Lock()

    # ---- lifecycle -------------------------------------------------------------------------------------
    async def __aenter__(self) -> Sandbox:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        if self._state == "open":
            return
        if self._state == "closed":
            raise SandboxClosed("this sandbox session was closed; open a new one with open_sandbox()")
        await self._start(eager=self.mode == "persistent")
        self._state = "open"

    async def close(self) -> None:
        if self._state == "closed":
            return
        self._state = "closed"
        await self._close()

    async def restart(self, replay: bool = False) -> ExecResult | None:
        """Fresh interpreter. With `replay=True` the successful cells so far are re-run silently."""
        self._check_open()
        async with self._lock:
            cells, self._history = self._history, []
            await self._restart()
            if replay:
                return await self._replay(cells, self.config.timeout_s)
            return None

    async def replay(self, cells: list[str] | None = None) -> ExecResult:
        """Re-run `cells` (default: those lost in the last automatic restart) silently in the current process."""
        self._check_open()
        async with self._lock:
            cells = list(self.lost_history if cells is None else cells)
            self.lost_history = []
            return await self._replay(cells, self.config.timeout_s)

    @property
    def history(self) -> list[str]:
        """Successful cells whose effects make up the current Python state, oldest first."""
        return list(self._history)

    # ---- running code ----------------------------------------------------------------------------------
    async def run(self, code: str, timeout: float | None = None) -> ExecResult:
        self._check_open()
        limit = self.config.timeout_s if timeout is None else timeout
        if limit <= 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
        if self.config.precheck:
            report = precheck(code, self.config.allowed_write_roots)
            if not report.ok:
                return rejected(report.message())
        async with self._lock:
            if self.mode == "replay":
                return await self._run_replayed(code, limit)
            result = await self._exec(code, limit, silent=False)
            self._record(code, result)
            return result

    async def _run_replayed(self, code: str, limit: float) -> ExecResult:
        await self._restart()
        try:
            prior = await self._replay(list(self._history), self.config.timeout_s, keep=False)
            if not prior.ok:
                return prior
            result = await self._exec(code, limit, silent=False)
            if result.ok:
                self._history.append(code)
            return result
        finally:
            await self._release()

    async def _replay(self, cells: list[str], limit: float, keep: bool = True) -> ExecResult:
        total = 0.0
        for index, cell in enumerate(cells):
            result = await self._exec(cell, limit, silent=True, scan=False)
            total += result.duration_s
            if not result.ok:
                err = result.error or ExecError(type="Crashed", message="worker died")
                return result.model_copy(update={"error": ExecError(
                    type="ReplayFailed", message=f"replaying cell {index + 1} of {len(cells)} failed: "
                    f"{err.type}: {err.message}", traceback=err.traceback), "duration_s": total})
            if keep:
                self._history.append(cell)
        return ExecResult(duration_s=total)

    def _record(self, code: str, result: ExecResult) -> None:
        if result.restarted:
            self.lost_history, self._history = self._history, []
        elif result.ok:
            self._history.append(code)

    def _check_open(self) -> None:
        if self._state != "open":
            raise SandboxClosed(f"sandbox is {self._state}; use `async with open_sandbox(...)` or await start()")

    # ---- backend primitives ----------------------------------------------------------------------------
    @abstractmethod
    async def _start(self, eager: bool) -> None:
        """Prepare the session; start the interpreter now if `eager` (else on first `_exec`)."""

    @abstractmethod
    async def _exec(self, code: str, timeout: float, silent: bool, scan: bool = True) -> ExecResult:
        """Run one cell in the current interpreter (starting one if needed); restart it after a crash/kill."""

    @abstractmethod
    async def _restart(self) -> None:
        """Discard the interpreter and start a fresh one."""

    async def _release(self) -> None:
        """Replay mode: free the interpreter between cells (default: keep it)."""

    @abstractmethod
    async def _close(self) -> None:
        """Stop everything and clean up what the session created."""

    # ---- files -----------------------------------------------------------------------------------------
    @property
    @abstractmethod
    def workspace(self) -> Path | None:
        """The host directory cells see as their cwd, or None for a remote backend."""

    @abstractmethod
    async def upload(self, src: Path | str | bytes, dest_rel: str) -> None:
        """Copy a host file (path) or raw bytes to `dest_rel` inside the workspace."""

    @abstractmethod
    async def download(self, rel: str) -> bytes:
        """Read a workspace file; refuses paths that leave the workspace, including through symlinks."""

    @abstractmethod
    async def list_files(self, include_inputs: bool = False) -> list[str]:
        """Workspace files (relative paths, sorted); input files only with `include_inputs`."""


class SyncSandbox:
    """Blocking facade for scripts: drives an async Sandbox on a private event-loop thread.

    with SyncSandbox(open_sandbox(cfg, workspace)) as sb:
        print(sb.run("1 + 1").stdout)
    """

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sandbox-loop", daemon=True)
        self._thread.start()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __enter__(self) -> SyncSandbox:
        self._call(self.sandbox.start())
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, code: str, timeout: float | None = None) -> ExecResult:
        return self._call(self.sandbox.run(code, timeout))

    def upload(self, src: Path | str | bytes, dest_rel: str) -> None:
        self._call(self.sandbox.upload(src, dest_rel))

    def download(self, rel: str) -> bytes:
        return self._call(self.sandbox.download(rel))

    def list_files(self, include_inputs: bool = False) -> list[str]:
        return self._call(self.sandbox.list_files(include_inputs))

    def restart(self, replay: bool = False) -> ExecResult | None:
        return self._call(self.sandbox.restart(replay))

    @property
    def workspace(self) -> Path | None:
        return self.sandbox.workspace

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._call(self.sandbox.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()
