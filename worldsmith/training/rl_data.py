"""The SFT+RL dataset: one row per closed-form task, in the shape `SFTRLTrainer` and the rollout environment read.

Columns: `prompt` (the analyst's opening messages, as inference sends them: system prompt, worked example, user
prompt with the file profile), `answers` (JSON text: answer values mix types, which Arrow columns cannot) +
`rule` (for the rewards), `inputs` (the task's files, for the sandbox),
`task_id`, and the expert trajectory for the SFT term, `expert_input_ids` / `expert_completion_mask` (the SFT
dataset's `input_ids` / `completion_mask` of one accepted trajectory of the same task; empty when it has none).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from worldsmith.agents.analyst import few_shot_messages, method_hints, opening, system_prompt
from worldsmith.core.schemas import Task
from worldsmith.graphs.solve import task_files

Expert = tuple[list[int], list[int]]


@dataclass
class RLDataStats:
    tasks: int = 0
    rows: int = 0
    with_expert: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> count


def task_opening(task: Task, profile_chars: int = 4000) -> tuple[list[dict[str, str]], str]:
    """The messages that open the analyst on `task` (the same texts the analyst graph sends), and the code its
    session runs before the first cell (`agents.analyst.Opening.setup`: the join the task turn says has run)."""
    files = task_files(task)
    names = task.deliverable.answer_names or [a.name for a in task.answers]
    categories = [task.category, *task.tags] if task.category else task.tags
    opened = opening(task.instruction, [str(f) for f in files], profile_chars, names,
                     method_hints(categories, task.instruction))
    return ([{"role": "system", "content": system_prompt()}, *few_shot_messages(),
             {"role": "user", "content": opened.turn}], opened.setup)


def task_prompt(task: Task, profile_chars: int = 4000) -> list[dict[str, str]]:
    """The messages that open the analyst on `task` (`task_opening` without the setup)."""
    return task_opening(task, profile_chars)[0]


def expert_index(rows: Iterable[Mapping[str, Any]]) -> dict[str, Expert]:
    """task_id → (input_ids, completion_mask) of its first example in an SFT dataset (rows or a `datasets.Dataset`)."""
    out: dict[str, Expert] = {}
    for row in rows:
        tid = row.get("task_id")
        if tid and tid not in out and any(row["completion_mask"]):
            out[tid] = (list(row["input_ids"]), list(row["completion_mask"]))
    return out


def rl_rows(tasks: Sequence[Task], experts: Mapping[str, Expert] | None = None, *,
            profile_chars: int = 4000) -> tuple[list[dict[str, Any]], RLDataStats]:
    stats = RLDataStats(tasks=len(tasks))
    rows = []
    for task in tasks:
        reason = _skip_reason(task)
        if reason:
            stats.skipped[reason] = stats.skipped.get(reason, 0) + 1
            continue
        ids, mask = (experts or {}).get(task.id, ([], []))
        prompt, setup = task_opening(task, profile_chars)
        rows.append({"prompt": prompt, "setup": setup, "task_id": task.id,
                     "answers": json.dumps([a.model_dump(mode="json", exclude_none=True) for a in task.answers]),
                     "rule": "tolerant", "inputs": [str(p) for p in task_files(task)],
                     "expert_input_ids": ids, "expert_completion_mask": mask})
        stats.with_expert += bool(ids)
    stats.rows = len(rows)
    return rows, stats


def _skip_reason(task: Task) -> str | None:
    if task.kind != "closed_form":
        return "not closed-form (report tasks need the rubric reward)"
    if task.split in ("test", "dev") or task.provenance.source == "benchmark":
        return "held out (test/dev split or benchmark task)"
    return None


def rl_dataset(rows: list[dict[str, Any]]) -> Any:
    """A `datasets.Dataset` of the rows (empty lists typed as int lists, so rows without an expert still load)."""
    from datasets import Dataset

    if not rows:
        raise ValueError("no RL rows: give task collections with closed-form train tasks (--tasks)")
    return Dataset.from_list(rows)


__all__ = ["Expert", "RLDataStats", "expert_index", "rl_dataset", "rl_rows", "task_opening", "task_prompt"]
