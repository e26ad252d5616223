"""Graders: closed-form answers, rubrics (deterministic items first, LLM judge second), self-consistency.

- `grade_closed_form(task, text)`: `@name[value]` sub-answers against the task's answers (core/grading.py:
  `strict=True` is the official DABench rule, and a task can ask for it with `metadata["strict_grading"]`;
  otherwise the tolerant rule with each answer's tolerance and unit).
- `grade_rubric(task_or_rubric, text, llm=None)`: items with a numeric expected value are checked from the
  text (evidence.py); the rest go to one batched judge call (judge.py). Without an LLM those are 'ungraded'
  and left out of the normalisation. Score = `Rubric.score` over the graded items.
- `consistent(...)` / `select(...)`: re-exported from consistency.py.
Each API is written once, async; the sync names are thin `run_sync` wrappers.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from worldsmith.core import grading
from worldsmith.core import rubric_grading as rg
from worldsmith.core.aio import run_sync
from worldsmith.core.schemas import Grade, Rubric, Task
from worldsmith.training.consistency import ConsistencyResult, consistent, select  # noqa: F401  (public API)
from worldsmith.training.judge import StructuredLLM, ajudge

#: A rubric response passes when its normalised score reaches this and no filter item fails.
RUBRIC_PASS_THRESHOLD = rg.RUBRIC_PASS_THRESHOLD
#: Text deliverables read from the workspace are capped so one huge file cannot blow up a judge prompt.
MAX_WORKSPACE_FILE_CHARS = rg.MAX_WORKSPACE_FILE_CHARS

WorkspaceFiles = Mapping[str, str] | Iterable[str | os.PathLike[str]] | None


# --------------------------------------------------------------------------------------------- closed form


def grade_closed_form(task: Task, response_text: str, strict: bool | None = None) -> Grade:
    """Grade `@name[value]` answers. `strict=None` takes the task's own rule (`metadata['strict_grading']`)."""
    if not task.answers:
        raise ValueError(f"task {task.id}: grade_closed_form needs a task with answers (kind is {task.kind!r})")
    if strict is None:
        strict = bool(task.metadata.get("strict_grading", False))
    expected = [a.model_dump(exclude_none=True) for a in task.answers]
    result = grading.grade(expected, response_text or "", rule="official" if strict else "tolerant")
    details = []
    for spec, item in zip(task.answers, result["items"]):
        details.append({"name": item["name"], "expected": item["expected"], "got": item["got"],
                        "correct": item["correct"],
                        "tolerance": spec.tolerance.model_dump(exclude_none=True) if spec.tolerance else None})
    n_ok = sum(d["correct"] for d in details)
    missing = [d["name"] for d in details if d["got"] is None]
    note = f"{n_ok}/{len(details)} sub-answers correct" + (" (official DABench rule)" if strict else "")
    if missing:
        note += f"; missing @{', @'.join(missing)}"
    return Grade(grader="closed_form", score=result["score"], passed=result["passed"], details=details, note=note)


# --------------------------------------------------------------------------------------------- rubric


def read_workspace_texts(files: WorkspaceFiles) -> dict[str, str]:
    """Text deliverables for grading: a {name: text} mapping, or paths read as the report verifier reads them
    (`rubric_grading.file_text`: a workbook's cells; other binary files skipped), each capped."""
    if files is None:
        return {}
    if isinstance(files, Mapping):
        return {str(k): str(v) for k, v in files.items()}
    out: dict[str, str] = {}
    for f in files:
        p = Path(f)
        if not p.is_file():
            raise FileNotFoundError(f"{p}: workspace file given for rubric grading does not exist")
        if rg.is_deliverable_name(p.name):
            out[p.name] = rg.file_text(p)[:MAX_WORKSPACE_FILE_CHARS]
    return out


def _full_text(response_text: str, files: dict[str, str]) -> str:
    return (response_text or "") + rg.files_section(files)


def _rubric_of(task_or_rubric: Task | Rubric) -> tuple[Rubric, str]:
    if isinstance(task_or_rubric, Rubric):
        return task_or_rubric, ""
    if task_or_rubric.rubric is None or not task_or_rubric.rubric.criteria:
        raise ValueError(f"task {task_or_rubric.id}: grade_rubric needs a task with a rubric")
    return task_or_rubric.rubric, task_or_rubric.instruction


async def agrade_rubric(task_or_rubric: Task | Rubric, response_text: str, llm: StructuredLLM | None = None,
                        workspace_files: WorkspaceFiles = None, *,
                        pass_threshold: float = RUBRIC_PASS_THRESHOLD) -> Grade:
    """Rubric score: deterministic numeric items first, then one (batched) judge call for the rest.

    A judge failure (the model unavailable or unparseable) does not lose the deterministic results: the judged
    items become 'ungraded' and the note says why.
    """
    rubric, instruction = _rubric_of(task_or_rubric)
    text = _full_text(response_text, read_workspace_texts(workspace_files))
    criteria = [c.model_dump(mode="json") for c in rubric.criteria]
    details, pending = rg.deterministic_pass(criteria, text, will_judge=llm is not None)
    verdicts, failure = None, None
    if pending and llm is not None:
        by_id = {c.id: c for c in rubric.criteria}
        try:
            judged = await ajudge(llm, [by_id[c["id"]] for c in pending], text, instruction)
            verdicts = {k: v.model_dump() for k, v in judged.items()}
        except _judge_errors() as exc:
            failure = exc
    reason = "no LLM judge given" if failure is None else f"judge failed: {type(failure).__name__}: {failure}"
    rg.apply_verdicts(details, pending, verdicts, reason, text)
    result = rg.finish(criteria, details, [reason] if failure is not None else [], pass_threshold)
    return Grade(grader="rubric", score=result["score"], passed=result["passed"], details=result["items"],
                 note=result["note"])


def grade_rubric(task_or_rubric: Task | Rubric, response_text: str, llm: StructuredLLM | None = None,
                 workspace_files: WorkspaceFiles = None, *, pass_threshold: float = RUBRIC_PASS_THRESHOLD) -> Grade:
    """Sync wrapper of `agrade_rubric`."""
    return run_sync(agrade_rubric(task_or_rubric, response_text, llm, workspace_files, pass_threshold=pass_threshold))


def _judge_errors() -> tuple[type[BaseException], ...]:
    from worldsmith.llm.errors import LLMError  # late: graders must import without the LLM layer

    return (LLMError, ValueError)


# --------------------------------------------------------------------------------------------- dispatch


async def agrade_response(task: Task, response_text: str, *, llm: StructuredLLM | None = None,
                          strict: bool | None = None, workspace_files: WorkspaceFiles = None) -> Grade:
    """The grader a task calls for: closed form when it has answers, else its rubric."""
    if task.kind == "closed_form":
        return grade_closed_form(task, response_text, strict=strict)
    return await agrade_rubric(task, response_text, llm=llm, workspace_files=workspace_files)


def grade_response(task: Task, response_text: str, *, llm: StructuredLLM | None = None, strict: bool | None = None,
                   workspace_files: WorkspaceFiles = None) -> Grade:
    """Sync wrapper of `agrade_response`."""
    return run_sync(agrade_response(task, response_text, llm=llm, strict=strict, workspace_files=workspace_files))
