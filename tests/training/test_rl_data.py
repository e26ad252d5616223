"""RL rows from a task collection: the analyst's opening messages, answers as JSON, the task's files as sandbox
inputs, the expert joined by task id; report and held-out tasks never become rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worldsmith.agents.analyst import system_prompt
from worldsmith.core.schemas import AnswerSpec, Criterion, Provenance, Rubric, Task, Tolerance
from worldsmith.core.taskpkg import TaskCollection, read_task_package, workspace_ref
from worldsmith.training.rl_data import expert_index, rl_dataset, rl_rows


def _task(ws: Path, tid: str, split: str | None = None) -> Task:
    return Task(id=tid, kind="closed_form", instruction="What is the total amount? Answer as @total[value].",
                workspace=workspace_ref(ws), answers=[AnswerSpec(name="total", value=30.0, tolerance=Tolerance(abs=0.01))],
                provenance=Provenance(source="manual"), category="aggregation", split=split)  # type: ignore[arg-type]


def test_rows_from_a_collection(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "sales.csv").write_text("region,amount\nnorth,10\nsouth,20\n")
    coll = TaskCollection(tmp_path / "coll")
    coll.add(_task(ws, "t1"))
    coll.add(_task(ws, "t2", split="test"))
    coll.add(Task(id="r1", kind="report", instruction="Explain.", workspace=workspace_ref(ws),
                  rubric=Rubric(criteria=[Criterion(id="c", section="computation", observable="x", satisfy="y")]),
                  provenance=Provenance(source="manual")))
    tasks = [read_task_package(coll.root / e.path) for e in coll.entries()]
    experts = expert_index([{"task_id": "t1", "input_ids": [1, 2, 3], "completion_mask": [0, 1, 1]},
                            {"task_id": "t1", "input_ids": [9], "completion_mask": [1]},  # only the first counts
                            {"task_id": "x", "input_ids": [4], "completion_mask": [0]}])  # nothing trains: skipped
    assert experts == {"t1": ([1, 2, 3], [0, 1, 1])}
    rows, stats = rl_rows(tasks, experts)
    assert [r["task_id"] for r in rows] == ["t1"] and stats.rows == 1 and stats.with_expert == 1
    assert sum(stats.skipped.values()) == 2
    row = rows[0]
    assert row["prompt"][0] == {"role": "system", "content": system_prompt()}
    assert row["prompt"][-1]["role"] == "user" and "What is the total amount?" in row["prompt"][-1]["content"]
    assert "sales.csv" in row["prompt"][-1]["content"]  # the file profile
    assert json.loads(row["answers"]) == [{"name": "total", "value": 30.0, "tolerance": {"abs": 0.01}}]
    assert [Path(p).name for p in row["inputs"]] == ["sales.csv"] and Path(row["inputs"][0]).is_file()
    assert row["expert_input_ids"] == [1, 2, 3]
    ds = rl_dataset(rows)
    assert ds[0]["task_id"] == "t1"


def test_no_rows_is_an_error() -> None:
    with pytest.raises(ValueError, match="--tasks"):
        rl_dataset([])
