"""InfiAgent-DABench loader: questions.jsonl + labels.jsonl + tables/ → closed-form Tasks.

The data is read in place (its licence forbids copying it into the repository): each Task's workspace is
the one table its question names, with `WorkspaceRef.root` pointing at the tables folder.

Both layouts are accepted: the share's (`questions.jsonl`, `labels.jsonl`, `tables/`) and the upstream
repository's (`da-dev-questions.jsonl`, `da-dev-labels.jsonl`, `da-dev-tables/`).
Grading uses the official rule (core/grading.official_dabench: the same string, or |x - y| < 1e-6 as Python's
float() reads them), recorded as `metadata["strict_grading"]`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from worldsmith.core.schemas import (
    AnswerSpec,
    DeliverableSpec,
    Difficulty,
    Provenance,
    Task,
    WorkspaceRef,
)
from worldsmith.core.store import ArtifactError, read_jsonl_lines
from worldsmith.core.taskpkg import workspace_ref

BENCHMARK = "infiagent-dabench"
_LAYOUTS = (("questions.jsonl", "labels.jsonl", "tables"),
            ("da-dev-questions.jsonl", "da-dev-labels.jsonl", "da-dev-tables"))
_REQUIRED_QUESTION_KEYS = ("id", "question", "constraints", "format", "file_name")
#: The official run prompt is `Question: {question}\n{constraints}\n` (InfiAgent pipeline/activities/eval.py);
#: the official reformat step then asks for the format. Our agents answer in one pass, so the format
#: request (worded as in the official reformat template) follows the question directly.
PROMPT_TEMPLATE = (
    "Question: {question}\n{constraints}\n"
    "Your answer should contain all the \"@answer_name[answer]\" in the order mentioned, each \"answer\" should be "
    "in the range of value as required. \nThe format requirements of this question is:\n{format}"
)


class DABenchError(ArtifactError):
    """The benchmark folder is incomplete or a record is malformed; the message names the file and line."""


def compose_instruction(question: dict[str, Any]) -> str:
    return PROMPT_TEMPLATE.format(question=str(question["question"]).strip(),
                                  constraints=str(question["constraints"]).strip(),
                                  format=str(question["format"]).strip())


def _layout(root: Path) -> tuple[Path, Path, Path]:
    if not root.is_dir():
        raise DABenchError(f"{root}: DABench folder does not exist")
    for q, l, t in _LAYOUTS:
        if (root / q).exists() or (root / l).exists():
            missing = [n for n in (q, l, t) if not (root / n).exists()]
            if missing:
                raise DABenchError(f"{root}: DABench folder is missing {', '.join(missing)} "
                                   f"(expected {q}, {l} and the {t}/ folder)")
            return root / q, root / l, root / t
    expected = " or ".join(f"{q} + {l} + {t}/" for q, l, t in _LAYOUTS)
    raise DABenchError(f"{root}: not a DABench folder (expected {expected})")


def _read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    try:
        lines = read_jsonl_lines(path)
    except ArtifactError as exc:
        raise DABenchError(str(exc)) from exc
    for lineno, rec in lines:
        if not isinstance(rec, dict) or "id" not in rec:
            raise DABenchError(f"{path}:{lineno}: expected a JSON object with an 'id'")
        rows.append((lineno, rec))
    return rows


def _labels(path: Path) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for lineno, rec in _read_jsonl(path):
        answers = rec.get("common_answers")
        if not isinstance(answers, list) or not answers:
            raise DABenchError(f"{path}:{lineno}: 'common_answers' must be a non-empty list of [name, value]")
        pairs = []
        for pair in answers:
            if not (isinstance(pair, (list, tuple)) and len(pair) == 2):
                raise DABenchError(f"{path}:{lineno}: answer {pair!r} is not a [name, value] pair")
            pairs.append((str(pair[0]), str(pair[1])))
        out[str(rec["id"])] = pairs
    return out


def load_dabench(root: str | os.PathLike[str], *, ids: Iterable[int | str] | None = None,
                 limit: int | None = None, split: str = "dev") -> list[Task]:
    """Load DABench questions as closed-form Tasks (in file order; `ids` / `limit` select a subset)."""
    root = Path(root).resolve()
    q_path, l_path, tables = _layout(root)
    labels = _labels(l_path)
    wanted = {str(i) for i in ids} if ids is not None else None
    refs: dict[str, WorkspaceRef] = {}
    tasks: list[Task] = []
    for lineno, q in _read_jsonl(q_path):
        qid = str(q["id"])
        if wanted is not None and qid not in wanted:
            continue
        missing = [k for k in _REQUIRED_QUESTION_KEYS if k not in q]
        if missing:
            raise DABenchError(f"{q_path}:{lineno}: question {qid} lacks {', '.join(missing)}")
        if qid not in labels:
            raise DABenchError(f"{l_path}: no label for question {qid} ({q_path}:{lineno})")
        file_name = str(q["file_name"])
        if not (tables / file_name).is_file():
            raise DABenchError(f"{q_path}:{lineno}: question {qid} refers to table {file_name!r}, "
                               f"which is not in {tables}")
        if file_name not in refs:
            refs[file_name] = workspace_ref(tables, [file_name])
        try:
            tasks.append(_task(q, labels[qid], refs[file_name], split))
        except ValidationError as exc:
            raise DABenchError(f"{q_path}:{lineno}: question {qid} does not make a valid task: {exc}") from exc
        if limit is not None and len(tasks) >= limit:
            break
    if wanted is not None:
        found = {t.provenance.original_id for t in tasks}
        absent = sorted(wanted - found)
        if absent and limit is None:
            raise DABenchError(f"{q_path}: no question with id {', '.join(absent)}")
    return tasks


def _task(q: dict[str, Any], label: list[tuple[str, str]], ref: WorkspaceRef, split: str) -> Task:
    concepts = [str(c) for c in q.get("concepts") or []]
    level = q.get("level")
    return Task(
        id=f"dabench-{q['id']}",
        kind="closed_form",
        instruction=compose_instruction(q),
        workspace=ref,
        deliverable=DeliverableSpec(format="answer_tags", description=str(q["format"]).strip(),
                                    answer_names=[name for name, _ in label]),
        answers=[AnswerSpec(name=name, value=value) for name, value in label],
        provenance=Provenance(source="benchmark", benchmark=BENCHMARK, original_id=str(q["id"])),
        difficulty=Difficulty(level=level) if level is not None else Difficulty(),
        category=concepts[0] if concepts else None,
        split=split,  # type: ignore[arg-type]
        tags=concepts,
        metadata={"strict_grading": True, "file_name": q["file_name"], "question": q["question"],
                  "constraints": q["constraints"], "format": q["format"]},
    )
