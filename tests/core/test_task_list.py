"""Frozen task lists (core/taskpkg.read_task_list): tasks.jsonl whose workspaces are folders beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from worldsmith.training.evaluate import load_tasks
from worldsmith.core.schemas import AnswerSpec, Provenance, Task
from worldsmith.core.store import ArtifactError
from worldsmith.core.taskpkg import read_task_list, workspace_ref


def _write_list(folder: Path, root: str = "worlds/w1") -> Task:
    data = folder / "worlds" / "w1" / "data"
    data.mkdir(parents=True)
    (data / "sales.csv").write_text("region,amount\nnorth,10\nsouth,20\n")
    ws = workspace_ref(folder / "worlds" / "w1", keep_root=False).model_copy(update={"root": root})
    task = Task(id="t1", kind="closed_form", instruction="Mean amount? @mean_amount[value]", workspace=ws,
                answers=[AnswerSpec(name="mean_amount", value=15.0)], provenance=Provenance(source="manual"))
    (folder / "tasks.jsonl").write_text(task.model_dump_json() + "\n")
    return task


def test_a_task_list_reads_back_with_its_workspace_beside_it(tmp_path: Path) -> None:
    _write_list(tmp_path)
    [task] = read_task_list(tmp_path)
    assert Path(task.workspace.root) == tmp_path / "worlds" / "w1"
    assert (Path(task.workspace.root) / "data" / "sales.csv").is_file()
    assert [t.id for t in load_tasks(tmp_path)] == ["t1"]  # the eval harness reads the same folder


def test_a_changed_file_or_an_absolute_root_is_refused(tmp_path: Path) -> None:
    _write_list(tmp_path)
    (tmp_path / "worlds" / "w1" / "data" / "sales.csv").write_text("region,amount\nnorth,10\nsouth,99\n")
    with pytest.raises(ArtifactError, match="does not match its recorded hash"):
        read_task_list(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    _write_list(other, root=str(other / "worlds" / "w1"))
    with pytest.raises(ArtifactError, match="relative"):
        read_task_list(other)
