"""Task writing refuses a world that no longer matches its manifest: when it samples specs, and again before it
packages tasks (a resumed run may find the world altered since)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.worldtasks.tasks_script import runtime
from worldsmith.evolution.worlds import WorldIntegrityError, build_world, load_template
from worldsmith.graphs.world import write_world_tasks
from worldsmith.graphs.world_ops import VerifySolutions


@pytest.fixture
def world(tmp_path: Path) -> Path:
    out = tmp_path / "w"
    build_world(load_template("education", rows=500), 1, out)
    return out


def _write(world: Path, tmp_path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    return asyncio.run(write_world_tasks(runtime(tmp_path / "runs"), tmp_path / "pipe", world, tmp_path / "tasks",
                                         max_tasks=2, use_llm=False, on_event=lambda e: None))


def test_tasks_are_not_written_for_a_truncated_world(world: Path, tmp_path: Path) -> None:
    data = world / "data" / "sis.csv"
    data.write_bytes(data.read_bytes()[:100])
    with pytest.raises(WorldIntegrityError, match="data/sis.csv modified"):
        _write(world, tmp_path)
    assert not (tmp_path / "tasks").exists()


def test_tasks_are_not_written_for_a_world_without_manifest(world: Path, tmp_path: Path) -> None:
    (world / "manifest.json").unlink()
    with pytest.raises(WorldIntegrityError, match="manifest.json missing"):
        _write(world, tmp_path)
    assert not (tmp_path / "tasks").exists()


def test_packaging_checks_the_world_again(world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The world is altered after the specs were sampled (as between a kill and a resume): nothing is packaged."""
    async def verify_then_alter(self: VerifySolutions, v: dict[str, Any], storage: Any) -> dict[str, Any]:
        shutil.copyfile(world / "data" / "README.md", world / "data" / "memos" / "exam_board.md")
        return {"verified": {}, "dropped": []}

    monkeypatch.setattr(VerifySolutions, "process", verify_then_alter)
    with pytest.raises(WorldIntegrityError, match="data/memos/exam_board.md modified"):
        _write(world, tmp_path)
    assert not (tmp_path / "tasks").exists()


def test_tasks_written_beside_the_world_leave_it_intact(world: Path, tmp_path: Path) -> None:
    """Tasks go to WORLD/tasks by default, outside the sealed data room: a second writer and a re-audit accept it."""
    from worldsmith.evolution.worlds import audit_world, verify_manifest

    runs = tmp_path / "runs"
    for attempt in ("first", "second"):
        written, _ = asyncio.run(write_world_tasks(runtime(runs), tmp_path / f"pipe-{attempt}", world,
                                                   world / "tasks", max_tasks=1, use_llm=False,
                                                   on_event=lambda e: None))
        assert len(written) == 1, attempt
        assert (world / "tasks" / "tasks" / written[0] / "task.json").is_file()
        assert verify_manifest(world) == [], attempt
    assert audit_world(world).passed and verify_manifest(world) == []
