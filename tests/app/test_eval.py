"""The eval service's task loading: which folders it accepts, and what it says about the others."""

from __future__ import annotations

from pathlib import Path

import pytest

from worldsmith.training.evaluate import load_tasks


def test_a_folder_that_holds_no_tasks_is_named_with_the_forms_it_could_take(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as info:
        load_tasks(tmp_path)
    msg = str(info.value)
    assert str(tmp_path) in msg
    assert all(form in msg for form in ("index.jsonl", "task.json", "questions.jsonl"))


def test_a_dabench_folder_gives_its_questions(dabench_dir: Path) -> None:
    tasks = load_tasks(dabench_dir, limit=3)
    assert len(tasks) == 3 and len({t.id for t in tasks}) == 3
    assert all(t.instruction for t in tasks)
