"""Sandbox configuration: one pydantic model, every knob with a default, a description and a unit.

The global settings carry it as `settings.sandbox`; `open_sandbox(config, ...)` takes it directly. It is a core
contract (the settings are assembled in core, which imports nothing from tools).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

Backend = Literal["local", "process", "e2b"]
Mode = Literal["persistent", "replay"]

# Host paths the `local` backend binds read-only (when they exist) so the interpreter can load its
# shared libraries. Symlinks among them (merged /usr) are recreated as symlinks inside.
DEFAULT_SYSTEM_RO_PATHS = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/mime.types",
]


class SandboxConfig(BaseModel):
    """How model-written code is executed. Limits apply per session (one worker process) unless noted."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    backend: Backend = Field("local", description="'local' = bubblewrap namespaces + rlimits (isolating); "
                             "'process' = plain subprocess + rlimits (NOT isolation); 'e2b' = remote E2B sandbox")
    mode: Mode = Field("persistent", description="'persistent' keeps Python state in one worker; 'replay' runs each "
                       "cell in a fresh process after silently re-running the previous successful cells")
    replay_prespawn: bool = Field(True, description="replay mode: start the next fresh interpreter in the "
                                  "background after each cell, hiding the cold start behind the agent's turn "
                                  "(costs one idle interpreter per session)")
    timeout_s: float = Field(30.0, gt=0, description="default wall-clock limit per cell (seconds)")
    kill_grace_s: float = Field(2.0, ge=0, description="after a cell's timeout the worker is interrupted; if it does "
                                "not answer within this grace the session is killed and restarted (seconds)")
    start_timeout_s: float = Field(60.0, gt=0, description="limit for a worker to start and pre-import (seconds)")
    memory_mb: int = Field(2048, ge=128, description="address-space limit (RLIMIT_AS) of the worker (MiB)")
    cpu_seconds: int = Field(300, ge=1, description="CPU time one cell may use before SIGXCPU interrupts it (seconds)")
    max_processes: int = Field(64, ge=4, description="tasks (processes + threads) the sandbox may hold at once "
                               "(RLIMIT_NPROC, counted per session: see bwrap.py) (count)")
    max_open_files: int = Field(256, ge=32, description="open file descriptors per process (RLIMIT_NOFILE) (count)")
    max_file_size_mb: int = Field(512, ge=1, description="largest file a cell may write (RLIMIT_FSIZE) (MiB)")
    max_workspace_mb: int = Field(2048, ge=1, description="total size of the files in a session's workspace (inputs "
                                  "excluded); a cell that grows it past this is stopped and the files it wrote are "
                                  "removed (MiB)")
    disk_poll_s: float = Field(0.25, gt=0, description="how often a running cell's workspace size is checked "
                               "against max_workspace_mb (seconds)")
    tmp_size_mb: int = Field(256, ge=8, description="size of the private in-memory /tmp of a local session (MiB)")
    max_output_chars: int = Field(20_000, ge=200, description="stdout and stderr kept per cell, each; longer output "
                                  "keeps its head and tail around a '... [truncated N chars] ...' marker (chars)")
    threads: int = Field(1, ge=1, le=64, description="BLAS/OpenMP threads inside a worker (threads)")
    preload: list[str] = Field(default_factory=lambda: ["numpy", "pandas"],
                               description="modules imported before the session reports ready (module names)")
    echo_last_expr: bool = Field(True, description="print the repr of a cell's last bare expression, like a notebook")
    save_figures: bool = Field(True, description="save open matplotlib figures (and plt.show()) as PNG in the workspace")
    figure_dpi: int = Field(100, ge=20, le=600, description="resolution of saved figures (dots per inch)")
    precheck: bool = Field(True, description="refuse cells with obvious escape attempts before running them "
                           "(static AST scan; a second line of defence, never the only one)")
    allowed_write_roots: list[str] = Field(default_factory=lambda: ["/workspace", "/tmp"],
                                           description="absolute paths the pre-check lets open(..., 'w') target (paths)")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables set inside the "
                                "sandbox; the host environment is never passed through (never put secrets here)")
    extra_ro_binds: list[Path] = Field(default_factory=list, description="more host paths bound read-only at the "
                                       "same path inside a local sandbox (paths)")
    system_ro_paths: list[str] = Field(default_factory=lambda: list(DEFAULT_SYSTEM_RO_PATHS),
                                       description="system paths bound read-only inside a local sandbox (paths)")
    bwrap: str = Field("bwrap", description="bubblewrap executable: a name looked up on PATH, or a path")
    python: Path | None = Field(None, description="interpreter that runs the worker; None = the current one "
                                "(its prefix and base prefix are bound read-only)")
    sandbox_uid_base: int = Field(3_000_000, ge=1000, description="when the host runs as root, each local session "
                                  "runs as its own uid base+slot so the process limit counts only its processes (uid)")
    uid_pool_size: int = Field(4096, ge=1, description="distinct uids available for concurrent root-host sessions")
    cache_dir: Path | None = Field(None, description="host cache for the sandbox (matplotlib font list seed); "
                                   "None = $XDG_CACHE_HOME/worldsmith/sandbox (path)")
    max_scan_entries: int = Field(20_000, ge=100, description="workspace entries examined per cell to report "
                                  "changed files; beyond it the list is cut short (count)")
    e2b_api_key: SecretStr | None = Field(None, description="E2B API key (or set E2B_API_KEY in the environment)")
    e2b_template: str | None = Field(None, description="E2B sandbox template; None = the SDK's code-interpreter default")
    e2b_lifetime_s: int = Field(900, ge=30, description="how long an idle E2B sandbox lives before E2B kills it (s)")
    e2b_workdir: str = Field("/home/user", description="working directory of cells in an E2B sandbox (remote path)")

    def cache_path(self) -> Path:
        """Where host-side sandbox caches live (resolved from `cache_dir` or XDG_CACHE_HOME)."""
        import os

        if self.cache_dir is not None:
            return self.cache_dir
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "worldsmith" / "sandbox"
