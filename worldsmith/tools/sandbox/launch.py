"""What the `local` and `process` backends share: worker settings, environment, interpreter discovery,
the matplotlib font-cache seed, and the `process` launcher (plain subprocess, no isolation)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from worldsmith.tools.sandbox.client import LaunchSpec
from worldsmith.core.sandbox_config import SandboxConfig

log = logging.getLogger(__name__)
WORKER_FILE = Path(__file__).with_name("worker.py")
MiB = 1024 * 1024


def worker_settings(config: SandboxConfig, **extra: Any) -> dict[str, Any]:
    """The JSON the worker reads from WS_WORKER."""
    return {
        "memory_bytes": config.memory_mb * MiB, "max_processes": config.max_processes,
        "max_open_files": config.max_open_files, "max_file_bytes": config.max_file_size_mb * MiB,
        "cpu_seconds": config.cpu_seconds, "max_output_chars": config.max_output_chars,
        "preload": list(config.preload), "echo_last_expr": config.echo_last_expr,
        "save_figures": config.save_figures, "figure_dpi": config.figure_dpi, **extra,
    }


def base_env(config: SandboxConfig, python: Path, tmp: str, mplconfig: str) -> dict[str, str]:
    """A minimal environment built from scratch: nothing of the host's (API keys!) passes through."""
    threads = str(config.threads)
    env = {
        "PATH": f"{python.parent}:/usr/local/bin:/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8",
        "USER": "sandbox", "LOGNAME": "sandbox", "MPLBACKEND": "Agg", "MPLCONFIGDIR": mplconfig,
        "OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
        "NUMEXPR_MAX_THREADS": threads, "PYTHONIOENCODING": "utf-8",
    }
    env.update(config.env)
    return env


def interpreter(config: SandboxConfig) -> Path:
    python = Path(config.python) if config.python else Path(sys.executable)
    if not python.exists():
        raise FileNotFoundError(f"sandbox.python {python} does not exist; set it to an interpreter path or leave "
                                "it empty to use the current one")
    return python.absolute()


@lru_cache(maxsize=8)
def interpreter_prefixes(python: Path) -> tuple[str, ...]:
    """Directories the interpreter needs (venv prefix, base prefix); resolved at run time, never hard-coded."""
    if python == Path(sys.executable).absolute():
        found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    else:
        out = subprocess.run([str(python), "-I", "-c", "import sys, json; print(json.dumps([sys.prefix, "
                              "sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]))"],
                             capture_output=True, text=True, timeout=60, check=True)
        found = json.loads(out.stdout)
    real = os.path.realpath(python)
    found.append(str(Path(real).parent.parent))
    unique: list[str] = []
    for path in sorted({os.path.realpath(p) for p in found} | {os.path.abspath(p) for p in found}, key=len):
        if not any(path == u or path.startswith(u + "/") for u in unique):
            unique.append(path)
    return tuple(unique)


def font_cache_seed(config: SandboxConfig, python: Path) -> Path | None:
    """Build matplotlib's font list once per host so workers copy it instead of rebuilding it (~1 s each)."""
    seed = config.cache_path() / "mpl"
    if any(seed.glob("fontlist*.json")):
        return seed
    try:
        seed.mkdir(parents=True, exist_ok=True)
        with open(seed.parent / "mpl.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not any(seed.glob("fontlist*.json")):
                subprocess.run([str(python), "-I", "-c", "import matplotlib.font_manager"], env={
                    "MPLCONFIGDIR": str(seed), "MPLBACKEND": "Agg", "PATH": os.environ.get("PATH", "")},
                    capture_output=True, timeout=300, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("no matplotlib font-cache seed (%s); plots will build it per session", exc)
        return None
    return seed if any(seed.glob("fontlist*.json")) else None


class Launcher:
    """Per-session preparation and per-worker launch specs. Subclasses: ProcessLauncher, BwrapLauncher."""

    name = "base"
    isolated = False
    pidns = False

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.python = interpreter(config)
        self.workspace: Path | None = None
        self.inputs: dict[str, Path] = {}
        self.seed: Path | None = None

    def prepare(self, workspace: Path, inputs: dict[str, Path]) -> None:
        self.workspace, self.inputs = workspace, inputs
        self.seed = font_cache_seed(self.config, self.python)

    def link_target(self, name: str) -> str:
        """What `workspace/<name>` points at so a cell can open an input by its bare name."""
        raise NotImplementedError

    def owner(self) -> tuple[int, int] | None:
        """uid/gid workspace entries must have for the sandbox to write them (None = leave as is)."""
        return None

    def spec(self) -> LaunchSpec:
        raise NotImplementedError

    def teardown(self) -> None:
        """Undo `prepare` (ownership, leases)."""


class ProcessLauncher(Launcher):
    """Plain subprocess + rlimits. It does NOT isolate: the code can read the host's files, use the network and
    signal the host's processes. For hosts without user namespaces, and for trusted code only."""

    name = "process"

    def prepare(self, workspace: Path, inputs: dict[str, Path]) -> None:
        super().prepare(workspace, inputs)
        log.warning("sandbox backend 'process' does NOT isolate: model-written code runs with this user's rights, "
                    "network and files. Use backend='local' (bubblewrap) for untrusted code.")
        self._tmp = Path(tempfile.mkdtemp(prefix="worldsmith-proc-"))

    def link_target(self, name: str) -> str:
        return str(self.inputs[name].absolute())

    def spec(self) -> LaunchSpec:
        assert self.workspace is not None
        tmp = str(self._tmp)
        env = base_env(self.config, self.python, tmp, os.path.join(tmp, ".mpl"))
        settings = worker_settings(self.config, pdeathsig=True, pidns=False,
                                   mpl_seed=str(self.seed) if self.seed else None)
        env["WS_WORKER"] = json.dumps(settings)
        return LaunchSpec(argv=[str(self.python), "-I", "-B", str(WORKER_FILE)], env=env, cwd=self.workspace,
                          kill_tree=True)

    def teardown(self) -> None:
        with contextlib.suppress(AttributeError):
            shutil.rmtree(self._tmp, ignore_errors=True)
