"""Sandbox fixtures: fast configs (no pandas preload) for the local (bubblewrap) and process backends."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from worldsmith.tools.sandbox import SandboxConfig

HAVE_BWRAP = shutil.which("bwrap") is not None
needs_bwrap = pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap is not installed (apt-get install -y bubblewrap)")


def fast_config(backend: str = "local", **kw: object) -> SandboxConfig:
    return SandboxConfig(backend=backend, preload=[], timeout_s=10, kill_grace_s=1.0, **kw)  # type: ignore[arg-type]


@pytest.fixture(params=[pytest.param("local", marks=needs_bwrap), "process"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "inputs"
    d.mkdir()
    d.chmod(0o755)
    (d / "sales.csv").write_text("region,amount\nnorth,10\nsouth,5\nnorth,7\n")
    return d
