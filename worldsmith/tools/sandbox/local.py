"""Sandbox sessions backed by the worker script: `local` (bubblewrap) and `process` (plain subprocess).

Inputs appear read-only at /data/<name> inside `local` sessions, and as `<name>` symlinks in the workspace
(-> /data/<name>, or -> the host path for `process`) so `pd.read_csv("sales.csv")` works from the cwd. The
links are removed on close; list_files() and files_changed leave them out. An input whose name is awkward to
type (spaces, `=`, quotes, unicode) is mounted a second time under its alias (`core.inputs.input_aliases`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

from worldsmith.tools.sandbox.base import ExecError, ExecResult, PathOutsideWorkspace, Sandbox, SandboxUnavailable
from worldsmith.tools.sandbox.client import WorkerDied, WorkerProcess, WorkerTimeout
from worldsmith.core.inputs import input_aliases
from worldsmith.core.sandbox_config import Mode, SandboxConfig
from worldsmith.tools.sandbox.launch import Launcher
from worldsmith.tools.sandbox.workspace import (changed, link_inputs, list_regular, read_beneath, scan, split_rel,
                                                total_bytes, unlink_beneath, unlink_inputs, write_beneath)


class WorkerSandbox(Sandbox):
    def __init__(self, config: SandboxConfig, launcher: Launcher, workspace: Path | None = None,
                 inputs: list[Path] | None = None, mode: Mode | None = None) -> None:
        super().__init__(config, mode)
        self.launcher = launcher
        self.isolated = launcher.isolated
        self._own_workspace = workspace is None
        self._workspace = Path(workspace).resolve() if workspace is not None else None
        named = _name_inputs(inputs or [])
        aliases = input_aliases(list(named))
        self._aliases = set(aliases.values())
        # an alias is one more mount of the same file: /data/<alias> and a workspace link, like its name
        self._inputs = {**named, **{alias: named[name] for name, alias in aliases.items()}}
        self._links: dict[str, str] = {}
        self._worker: WorkerProcess | None = None
        self._spare: asyncio.Task[WorkerProcess] | None = None
        self.ready_info: dict[str, object] = {}
        # stdout, stderr and traceback are each cut to max_output_chars; JSON escaping takes <= 6 bytes a char
        self._max_frame = 32 * config.max_output_chars + (1 << 20)

    @property
    def workspace(self) -> Path | None:
        return self._workspace

    # ---- lifecycle -------------------------------------------------------------------------------------
    async def _start(self, eager: bool) -> None:
        if self._workspace is None:
            self._workspace = Path(tempfile.mkdtemp(prefix="worldsmith-ws-"))
        elif not self._workspace.is_dir():
            raise FileNotFoundError(f"sandbox workspace {self._workspace} is not a directory; create it first")
        try:
            await asyncio.to_thread(self.launcher.prepare, self._workspace, self._inputs)
            targets = {name: self.launcher.link_target(name) for name in self._inputs}
            link_inputs(self._workspace, targets)
            self._links = targets
            if eager:
                await self._spawn()
        except BaseException:
            await self._close()
            raise

    async def _new_worker(self) -> WorkerProcess:
        worker = WorkerProcess(self.launcher.spec(), self._max_frame)
        try:
            await worker.start(self.config.start_timeout_s)
        except (WorkerDied, WorkerTimeout) as exc:
            text = worker.stderr_text()
            if self.launcher.isolated and "bwrap" in text:
                from worldsmith.tools.sandbox.bwrap import FIX_HINT

                raise SandboxUnavailable(f"bubblewrap could not start a sandbox: {text.strip()}\n{FIX_HINT}") from exc
            raise SandboxUnavailable(f"the sandbox worker did not start: {exc}") from exc
        except BaseException:  # cancelled (a spare dropped at close): leave no process behind
            await worker.kill()
            raise
        return worker

    async def _spawn(self) -> WorkerProcess:
        worker = await self._take_spare() or await self._new_worker()
        self._worker, self.ready_info = worker, worker.info
        return worker

    async def _take_spare(self) -> WorkerProcess | None:
        task, self._spare = self._spare, None
        if task is None:
            return None
        try:
            worker = await task
        except (SandboxUnavailable, asyncio.CancelledError):
            return None
        if worker.alive:
            return worker
        await worker.kill()
        return None

    async def _kill(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            await worker.kill()

    async def _restart(self) -> None:
        await self._kill()
        await self._spawn()

    async def _recover(self) -> None:
        """After a kill or crash: persistent sessions come back at once; replay sessions start on demand."""
        await self._kill()
        if self.mode == "persistent":
            await self._spawn()

    async def _release(self) -> None:
        """Replay mode: drop the used interpreter and (optionally) start the next one in the background."""
        await self._kill()
        if self.config.replay_prespawn and self._state == "open" and self._spare is None:
            self._spare = asyncio.create_task(self._new_worker())

    async def _drop_spare(self) -> None:
        task, self._spare = self._spare, None
        if task is None:
            return
        if not task.done():
            task.cancel()
        with contextlib.suppress(BaseException):
            worker = await task
            await worker.kill()

    async def _close(self) -> None:
        await self._drop_spare()
        await self._kill()
        if self._workspace is not None:
            unlink_inputs(self._workspace, self._links)
        self._links = {}
        await asyncio.to_thread(self.launcher.teardown)
        if self._own_workspace and self._workspace is not None:
            shutil.rmtree(self._workspace, ignore_errors=True)

    # ---- cells -----------------------------------------------------------------------------------------
    def _scan(self) -> dict[str, tuple[int, int]]:
        """Regular files of the workspace (links and other special files are never reported or served)."""
        assert self._workspace is not None
        return scan(self._workspace, frozenset(self._links), self.config.max_scan_entries, self.launcher.owner(),
                    regular_only=True)

    def _budget_bytes(self) -> int:
        return self.config.max_workspace_mb * 1024 * 1024

    async def _watch_disk(self, worker: WorkerProcess, over: list[int]) -> None:
        """Kill the running cell once the workspace outgrows its budget (RLIMIT_FSIZE caps each file; this caps
        their sum). The overshoot is bounded by what one cell writes in `disk_poll_s`."""
        assert self._workspace is not None
        while True:
            await asyncio.sleep(self.config.disk_poll_s)
            used = total_bytes(await asyncio.to_thread(scan, self._workspace, frozenset(self._links),
                                                       self.config.max_scan_entries, None, True))
            if used > self._budget_bytes():
                over.append(used)
                worker.abort()
                return

    async def _exec(self, code: str, timeout: float, silent: bool, scan: bool = True) -> ExecResult:
        worker = self._worker if self._worker is not None and self._worker.alive else await self._spawn()
        before = self._scan() if scan else {}
        over: list[int] = []
        watch = asyncio.create_task(self._watch_disk(worker, over)) if scan else None
        start = time.perf_counter()
        try:
            reply = await worker.request({"op": "exec", "code": code, "timeout": timeout, "silent": silent},
                                         timeout + self.config.kill_grace_s)
        except WorkerTimeout:
            result = ExecResult(timed_out=True, restarted=True, duration_s=time.perf_counter() - start,
                                error=ExecError(type="TimeoutError", message=f"cell ran past {timeout:.1f} s and "
                                                "ignored the interrupt; the session was killed and restarted"))
            await self._recover()
        except WorkerDied as exc:
            result = ExecResult(crashed=True, restarted=True, duration_s=time.perf_counter() - start,
                                error=ExecError(type="WorkerCrashed", message=f"the interpreter died: {exc}"))
            await self._recover()
        else:
            result = _parse_reply(reply)
        finally:
            if watch is not None:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch
        if scan:
            after = self._scan()
            result.files_changed = changed(before, after)
            if over or total_bytes(after) > self._budget_bytes():
                result = await self._over_budget(result, before, after, over)
        if self._worker is not None and self._worker.alive and self._exhausted(self._worker):
            result = await self._restart_exhausted(result)
        return result

    async def _over_budget(self, result: ExecResult, before: dict[str, tuple[int, int]],
                           after: dict[str, tuple[int, int]], over: list[int]) -> ExecResult:
        """The cell outgrew the workspace budget: remove the files it wrote, and say so."""
        assert self._workspace is not None
        written = changed(before, after)
        for rel in written:
            with contextlib.suppress(OSError, PathOutsideWorkspace):
                unlink_beneath(self._workspace, rel)
        used = over[0] if over else total_bytes(after)
        if self._worker is None or not self._worker.alive:
            await self._recover()
        return result.model_copy(update={
            "error": ExecError(type="DiskBudgetExceeded", message=(
                f"the workspace grew to {used / 2**20:.0f} MiB, past its {self.config.max_workspace_mb} MiB budget "
                f"(sandbox.max_workspace_mb); the {len(written)} file(s) this cell wrote were removed")),
            "crashed": result.crashed, "restarted": result.restarted or bool(over), "files_changed": []})

    def _exhausted(self, worker: WorkerProcess) -> bool:
        """True when the session holds (nearly) all the tasks its process limit allows: every later cell would fail
        to start a thread or a process, so the worker must be replaced."""
        return worker.tree_tasks() >= self.config.max_processes - 2

    async def _restart_exhausted(self, result: ExecResult) -> ExecResult:
        await self._kill()
        await self._spawn()
        note = (f"the cell left {self.config.max_processes} threads/processes running (sandbox.max_processes), so "
                "no new thread or process could start; the session was restarted and its variables are gone")
        error = result.error or ExecError(type="ResourceExhausted", message=note)
        if result.error is not None:
            error = result.error.model_copy(update={"message": f"{result.error.message} ({note})"})
        return result.model_copy(update={"error": error, "restarted": True})

    # ---- files -----------------------------------------------------------------------------------------
    def _ws(self) -> Path:
        self._check_open()
        assert self._workspace is not None
        return self._workspace

    async def upload(self, src: Path | str | bytes, dest_rel: str) -> None:
        root = self._ws()
        if split_rel(dest_rel)[0] in self._links:
            raise PathOutsideWorkspace(f"{dest_rel!r} is inside the read-only input {split_rel(dest_rel)[0]!r}")
        data = src if isinstance(src, bytes) else await asyncio.to_thread(Path(src).read_bytes)
        used = total_bytes(await asyncio.to_thread(self._scan))
        if used + len(data) > self._budget_bytes():
            raise ValueError(f"uploading {dest_rel!r} ({len(data)} bytes) would put the workspace past its "
                             f"{self.config.max_workspace_mb} MiB budget (sandbox.max_workspace_mb)")
        await asyncio.to_thread(write_beneath, root, dest_rel, data, self.launcher.owner())

    async def download(self, rel: str) -> bytes:
        root = self._ws()
        parts = split_rel(rel)
        if parts[0] in self._inputs:  # inputs are trusted host data, read from their real location
            src = self._inputs[parts[0]]
            if len(parts) == 1:
                return await asyncio.to_thread(read_beneath, src.parent, src.name)
            return await asyncio.to_thread(read_beneath, src, "/".join(parts[1:]))
        return await asyncio.to_thread(read_beneath, root, rel)

    async def list_files(self, include_inputs: bool = False) -> list[str]:
        root = self._ws()
        files = list_regular(root, frozenset(self._links), self.config.max_scan_entries)
        if include_inputs:
            for name, src in self._inputs.items():
                if name in self._aliases:
                    continue
                files += [name] if src.is_file() else [f"{name}/{r}" for r in list_regular(src)]
        return sorted(files)

    async def memory_rss(self) -> int:
        """Resident memory of this session's process tree (bytes); 0 when no worker runs."""
        return self._worker.tree_rss() if self._worker is not None else 0


def _parse_reply(reply: dict[str, object]) -> ExecResult:
    if reply.get("op") != "result":
        return ExecResult(crashed=True, error=ExecError(type="ProtocolError", message=f"unexpected reply {reply}"))
    err = reply.get("error")
    try:
        return ExecResult(stdout=str(reply.get("stdout", "")), stderr=str(reply.get("stderr", "")),
                          error=ExecError.model_validate(err) if err else None,
                          duration_s=float(reply.get("duration_s", 0.0)),  # type: ignore[arg-type]
                          truncated=bool(reply.get("truncated")), timed_out=bool(reply.get("timed_out")))
    except (TypeError, ValueError) as exc:
        return ExecResult(crashed=True, error=ExecError(type="ProtocolError", message=f"malformed reply: {exc}"))


def _name_inputs(inputs: list[Path]) -> dict[str, Path]:
    named: dict[str, Path] = {}
    for item in inputs:
        path = Path(item).absolute()
        if not path.exists():
            raise FileNotFoundError(f"sandbox input {path} does not exist")
        name = path.name
        if name in named or name.startswith(".") or os.sep in name:
            raise ValueError(f"input name {name!r} (from {path}) is duplicated or hidden; inputs are mounted by "
                             "their base name, so give each a distinct, visible name")
        named[name] = path
    return named
