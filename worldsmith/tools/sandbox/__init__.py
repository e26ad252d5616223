"""Sandboxed execution of model-written Python: one interface, three backends (see DESIGN.md, "Sandbox").

    from worldsmith.tools.sandbox import SandboxConfig, open_sandbox

    async with open_sandbox(SandboxConfig(), workspace=ws, inputs=[Path("data/sales.csv")]) as sb:
        r = await sb.run("import pandas as pd\\ndf = pd.read_csv('sales.csv')\\ndf.shape")
        print(r.to_observation(2000))

Layout inside a `local` session: cwd = /workspace (the host `workspace`, writable); inputs read-only at
/data/<name> and linked as ./<name>; private /tmp; no network; nothing else of the host but system libraries
and the interpreter.
"""

from __future__ import annotations

from pathlib import Path

from worldsmith.tools.sandbox.base import (ExecError, ExecResult, PathOutsideWorkspace, Sandbox, SandboxClosed,
                                           SandboxError, SandboxUnavailable, SyncSandbox, truncate_middle)
from worldsmith.core.sandbox_config import Backend, Mode, SandboxConfig
from worldsmith.tools.sandbox.precheck import PrecheckReport, precheck
from worldsmith.tools.sandbox.pool import SandboxPool

__all__ = [
    "Backend", "ExecError", "ExecResult", "Mode", "PathOutsideWorkspace", "PrecheckReport", "Sandbox",
    "SandboxClosed", "SandboxConfig", "SandboxError", "SandboxPool", "SandboxUnavailable", "SyncSandbox", "open_sandbox",
    "precheck", "truncate_middle",
]


def open_sandbox(config: SandboxConfig | None = None, workspace: Path | None = None,
                 inputs: list[Path] | None = None, mode: Mode | None = None) -> Sandbox:
    """A not-yet-started session of `config.backend`; use it as `async with` (or SyncSandbox for scripts).

    workspace: host directory used as the cells' cwd (None = a temporary one, deleted on close).
    inputs: files/directories exposed read-only by base name (cwd and /data/<name>).
    mode: 'persistent' | 'replay' (None = config.mode).
    """
    config = config or SandboxConfig()
    if config.backend == "e2b":
        from worldsmith.tools.sandbox.e2b import E2BSandbox

        return E2BSandbox(config, workspace=workspace, inputs=inputs, mode=mode)
    from worldsmith.tools.sandbox.local import WorkerSandbox

    if config.backend == "local":
        from worldsmith.tools.sandbox.bwrap import BwrapLauncher

        return WorkerSandbox(config, BwrapLauncher(config), workspace, inputs, mode)
    if config.backend == "process":
        from worldsmith.tools.sandbox.launch import ProcessLauncher

        return WorkerSandbox(config, ProcessLauncher(config), workspace, inputs, mode)
    raise ValueError(f"sandbox.backend must be 'local', 'process' or 'e2b', got {config.backend!r}")
