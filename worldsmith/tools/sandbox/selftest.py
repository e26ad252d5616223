"""Attacks a sandbox must contain, runnable as `worldsmith sandbox selftest` and reused by tests/sandbox.

Each attack runs in a fresh session with the pre-check off (the isolation itself is under test), asserts
containment from the host side where it can (files, sockets, ownership, other sessions), and then checks that
the next cell in that (possibly restarted) session works.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from worldsmith.tools.sandbox.attacks import ATTACKS, INJECTION, SECRET_ENV, Ctx
from worldsmith.tools.sandbox.base import Sandbox
from worldsmith.core.sandbox_config import SandboxConfig

__all__ = ["ATTACKS", "AttackResult", "format_results", "run_selftest", "selftest_async", "selftest_main"]


class AttackResult(BaseModel):
    name: str
    contained: bool
    detail: str
    next_cell_ok: bool
    duration_s: float


def _prepare(root: Path) -> None:
    for d in (root / "outside", root / "data"):
        d.mkdir(parents=True, exist_ok=True)
        d.chmod(0o755)
    root.chmod(0o755)


def _listen(ctx: Ctx, stop: threading.Event) -> threading.Thread:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    ctx.port = srv.getsockname()[1]

    def loop() -> None:
        with srv:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError, OSError):
                    conn, _ = srv.accept()
                    ctx.connections += 1
                    conn.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


async def selftest_async(config: SandboxConfig, names: list[str] | None = None) -> list[AttackResult]:
    """Run the attacks (default: all) against `config.backend`; refuses backends that do not isolate."""
    from worldsmith.tools.sandbox import open_sandbox

    if config.backend == "process":
        raise ValueError("the 'process' backend does not isolate; the self-test would attack this host itself")
    cfg = config.model_copy(update={"precheck": False, "mode": "persistent", "timeout_s": 10.0,
                                    "max_file_size_mb": min(config.max_file_size_mb, 64),
                                    "max_workspace_mb": min(config.max_workspace_mb, 96)})
    unknown = set(names or []) - set(ATTACKS)
    if unknown:
        raise ValueError(f"unknown attack(s) {sorted(unknown)}; known: {sorted(ATTACKS)}")
    results = []
    with tempfile.TemporaryDirectory(prefix="worldsmith-selftest-") as tmp:
        ctx = Ctx(root=Path(tmp), config=cfg)
        _prepare(ctx.root)
        (ctx.outside / "secret.txt").write_text(f"host secret {ctx.token}\n")
        (ctx.data / "notes.csv").write_text(f'id,note\n1,"{INJECTION}"\n')
        stop = threading.Event()
        _listen(ctx, stop)
        saved = os.environ.get(SECRET_ENV)
        os.environ[SECRET_ENV] = ctx.token
        try:
            async with open_sandbox(cfg) as bystander:
                ctx.bystander = bystander
                for name in names or list(ATTACKS):
                    results.append(await _one(ctx, name, open_sandbox))
        finally:
            stop.set()
            if saved is None:
                os.environ.pop(SECRET_ENV, None)
            else:
                os.environ[SECRET_ENV] = saved
    return results


async def _one(ctx: Ctx, name: str, opener: Callable[..., Sandbox]) -> AttackResult:
    ws = Path(tempfile.mkdtemp(prefix=f"ws-{name}-", dir=ctx.root))
    start = time.perf_counter()
    ctx.sb = opener(ctx.config, workspace=ws, inputs=[ctx.data])
    try:
        await ctx.sb.start()
        try:
            contained, detail = await ATTACKS[name](ctx)
        except Exception as exc:  # an attack that breaks the harness is a failure to contain, not a crash
            contained, detail = False, f"harness error {type(exc).__name__}: {exc}"
        if ctx.sb is None:  # the attack closed its session on purpose: check a fresh one instead
            ctx.sb = opener(ctx.config, workspace=ws, inputs=[ctx.data])
            await ctx.sb.start()
        after = await ctx.sb.run("print(6 * 7)")
        next_ok = "42" in after.stdout
    finally:
        if ctx.sb is not None:
            await ctx.sb.close()
        ctx.sb = None
    return AttackResult(name=name, contained=contained and next_ok, detail=detail, next_cell_ok=next_ok,
                        duration_s=time.perf_counter() - start)


def run_selftest(config: SandboxConfig, names: list[str] | None = None) -> list[AttackResult]:
    """Blocking wrapper for the CLI: `worldsmith sandbox selftest`."""
    return asyncio.run(selftest_async(config, names))


def format_results(results: list[AttackResult]) -> str:
    width = max((len(r.name) for r in results), default=10)
    lines = [f"{'attack':<{width}}  result     time   detail"]
    for r in results:
        lines.append(f"{r.name:<{width}}  {'contained' if r.contained else 'ESCAPED  '}  {r.duration_s:5.1f}s  "
                     f"{r.detail}")
    lines.append(f"{sum(r.contained for r in results)}/{len(results)} contained")
    return "\n".join(lines)


def selftest_main(config: SandboxConfig, names: list[str] | None = None, as_json: bool = False) -> int:
    """Entry point for `worldsmith sandbox selftest [--json]`: prints the table (or JSON); exit code 0/1."""
    import json

    results = run_selftest(config, names)
    if as_json:
        print(json.dumps([r.model_dump() for r in results], indent=2))
    else:
        print(format_results(results))
    return 0 if results and all(r.contained for r in results) else 1
