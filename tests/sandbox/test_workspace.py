"""Host-side workspace operations must never follow links planted by a cell, even when they race the host."""

from __future__ import annotations

import os
import stat as stat_module
import types
from pathlib import Path

import pytest

from worldsmith.tools.sandbox import PathOutsideWorkspace
from worldsmith.tools.sandbox import workspace as ws


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "d").mkdir(parents=True)
    (root / "d" / "inner.txt").write_text("in")
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    return root, outside


def test_scan_does_not_follow_a_directory_swapped_for_a_symlink(layout: tuple[Path, Path],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    root, outside = layout
    swapped = []

    def racing_isdir(mode: int) -> bool:  # the cell swaps `d` right after the host stat()ed it as a directory
        result = stat_module.S_ISDIR(mode)
        if result and not swapped:
            os.rename(root / "d", root / "real")
            os.symlink(outside, root / "d")
            swapped.append(True)
        return result

    monkeypatch.setattr(ws, "stat", types.SimpleNamespace(S_ISDIR=racing_isdir, S_ISREG=stat_module.S_ISREG))
    snap = ws.scan(root)
    assert swapped and not any("secret" in rel for rel in snap), snap


def test_read_beneath_refuses_links_anywhere_in_the_path(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    os.symlink(outside, root / "link_dir")
    os.symlink(outside / "secret.txt", root / "link_file")
    os.symlink("/", root / "d" / "rootlink")
    for rel in ("link_dir/secret.txt", "link_file", "d/rootlink/etc/passwd"):
        with pytest.raises(PathOutsideWorkspace):
            ws.read_beneath(root, rel)
    assert ws.read_beneath(root, "d/inner.txt") == b"in"


def test_write_beneath_is_atomic_and_refuses_link_parents(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    os.symlink(outside, root / "link_dir")
    with pytest.raises(PathOutsideWorkspace):
        ws.write_beneath(root, "link_dir/new.txt", b"x")
    assert not (outside / "new.txt").exists()
    ws.write_beneath(root, "a/b/c.txt", b"data")
    assert (root / "a" / "b" / "c.txt").read_bytes() == b"data"
    assert not [p for p in (root / "a" / "b").iterdir() if p.name.endswith(".tmp")]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_chown_tree_never_follows_links(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    os.symlink(outside / "secret.txt", root / "link_file")
    os.symlink(outside, root / "link_dir")
    before = (outside / "secret.txt").stat()
    ws.chown_tree(root, 4_000_123, 4_000_123)
    assert (root / "d" / "inner.txt").stat().st_uid == 4_000_123
    assert os.lstat(root / "link_file").st_uid == 4_000_123
    after = (outside / "secret.txt").stat()
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    assert outside.stat().st_uid == before.st_uid


def test_changed_reports_new_and_modified_files(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    before = ws.scan(root)
    (root / "new.txt").write_text("n")
    (root / "d" / "inner.txt").write_text("changed size")
    assert ws.changed(before, ws.scan(root)) == ["d/inner.txt", "new.txt"]
