from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from worldsmith.core.schemas import (AnswerSpec, Criterion, Provenance, Rubric, Task, Tolerance)
from worldsmith.core.store import (ArtifactError, ContentStore, StepLedger, append_jsonl, atomic_write_text, read_jsonl)
from worldsmith.core.taskpkg import TaskCollection, read_task_package, workspace_ref, write_task_package


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sales.csv").write_text("region,amount\nnorth,10\nsouth,20\n")
    (ws / "sub" / "memo.md").write_text("amounts are in EUR\n")
    return ws


def _closed_task(ws: Path, tid: str = "t1", world: str | None = None) -> Task:
    return Task(id=tid, kind="closed_form", instruction="What is the total amount? Answer as @total[value].",
                workspace=workspace_ref(ws), answers=[AnswerSpec(name="total", value=30.0, tolerance=Tolerance(abs=0.01))],
                provenance=Provenance(source="world" if world else "manual", world_id=world, produced_by=["engine"]),
                category="aggregation")


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    p = atomic_write_text(tmp_path / "a" / "b.txt", "hello")
    assert p.read_text() == "hello"
    assert [x.name for x in p.parent.iterdir()] == ["b.txt"]


def test_jsonl_tolerates_torn_last_line_only(tmp_path: Path) -> None:
    p = tmp_path / "e.jsonl"
    append_jsonl(p, {"a": 1})
    append_jsonl(p, {"a": 2})
    with open(p, "a") as fh:
        fh.write('{"a": 3')  # a writer killed mid-line
    assert read_jsonl(p) == [{"a": 1}, {"a": 2}]
    p.write_text('{"a": 1}\nnot json\n{"a": 2}\n')
    with pytest.raises(ArtifactError, match=":2:"):
        read_jsonl(p)


def test_content_store_dedupes_and_detects_corruption(tmp_path: Path) -> None:
    store = ContentStore(tmp_path / "objects")
    d1, d2 = store.put(b"x"), store.put(b"x")
    assert d1 == d2 and store.get(d1) == b"x"
    store.path_for(d1).write_bytes(b"y")
    with pytest.raises(ArtifactError, match="corrupt"):
        store.get(d1)


def test_step_ledger_resume_requires_intact_outputs(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    out.write_text("result")
    ledger = StepLedger(tmp_path / "steps.jsonl")
    assert not ledger.done("solve:abc")
    ledger.record("solve:abc", [out], n=1)
    assert StepLedger(tmp_path / "steps.jsonl").done("solve:abc")  # survives a restart
    out.write_text("tampered")
    assert not StepLedger(tmp_path / "steps.jsonl").done("solve:abc")


def test_package_round_trip_and_layout(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    task = _closed_task(ws)
    pkg = write_task_package(task, tmp_path / "pkg" / task.id, solution_code="print('@total[30]')\n")
    for rel in ("task.toml", "task.json", "instruction.md", "environment/sales.csv", "environment/sub/memo.md",
                "tests/test.sh", "tests/grade.py", "tests/expected.json", "solution/solve.py", "solution/solve.sh"):
        assert (pkg / rel).is_file(), rel
    back = read_task_package(pkg)
    assert back.model_dump(exclude={"workspace": {"root"}}) == task.model_dump(exclude={"workspace": {"root"}})
    assert Path(back.workspace.root) == pkg / "environment"
    assert "30.0" not in (pkg / "instruction.md").read_text()  # answers never leak into what solvers read
    # the shipped verifier works standalone (no worldsmith import)
    (tmp_path / "resp.txt").write_text("The total is @total[30.004]")
    r = subprocess.run([sys.executable, str(pkg / "tests" / "grade.py"), str(pkg / "tests" / "expected.json"),
                        str(tmp_path / "resp.txt"), str(tmp_path / "reward.txt")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert float((tmp_path / "reward.txt").read_text()) == 1.0


def test_package_ships_core_grading_and_the_tasks_rule(tmp_path: Path) -> None:
    from worldsmith.core import grading

    ws = _workspace(tmp_path)
    tolerant_pkg = write_task_package(_closed_task(ws), tmp_path / "pkg" / "t1")
    assert (tolerant_pkg / "tests" / "grade.py").read_bytes() == Path(grading.__file__).read_bytes()
    assert json.loads((tolerant_pkg / "tests" / "expected.json").read_text()) == [
        {"name": "total", "value": 30.0, "tolerance": {"abs": 0.01}}]
    strict = _closed_task(ws, "t2").model_copy(update={"metadata": {"strict_grading": True}})
    strict_pkg = write_task_package(strict, tmp_path / "pkg" / "t2")
    assert json.loads((strict_pkg / "tests" / "expected.json").read_text())[0]["rule"] == "official"
    (tmp_path / "resp.txt").write_text("@total[30.004]")  # within 0.01, but not the same number: official says no
    r = subprocess.run([sys.executable, str(strict_pkg / "tests" / "grade.py"),
                        str(strict_pkg / "tests" / "expected.json"), str(tmp_path / "resp.txt")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and json.loads(r.stdout)["items"][0]["correct"] is False


def test_package_refuses_changed_data_and_conflicting_rewrite(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    task = _closed_task(ws)
    dest = tmp_path / "pkg" / task.id
    write_task_package(task, dest)
    write_task_package(task, dest)  # identical: a no-op (resume)
    other = task.model_copy(update={"instruction": "different"})
    with pytest.raises(ArtifactError, match="already exists"):
        write_task_package(other, dest)
    (ws / "sales.csv").write_text("region,amount\nnorth,11\n")
    with pytest.raises(ArtifactError, match="hash mismatch"):
        write_task_package(task, tmp_path / "pkg2" / task.id)
    (dest / "environment" / "sales.csv").write_text("tampered")
    with pytest.raises(ArtifactError, match="does not match"):
        read_task_package(dest)


def test_report_task_needs_rubric_and_writes_it(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    with pytest.raises(ValueError, match="rubric"):
        Task(id="r1", kind="report", instruction="Explain.", provenance=Provenance(source="manual"))
    rubric = Rubric(criteria=[Criterion(id="c1", section="computation", observable="total", satisfy="states 30",
                                        expected_value=30.0, tolerance=Tolerance(rel=0.01), source="gt")])
    task = Task(id="r1", kind="report", instruction="Explain the total.", workspace=workspace_ref(ws), rubric=rubric,
                provenance=Provenance(source="manual"))
    pkg = write_task_package(task, tmp_path / "p" / "r1")
    assert json.loads((pkg / "tests" / "rubric.json").read_text())["criteria"][0]["id"] == "c1"
    assert read_task_package(pkg).rubric == rubric


def test_collection_index_and_group_disjoint_splits(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    coll = TaskCollection(tmp_path / "coll")
    for i in range(12):
        coll.add(_closed_task(ws, f"t{i}", world=f"w{i % 4}"))
    assert len(coll.entries()) == 12
    assignment = coll.assign_splits(test_fraction=0.25, seed=1)
    assert sorted(assignment.values()).count("test") == 1
    by_world: dict[str, set[str]] = {}
    for e in coll.entries():
        by_world.setdefault(e.group, set()).add(e.split)
    assert all(len(s) == 1 for s in by_world.values())  # no world straddles train and test
    test_ids = {e.id for e in coll.entries("test")}
    assert {t.id for t in coll.tasks("test")} == test_ids and len(test_ids) == 3
    assert all(t.split == "test" for t in coll.tasks("test"))


def test_rubric_score_is_net_and_clipped() -> None:
    rubric = Rubric(criteria=[
        Criterion(id="a", section="computation", observable="x", satisfy="x", weight=2),
        Criterion(id="b", section="insight", observable="y", satisfy="y", weight=1),
        Criterion(id="n", section="computation", polarity="-", observable="z", satisfy="wrong z", weight=2),
    ])
    assert rubric.score({"a": True, "b": True}) == 1.0
    assert rubric.score({"a": True}) == pytest.approx(2 / 3)
    assert rubric.score({"a": True, "b": True, "n": True}) == pytest.approx(1 / 3)
    assert rubric.score({"n": True}) == 0.0


def test_atomic_copy_keeps_mode_and_failed_writes_leave_nothing(tmp_path: Path) -> None:
    from worldsmith.core.store import atomic_copy

    src = tmp_path / "src.csv"
    src.write_text("a\n1\n")
    src.chmod(0o644)
    dst = atomic_copy(src, tmp_path / "out" / "dst.csv")
    assert dst.read_text() == "a\n1\n" and dst.stat().st_mode & 0o777 == 0o644  # not mkstemp's 0600
    with pytest.raises(FileNotFoundError):
        atomic_copy(tmp_path / "missing.csv", tmp_path / "out" / "x.csv")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["dst.csv"]
