"""Integrity before trust: a world that no longer matches its manifest is never audited, reused or given tasks."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from worldsmith.evolution.worlds import (WorldIntegrityError, audit_world, build_world, load_template, load_world,
                                         read_audit, require_intact_world, verify_manifest)

CONTRACT = load_template("education", rows=500)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small audited world, never modified: each test alters its own copy."""
    out = tmp_path_factory.mktemp("integrity") / "w"
    build_world(CONTRACT, 1, out)
    return out


@pytest.fixture
def world(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "w"
    shutil.copytree(built, copy)
    return copy


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_intact_world_passes_and_its_audit_keeps_the_manifest(world: Path) -> None:
    manifest = (world / "manifest.json").read_bytes()
    assert verify_manifest(world) == [] and load_world(world).verify() == []
    assert require_intact_world(world).seed == 1
    audit_world(world)
    assert (world / "manifest.json").read_bytes() == manifest  # an identical re-audit changes nothing
    # files beside the world (a report, a task collection) are not part of it
    (world / "REPORT.md").write_text("# report\n")
    (world / "tasks").mkdir()
    (world / "tasks" / "index.json").write_text("{}")
    assert verify_manifest(world) == []


def test_a_truncated_data_file_is_refused_by_the_audit(world: Path) -> None:
    target = world / "data" / "sis.csv"
    expected = json.loads((world / "manifest.json").read_text())["files"]["data/sis.csv"]
    target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
    audit_before = (world / "AUDIT.json").read_bytes()

    [problem] = verify_manifest(world)
    assert (problem.path, problem.kind, problem.expected) == ("data/sis.csv", "modified", expected)
    assert problem.actual == _sha(target) and problem.size == target.stat().st_size
    with pytest.raises(WorldIntegrityError) as err:
        audit_world(world)
    message = str(err.value)
    assert "data/sis.csv modified" in message and expected[:12] in message
    assert "world new" in message and "--overwrite" in message and "restore" in message
    assert (world / "AUDIT.json").read_bytes() == audit_before  # nothing was audited or written


def test_same_size_different_bytes_is_refused(world: Path) -> None:
    target = world / "data" / "school_register.json"
    raw = bytearray(target.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    target.write_bytes(bytes(raw))
    [problem] = verify_manifest(world)
    assert problem.path == "data/school_register.json" and problem.kind == "modified"
    assert problem.size == len(raw)
    with pytest.raises(WorldIntegrityError, match="school_register.json"):
        require_intact_world(world)


def test_a_world_without_its_manifest_is_refused(world: Path) -> None:
    (world / "manifest.json").unlink()
    assert [(p.path, p.kind) for p in verify_manifest(world)] == [("manifest.json", "no_manifest")]
    with pytest.raises(WorldIntegrityError, match="manifest.json missing"):
        audit_world(world)


def test_missing_added_and_truth_files_are_named(world: Path) -> None:
    (world / "data" / "memos" / "exam_board.md").unlink()
    (world / "data" / "extra.csv").write_text("a,b\n1,2\n")
    (world / ".truth" / "ledger.json").write_text("{}")
    found = {p.path: p.kind for p in verify_manifest(world)}
    assert found == {"data/memos/exam_board.md": "missing", "data/extra.csv": "unlisted",
                     ".truth/ledger.json": "modified"}
    with pytest.raises(WorldIntegrityError, match=r"\(3 problem\(s\)\)"):
        require_intact_world(world)


def test_an_incomplete_or_unreadable_manifest_is_refused(world: Path) -> None:
    data = json.loads((world / "manifest.json").read_text())
    (world / "manifest.json").write_text(json.dumps({**data, "complete": False}))
    assert [p.kind for p in verify_manifest(world)] == ["incomplete"]
    (world / "manifest.json").write_text(json.dumps(data)[:40])
    assert [p.kind for p in verify_manifest(world)] == ["bad_manifest"]


def test_a_newer_auditor_rewriting_its_own_files_keeps_the_world_intact(world: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from worldsmith.evolution.worlds import worldmd

    monkeypatch.setattr(worldmd, "world_markdown", lambda *a: "# WORLD, as a newer auditor writes it\n")
    audit_world(world)
    files = json.loads((world / "manifest.json").read_text())["files"]
    assert files["WORLD.md"] == _sha(world / "WORLD.md")
    assert verify_manifest(world) == []
    (world / "AUDIT.json").write_text((world / "AUDIT.json").read_text().replace('"pass"', '"fail"'))
    assert [p.path for p in verify_manifest(world)] == ["AUDIT.json"]  # but a hand-edited audit is caught


def test_rebuilding_an_identical_world_reports_its_stored_audit(built: Path, world: Path) -> None:
    before = {p: p.stat().st_mtime_ns for p in world.rglob("*")}
    again = build_world(CONTRACT, 1, world)
    stored = read_audit(world)
    assert again.skipped
    assert again.audit_summary == stored.summary and again.audit_summary["phenomenon"]["pass"] == 5
    assert again.recoverable == [r.id for r in stored.phenomena if r.passed] and len(again.recoverable) == 5
    assert {p: p.stat().st_mtime_ns for p in world.rglob("*")} == before  # nothing rewritten


def test_rebuilding_over_an_altered_world_needs_overwrite(built: Path, world: Path) -> None:
    (world / "data" / "sis.csv").write_text("student_id\n")
    with pytest.raises(WorldIntegrityError, match="data/sis.csv modified"):
        build_world(CONTRACT, 1, world)
    assert (world / "data" / "sis.csv").read_text() == "student_id\n"  # refused, not repaired behind the user's back
    result = build_world(CONTRACT, 1, world, overwrite=True)
    assert not result.skipped and verify_manifest(world) == []
    assert _sha(world / "data" / "sis.csv") == _sha(built / "data" / "sis.csv")
    assert sorted(p.name for p in world.parent.iterdir()) == ["w"]  # no temp or old folders left


def test_overwrite_never_replaces_a_folder_that_is_not_a_world(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not a complete world"):
        build_world(CONTRACT, 1, mine, overwrite=True)
    assert (mine / "notes.txt").read_text() == "keep me"


def test_a_replacement_killed_mid_swap_gets_the_old_world_back(built: Path, tmp_path: Path) -> None:
    """Killed after the old world was moved aside and before the new one moved in: the next run restores it."""
    aside = tmp_path / ".w.old-k1ll3d"
    aside.mkdir()
    shutil.copytree(built, aside / "world")
    again = build_world(CONTRACT, 1, tmp_path / "w")
    assert again.skipped and verify_manifest(tmp_path / "w") == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w"]


def test_auditing_a_world_built_without_audit_adds_the_audit_to_its_manifest(tmp_path: Path) -> None:
    out = tmp_path / "w"
    build_world(CONTRACT, 1, out, audit=False)
    assert "AUDIT.json" not in json.loads((out / "manifest.json").read_text())["files"]
    audit_world(out)
    files = json.loads((out / "manifest.json").read_text())["files"]
    assert files["AUDIT.json"] == _sha(out / "AUDIT.json") and files["WORLD.md"] == _sha(out / "WORLD.md")
    assert verify_manifest(out) == []
