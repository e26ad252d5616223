"""`e2b` backend: the same Sandbox interface on a remote E2B code-interpreter sandbox (needs network + API key).

The SDK (`e2b-code-interpreter`) is imported only when this backend is used; tests inject a fake with the same
surface: `await Cls.create(template=, timeout=, envs=, api_key=)`, `await sbx.run_code(code, context=, timeout=)`
returning an Execution (logs.stdout/stderr lists, results with .text/.png/.is_main_result, error with
name/value/traceback), `create_code_context(cwd=)`, `restart_code_context(ctx)`, `files.write/read/list` and
`kill()`. A host `workspace`, if given, is uploaded into `e2b_workdir` at start; inputs are uploaded next to it
as `<name>` and made read-only (best effort: the remote user owns them). `workspace` is None: files stay remote.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

from worldsmith.tools.sandbox.base import (ExecError, ExecResult, Sandbox, SandboxError, SandboxUnavailable,
                                           truncate_middle)
from worldsmith.core.inputs import input_mounts
from worldsmith.core.sandbox_config import Mode, SandboxConfig
from worldsmith.tools.sandbox.workspace import split_rel

Snapshot = dict[str, tuple[str, int]]


def _load_sdk() -> Any:
    try:
        from e2b_code_interpreter import AsyncSandbox
    except ImportError as exc:
        raise SandboxUnavailable("sandbox.backend='e2b' needs the e2b-code-interpreter package "
                                 "(pip install e2b-code-interpreter)") from exc
    return AsyncSandbox


class E2BSandbox(Sandbox):
    def __init__(self, config: SandboxConfig, workspace: Path | None = None, inputs: list[Path] | None = None,
                 mode: Mode | None = None, sdk: Any = None) -> None:
        super().__init__(config, mode)
        self._sdk = sdk
        self._local_ws = Path(workspace) if workspace is not None else None
        self._inputs = [Path(p) for p in inputs or []]
        self._mounts = input_mounts(self._inputs)  # awkward names are uploaded once more under their alias
        self._input_names = {name for name, _ in self._mounts}
        self._sbx: Any = None
        self._ctx: Any = None
        self._figures = 0
        self.workdir = config.e2b_workdir.rstrip("/") or "/"

    @property
    def workspace(self) -> Path | None:
        return None

    def _api_key(self) -> str:
        if self.config.e2b_api_key is not None:
            return self.config.e2b_api_key.get_secret_value()
        key = os.environ.get("E2B_API_KEY")
        if not key:
            raise SandboxUnavailable("sandbox.backend='e2b' needs an API key: set sandbox.e2b_api_key "
                                     "(WORLDSMITH_SANDBOX__E2B_API_KEY) or E2B_API_KEY")
        return key

    async def _start(self, eager: bool) -> None:
        sdk = self._sdk or _load_sdk()
        kwargs: dict[str, Any] = {"timeout": self.config.e2b_lifetime_s, "api_key": self._api_key()}
        if self.config.e2b_template:
            kwargs["template"] = self.config.e2b_template
        if self.config.env:
            kwargs["envs"] = dict(self.config.env)
        self._sbx = await sdk.create(**kwargs)
        try:
            if self._local_ws is not None:
                for path in sorted(p for p in self._local_ws.rglob("*") if p.is_file() and not p.is_symlink()):
                    await self._write(path.relative_to(self._local_ws).as_posix(), path.read_bytes())
            for name, src in self._mounts:
                files = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file())
                for path in files:
                    rel = name if path == src else f"{name}/{path.relative_to(src).as_posix()}"
                    await self._write(rel, path.read_bytes())
            self._ctx = await self._sbx.create_code_context(cwd=self.workdir)
            if self._inputs:
                names = sorted(self._input_names)
                await self._sbx.run_code(f"import os, stat\nfor _n in {names!r}:\n    for _r, _ds, _fs in "
                                         "os.walk(_n):\n        for _f in _fs:\n            os.chmod(os.path.join("
                                         "_r, _f), 0o444)\n    os.path.isfile(_n) and os.chmod(_n, 0o444)",
                                         context=self._ctx, timeout=60)
        except BaseException:
            await self._close()
            raise

    async def _write(self, rel: str, data: bytes) -> None:
        await self._sbx.files.write(f"{self.workdir}/{rel}", data)

    async def _snapshot(self, include_inputs: bool = False) -> Snapshot:
        entries = await self._sbx.files.list(self.workdir, depth=8)
        snap: Snapshot = {}
        prefix = self.workdir + "/"
        for e in entries:
            path = str(getattr(e, "path", ""))
            kind = str(getattr(e, "type", "")).lower()
            if not path.startswith(prefix) or "dir" in kind:
                continue
            rel = path[len(prefix):]
            if rel.split("/")[0] in self._input_names and not include_inputs:
                continue
            snap[rel] = (str(getattr(e, "modified_time", "")), int(getattr(e, "size", 0) or 0))
        return snap

    async def _exec(self, code: str, timeout: float, silent: bool, scan: bool = True) -> ExecResult:
        before = await self._snapshot() if scan else {}
        import time

        start = time.perf_counter()
        try:
            execution = await self._sbx.run_code(code, context=self._ctx, timeout=timeout)
        except Exception as exc:  # the SDK raises its TimeoutException for both execution and request timeouts
            if "timeout" not in type(exc).__name__.lower() and "timed out" not in str(exc).lower():
                raise SandboxError(f"E2B run_code failed: {type(exc).__name__}: {exc}") from exc
            await self._restart()
            return ExecResult(timed_out=True, restarted=True, duration_s=time.perf_counter() - start,
                              error=ExecError(type="TimeoutError", message=f"cell ran past {timeout:.1f} s; the "
                                              "remote interpreter was restarted"))
        duration = time.perf_counter() - start
        result = await self._convert(execution, silent, duration)
        if scan:
            after = await self._snapshot()
            result.files_changed = sorted(rel for rel, sig in after.items() if before.get(rel) != sig)
        return result

    async def _convert(self, execution: Any, silent: bool, duration: float) -> ExecResult:
        logs = execution.logs
        stdout, stderr = "".join(logs.stdout), "".join(logs.stderr)
        for res in execution.results:
            if getattr(res, "png", None) and self.config.save_figures and not silent:
                self._figures += 1
                await self._write(f"figure_{self._figures}.png", base64.b64decode(res.png))
            elif getattr(res, "is_main_result", False) and res.text and self.config.echo_last_expr:
                stdout += res.text + "\n"
        err = execution.error
        error = ExecError(type=err.name, message=err.value, traceback=err.traceback) if err else None
        limit = self.config.max_output_chars
        stdout, t1 = truncate_middle(stdout, limit)
        stderr, t2 = truncate_middle(stderr, limit)
        if silent:
            stdout, stderr = "", ""
        return ExecResult(stdout=stdout, stderr=stderr, error=error, duration_s=duration, truncated=t1 or t2)

    async def _restart(self) -> None:
        if self._ctx is not None:
            await self._sbx.restart_code_context(self._ctx)

    async def _close(self) -> None:
        sbx, self._sbx = self._sbx, None
        if sbx is not None:
            await sbx.kill()

    async def upload(self, src: Path | str | bytes, dest_rel: str) -> None:
        self._check_open()
        split_rel(dest_rel)
        await self._write(dest_rel, src if isinstance(src, bytes) else Path(src).read_bytes())

    async def download(self, rel: str) -> bytes:
        self._check_open()
        parts = split_rel(rel)
        data = await self._sbx.files.read(f"{self.workdir}/{'/'.join(parts)}", format="bytes")
        return bytes(data)

    async def list_files(self, include_inputs: bool = False) -> list[str]:
        self._check_open()
        return sorted(await self._snapshot(include_inputs))
