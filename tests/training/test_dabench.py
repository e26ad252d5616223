"""DABench loader: the real development share (read in place, skipped when absent) and broken folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worldsmith.training.dabench import BENCHMARK, DABenchError, compose_instruction, load_dabench
from worldsmith.training.graders import grade_closed_form


def test_dev_share_loads_65_tasks_with_tables_and_labels(dabench_dir: Path) -> None:
    tasks = load_dabench(dabench_dir)
    assert len(tasks) == 65
    assert len({t.id for t in tasks}) == 65
    questions = [json.loads(line) for line in (dabench_dir / "questions.jsonl").read_text().splitlines() if line.strip()]
    labels = {str(r["id"]): r for r in map(json.loads, (dabench_dir / "labels.jsonl").read_text().splitlines())}
    for task, q in zip(tasks, questions):
        assert task.id == f"dabench-{q['id']}" and task.kind == "closed_form"
        assert task.provenance.source == "benchmark" and task.provenance.benchmark == BENCHMARK
        assert task.provenance.original_id == str(q["id"])
        assert task.difficulty.level == q["level"]
        assert task.category == q["concepts"][0] and task.tags == q["concepts"]
        assert task.metadata["strict_grading"] is True
        # workspace: the one table, hashed in place
        assert [f.path for f in task.workspace.files] == [q["file_name"]]
        assert Path(task.workspace.root, q["file_name"]).is_file()
        assert Path(task.workspace.root).resolve() == (dabench_dir / "tables").resolve()
        assert task.workspace.content_hash
        # answers keep the label strings exactly
        assert [(a.name, a.value) for a in task.answers] == [tuple(p) for p in labels[str(q["id"])]["common_answers"]]
        assert all(isinstance(a.value, str) for a in task.answers)
        assert task.deliverable.answer_names == [a.name for a in task.answers]
        # the official composition
        assert task.instruction.startswith(f"Question: {q['question'].strip()}\n{q['constraints'].strip()}\n")
        assert task.instruction.endswith(q["format"].strip())


def test_grading_the_label_text_itself_scores_100_percent(dabench_dir: Path) -> None:
    labels = {str(r["id"]): r for r in map(json.loads, (dabench_dir / "labels.jsonl").read_text().splitlines())}
    for task in load_dabench(dabench_dir):
        label_text = " ".join(f"@{n}[{v}]" for n, v in labels[task.provenance.original_id]["common_answers"])
        grade = grade_closed_form(task, label_text)  # the task's own (official) rule
        assert grade.passed and grade.score == 1.0, (task.id, grade.details)
        wrong = " ".join(f"@{a.name}[wrong]" for a in task.answers)
        assert grade_closed_form(task, wrong).score == 0.0


def test_tasks_sharing_a_table_share_one_workspace_hash(dabench_dir: Path) -> None:
    tasks = load_dabench(dabench_dir)
    by_file: dict[str, set[str]] = {}
    for t in tasks:
        by_file.setdefault(t.workspace.files[0].path, set()).add(t.workspace.content_hash)
    assert len(by_file) == 10 and all(len(h) == 1 for h in by_file.values())


def test_subset_by_ids_and_limit(dabench_dir: Path) -> None:
    assert [t.id for t in load_dabench(dabench_dir, ids=[5, 0])] == ["dabench-0", "dabench-5"]
    assert len(load_dabench(dabench_dir, limit=3)) == 3
    with pytest.raises(DABenchError, match="no question with id 999999"):
        load_dabench(dabench_dir, ids=[0, 999999])


# --------------------------------------------------------------------------------------------- broken folders


def _write(root: Path, questions: list[dict], labels: list[dict], tables: dict[str, str],
           names: tuple[str, str, str] = ("questions.jsonl", "labels.jsonl", "tables")) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / names[0]).write_text("".join(json.dumps(q) + "\n" for q in questions))
    (root / names[1]).write_text("".join(json.dumps(lab) + "\n" for lab in labels))
    (root / names[2]).mkdir(exist_ok=True)
    for name, text in tables.items():
        (root / names[2] / name).write_text(text)
    return root


Q = {"id": 7, "question": "Mean of a?", "concepts": ["Summary Statistics", "Comprehensive Data Preprocessing"],
     "constraints": "Round to 2 decimals.", "format": "@mean_a[value]", "file_name": "t.csv", "level": "easy"}
L = {"id": 7, "common_answers": [["mean_a", "1.50"]]}


def test_synthetic_folder_and_exact_instruction(tmp_path: Path) -> None:
    tasks = load_dabench(_write(tmp_path / "d", [Q], [L], {"t.csv": "a\n1\n2\n"}))
    assert tasks[0].instruction == (
        "Question: Mean of a?\nRound to 2 decimals.\nYour answer should contain all the \"@answer_name[answer]\" in the "
        "order mentioned, each \"answer\" should be in the range of value as required. \nThe format requirements of "
        "this question is:\n@mean_a[value]")
    assert tasks[0].instruction == compose_instruction(Q)
    assert grade_closed_form(tasks[0], "@mean_a[1.5]").passed  # official rule: same number
    assert not grade_closed_form(tasks[0], "@mean_a[1.5%]").passed


def test_upstream_layout_is_accepted(tmp_path: Path) -> None:
    names = ("da-dev-questions.jsonl", "da-dev-labels.jsonl", "da-dev-tables")
    root = _write(tmp_path / "up", [Q], [L], {"t.csv": "a\n1\n"}, names)
    assert load_dabench(root)[0].workspace.files[0].path == "t.csv"


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda r: (r / "labels.jsonl").unlink(), "missing labels.jsonl"),
    (lambda r: (r / "questions.jsonl").unlink(), "missing questions.jsonl"),
    (lambda r: (r / "tables" / "t.csv").unlink(), "refers to table 't.csv', which is not in"),
    (lambda r: (r / "labels.jsonl").write_text('{"id": 8, "common_answers": [["x", "1"]]}\n'), "no label for question 7"),
    (lambda r: (r / "labels.jsonl").write_text('{"id": 7, "common_answers": []}\n'), "labels.jsonl:1: 'common_answers' must be"),
    (lambda r: (r / "labels.jsonl").write_text('{"id": 7, "common_answers": [["x"]]}\n'), "is not a [name, value] pair"),
    (lambda r: (r / "questions.jsonl").write_text('{"id": 7, "question": \n'), "questions.jsonl:1: invalid JSON"),
    (lambda r: (r / "questions.jsonl").write_text('{"id": 7, "question": "q"}\n'), "question 7 lacks constraints, format, file_name"),
    (lambda r: (r / "questions.jsonl").write_text(json.dumps({**Q, "level": "extreme"}) + "\n"), "does not make a valid task"),
])
def test_broken_folders_give_clear_errors(tmp_path: Path, mutate, message: str) -> None:
    root = _write(tmp_path / "d", [Q], [L], {"t.csv": "a\n1\n"})
    mutate(root)
    with pytest.raises(DABenchError) as info:
        load_dabench(root)
    assert message in str(info.value)


def test_not_a_dabench_folder(tmp_path: Path) -> None:
    with pytest.raises(DABenchError, match="does not exist"):
        load_dabench(tmp_path / "nope")
    with pytest.raises(DABenchError, match="not a DABench folder"):
        load_dabench(tmp_path)
