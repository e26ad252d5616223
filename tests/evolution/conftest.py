"""Fixtures for the workspace store, exploration graph and memory tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from worldsmith.evolution.workspace import WorkspaceStore


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    """Create ``files`` (relative path → content) under ``root``."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


@pytest.fixture
def store(tmp_path: Path) -> WorkspaceStore:
    return WorkspaceStore(tmp_path / "run" / "workspace")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "data", {"sales.csv": "region,revenue\nnorth,10\nsouth,20\n",
                                          "memos/q3.md": "# Q3\nSouth had a promotion.\n"})
