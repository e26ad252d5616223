"""Evaluation harness: solve every (task, sample) pair, grade, save, resume, and report.

    report = await evaluate(tasks, solve, samples=3, run_dir=RunDir.create("eval", "runs"), concurrency=2)

- `solve(task, sample_index) -> Trajectory` is the agent. An exception inside it becomes a trajectory with
  status 'error' (graded as wrong); the eval goes on — except an `LLMFatalError` (key rejected, endpoint
  unreachable or hanging): every later pair would fail the same way, so the batch stops at once, the event log
  records `eval_stopped`, and the error propagates (the unfinished pairs are solved on resume).
- With `usage` (the LLM's `usage` method), the faults the LLM layer retried or gave up on during the run are
  written as an `llm_faults` event and into the report.
- Every trajectory is written atomically to `trajectories/<task_id>/<sample>.json` and recorded in the run's
  StepLedger, so re-running on the same run directory skips finished pairs (their saved grade is reused).
- Metrics (metrics.py): pass@1 (mean over samples), unbiased pass@k, and DABench's accuracy by question,
  by sub-question and proportional under both denominators — conservative (ALL tasks, an empty or failed
  response = wrong) and official (empty responses left out) — overall, per category, per level.
- Writes `results.json` (the EvalReport) and `report.md` into the run directory.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from worldsmith.core.grading import is_empty_response
from worldsmith.core.runs import RunDir
from worldsmith.core.schemas import BLOCKING_GUARDS, Grade, Task, Trajectory
from worldsmith.core.store import ArtifactError, read_model, sha256_json, write_model
from worldsmith.training.graders import agrade_response
from worldsmith.training.judge import StructuredLLM
from worldsmith.training.metrics import (EvalReport, SampleResult, TaskResult, build_report, render_report_md,
                                         tally_guards)

__all__ = ["EvalReport", "SampleResult", "TaskResult", "evaluate", "primary_grade", "render_report_md", "SolveFn", "ProgressFn"]

SolveFn = Callable[[Task, int], Awaitable[Trajectory]]
ProgressFn = Callable[[int, int], Any]
UsageFn = Callable[[], dict[str, Any]]  # LLM.usage: role -> RoleUsage


def _is_fatal(exc: BaseException) -> bool:
    from worldsmith.llm.errors import LLMFatalError  # late: this module imports without the LLM layer

    return isinstance(exc, LLMFatalError)


def _fault_summary(before: dict[str, Any] | None, usage: UsageFn | None) -> dict[str, dict[str, Any]]:
    if usage is None or before is None:
        return {}
    from worldsmith.llm.accounting import fault_summary

    return fault_summary(before, usage())


def _task_fingerprint(task: Task, *, with_root: bool) -> str:
    dump = task.model_dump(mode="json", exclude={"split", "difficulty", "metadata"})
    if not with_root:
        dump["workspace"].pop("root", None)
    return sha256_json(dump)[:12]


def pair_key(task: Task, sample: int) -> str:
    """Ledger key: a changed task (instruction, answers, rubric, data) is never mistaken for a finished one.

    The data enter through the workspace's file hashes, not through where the files lie: loading a task list, a
    collection or a package resolves `workspace.root` to an absolute path, so a run resumed from another checkout
    or a moved task folder would otherwise find nothing done. A workspace without a file list keeps its root."""
    return f"eval:{task.id}:{sample}:{_task_fingerprint(task, with_root=not task.workspace.files)}"


def _legacy_pair_key(task: Task, sample: int) -> str:
    """The key before the root left the fingerprint (runs up to 2026-12-06): read on resume, never written."""
    return f"eval:{task.id}:{sample}:{_task_fingerprint(task, with_root=True)}"


def trajectory_path(run_dir: RunDir, task_id: str, sample: int) -> Path:
    return run_dir.path / "trajectories" / task_id / f"{sample}.json"


def _error_trajectory(task: Task, sample: int, exc: BaseException, model: str, elapsed: float) -> Trajectory:
    return Trajectory(id=f"{task.id}-s{sample}", task_id=task.id, model=model, sample_index=sample,
                      user_prompt=task.instruction, status="error", error=f"{type(exc).__name__}: {exc}",
                      time_s=round(elapsed, 3))


def _sub_correct(task: Task, grade: Grade) -> tuple[int, int]:
    """(correct, total) sub-questions: answers for closed form; one unit for a report task."""
    if task.kind == "closed_form":
        return sum(1 for d in grade.details if d.get("correct")), len(task.answers)
    return int(grade.passed), 1


def primary_grade(traj: Trajectory) -> Grade | None:
    """The grade that scores a trajectory: the last closed-form or rubric grade (others are diagnostics)."""
    for g in reversed(traj.grades):
        if g.grader in ("closed_form", "rubric"):
            return g
    return None


def _sample_result(task: Task, traj: Trajectory, grade: Grade, path: Path, root: Path,
                   resumed: bool) -> SampleResult:
    correct, total = _sub_correct(task, grade)
    empty = traj.status == "error" or is_empty_response(traj.final_answer)
    return SampleResult(sample_index=traj.sample_index, status=traj.status, passed=grade.passed, score=grade.score,
                        sub_correct=correct, sub_total=total, error=traj.error, empty=empty, resumed=resumed,
                        path=path.relative_to(root).as_posix(), time_s=traj.time_s,
                        guards=tally_guards(traj.guards), resampled=sum(1 for c in traj.calls if c.dropped))


async def _grade(task: Task, traj: Trajectory, strict: bool | None, llm: StructuredLLM | None) -> Grade:
    response = "" if traj.status == "error" else (traj.answer_to_grade or "")
    try:
        grade = await agrade_response(task, response, llm=llm, strict=strict, workspace_files=traj.deliverables)
    except Exception as exc:  # noqa: BLE001 - one bad grade must not abort the eval; it is recorded as wrong
        if _is_fatal(exc):
            raise
        return Grade(grader="closed_form" if task.kind == "closed_form" else "rubric", score=0.0, passed=False,
                     note=f"grading failed: {type(exc).__name__}: {exc}")
    return unsupported_grade(traj, grade) if traj.status == "unsupported" else grade


def unsupported_grade(traj: Trajectory, grade: Grade) -> Grade:
    """An unsupported answer (a blocking guard still fired on it) is wrong whatever it says: a guess must not
    score. The note keeps what the answer would have scored, for diagnosis."""
    kinds = sorted({g.kind for g in traj.guards if g.kind in BLOCKING_GUARDS})
    return Grade(grader=grade.grader, score=0.0, passed=False,
                 note=f"unsupported ({', '.join(kinds) or 'guard'}): graded wrong; on its own it "
                      f"{'passed' if grade.passed else 'failed'} with score {grade.score:.2f}")


async def _run_pair(task: Task, sample: int, solve: SolveFn, run_dir: RunDir, *, strict: bool | None,
                    llm: StructuredLLM | None, model: str) -> SampleResult:
    t0 = time.monotonic()
    try:
        traj = await solve(task, sample)
        if not isinstance(traj, Trajectory):
            raise TypeError(f"solve returned {type(traj).__name__}, expected a Trajectory")
        if traj.task_id != task.id:
            raise ValueError(f"solve returned a trajectory for task {traj.task_id!r}, expected {task.id!r}")
        traj.sample_index = sample
        if not traj.time_s:
            traj.time_s = round(time.monotonic() - t0, 3)
    except Exception as exc:  # noqa: BLE001 - recorded as a failed trajectory (status 'error'), see module doc
        if _is_fatal(exc):
            raise
        traj = _error_trajectory(task, sample, exc, model, time.monotonic() - t0)
    grade = await _grade(task, traj, strict, llm)
    traj.grades = [*traj.grades, grade]
    path = write_model(trajectory_path(run_dir, task.id, sample), traj)
    run_dir.ledger.record(pair_key(task, sample), outputs=[path], status=traj.status, passed=grade.passed,
                          score=grade.score)
    run_dir.event("eval_sample", task_id=task.id, sample=sample, status=traj.status, passed=grade.passed,
                  score=round(grade.score, 4), error=traj.error)
    return _sample_result(task, traj, grade, path, run_dir.path, resumed=False)


async def _resume_pair(task: Task, sample: int, run_dir: RunDir, strict: bool | None,
                       llm: StructuredLLM | None) -> SampleResult:
    path = trajectory_path(run_dir, task.id, sample)
    traj = read_model(path, Trajectory)
    grade = primary_grade(traj)
    if grade is None:  # saved before grading finished: grade now and save again
        grade = await _grade(task, traj, strict, llm)
        traj.grades = [*traj.grades, grade]
        write_model(path, traj)
        run_dir.ledger.record(pair_key(task, sample), outputs=[path], status=traj.status, passed=grade.passed,
                              score=grade.score)
    return _sample_result(task, traj, grade, path, run_dir.path, resumed=True)


def load_tasks(path: Path, *, limit: int | None = None, ids: list[str] | None = None,
               split: str | None = None) -> list[Task]:
    """Tasks from a collection (index.jsonl), a frozen task list (tasks.jsonl), one task package (task.json) or a
    DABench-format folder."""
    from worldsmith.core.taskpkg import (
        TASK_LIST,
        TaskCollection,
        read_task_list,
        read_task_package,
    )
    from worldsmith.training.dabench import load_dabench

    if (path / "questions.jsonl").is_file():
        tasks = load_dabench(path, ids=ids, limit=limit)
    elif (path / TASK_LIST).is_file():
        tasks = [t for t in read_task_list(path) if not ids or t.id in set(ids)]
        tasks = tasks[:limit] if limit else tasks
    elif (path / "index.jsonl").is_file():
        tasks = TaskCollection(path).tasks(split)
        if ids:
            tasks = [t for t in tasks if t.id in set(ids)]
        tasks = tasks[:limit] if limit else tasks
    elif (path / "task.json").is_file():
        tasks = [read_task_package(path)]
    else:
        raise FileNotFoundError(f"{path}: not a task collection (index.jsonl), a task list (tasks.jsonl), a task "
                                "package (task.json) or a DABench-format folder (questions.jsonl)")
    if not tasks:
        raise ValueError(f"{path}: no tasks selected")
    return tasks


def completed_task_results(tasks: Sequence[Task], root: Path, samples: int) -> list[TaskResult]:
    """The questions of an eval run directory `root` (finished or stopped) whose every sample has a graded
    trajectory, in the set's order, counted as the report counts them: what a stopped run has measured. Nothing
    is solved or graded here; a sample saved before its grade is left out with its question."""
    out = []
    for task in tasks:
        found = []
        for sample in range(samples):
            path = root / "trajectories" / task.id / f"{sample}.json"
            try:
                traj = read_model(path, Trajectory)
            except ArtifactError:  # not written yet, or half-written when the run was killed
                break
            grade = primary_grade(traj)
            if grade is None:
                break
            found.append(_sample_result(task, traj, grade, path, root, resumed=True))
        if len(found) == samples:
            out.append(TaskResult(task_id=task.id, kind=task.kind, category=task.category,
                                  level=task.difficulty.level, samples=found))
    return out


def workspace_key(task: Task) -> tuple[str, ...]:
    """The files a task's solver starts from: tasks with the same key open with the same file list."""
    ws = task.workspace
    return (ws.root or "", ws.content_hash or "\n".join(sorted(f"{f.path}:{f.sha256}" for f in ws.files)))


def solve_order(tasks: Sequence[Task], samples: int) -> list[tuple[Task, int]]:
    """(task, sample) pairs in the order they are solved: the questions on one workspace one after another, in
    the set's order otherwise (the report keeps the set's order). The analyst's task turn opens with the file
    list, so consecutive questions on the same files share a prompt prefix that a prefix-caching server
    (llama.cpp's KV cache, vLLM/SGLang's prefix cache) does not process again; generated-v1 lists its questions
    round robin over the worlds, where no two neighbours share one."""
    first: dict[tuple[str, ...], int] = {}
    for i, t in enumerate(tasks):
        first.setdefault(workspace_key(t), i)
    ranked = sorted(range(len(tasks)), key=lambda i: (first[workspace_key(tasks[i])], i))
    return [(tasks[i], s) for i in ranked for s in range(samples)]


def _is_done(run_dir: RunDir, task: Task, sample: int, retry_errors: bool) -> bool:
    key = next((k for k in (pair_key(task, sample), _legacy_pair_key(task, sample)) if run_dir.ledger.done(k)), None)
    if key is None:
        return False
    rec = run_dir.ledger.get(key) or {}
    return not (retry_errors and rec.get("status") == "error")


async def _notify(progress: ProgressFn | None, done: int, total: int) -> None:
    if progress is None:
        return
    result = progress(done, total)
    if inspect.isawaitable(result):
        await result


async def evaluate(tasks: Sequence[Task], solve: SolveFn, *, samples: int = 1, run_dir: RunDir,
                   concurrency: int = 1, strict: bool | None = None, progress: ProgressFn | None = None,
                   llm: StructuredLLM | None = None, model: str = "unknown", retry_errors: bool = False,
                   usage: UsageFn | None = None) -> EvalReport:
    """Solve, grade and report every (task, sample) pair; resumable on the same run directory.

    strict: None = each task's own rule (DABench tasks ask for the official one); True/False force it.
    llm: judge for rubric items that need one (report tasks); without it those items are 'ungraded'.
    model: recorded on error trajectories (the model the agent was running).
    retry_errors: on resume, solve again the pairs that ended in an exception instead of keeping them.
    usage: the LLM's per-role usage snapshot (LLM.usage), to report the faults it met during this run.
    """
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    ids = [t.id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValueError(f"duplicate task ids in the eval set: {', '.join(dupes)}")
    t0 = time.monotonic()
    usage_before = usage() if usage is not None else None
    pairs = solve_order(tasks, samples)
    total = len(pairs)
    done_before = {(t.id, s) for t, s in pairs if _is_done(run_dir, t, s, retry_errors)}
    run_dir.event("eval_started", n_tasks=len(tasks), samples=samples, pairs=total, already_done=len(done_before),
                  concurrency=concurrency, strict=strict)
    results: dict[tuple[str, int], SampleResult] = {}
    counter = 0
    lock = asyncio.Lock()

    async def finish(key: tuple[str, int], res: SampleResult) -> None:
        nonlocal counter
        async with lock:
            results[key] = res
            counter += 1
            await _notify(progress, counter, total)

    for t, s in pairs:
        if (t.id, s) in done_before:
            try:
                res = await _resume_pair(t, s, run_dir, strict, llm)
            except ArtifactError:  # ledger says done but the file is unreadable: solve it again
                done_before.discard((t.id, s))
                continue
            await finish((t.id, s), res)

    sem = asyncio.Semaphore(concurrency)

    fatal = asyncio.Event()  # set by the first fatal LLM error: workers not yet started never start

    async def worker(task: Task, sample: int) -> None:
        async with sem:
            if fatal.is_set():
                return
            try:
                res = await _run_pair(task, sample, solve, run_dir, strict=strict, llm=llm, model=model)
            except Exception as exc:
                if _is_fatal(exc):
                    fatal.set()
                raise
        await finish((task.id, sample), res)

    running = [asyncio.ensure_future(worker(t, s)) for t, s in pairs if (t.id, s) not in done_before]
    try:
        await asyncio.gather(*running)
    except BaseException as exc:
        # killed, cancelled or a fatal LLM error: stop the other workers now; finished pairs are in the ledger
        for fut in running:
            fut.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        faults = _fault_summary(usage_before, usage)
        if faults:
            run_dir.event("llm_faults", roles=faults)
        if _is_fatal(exc):
            run_dir.event("eval_stopped", done=counter, total=total, kind=getattr(exc, "kind", ""), error=str(exc))
        else:
            run_dir.event("eval_interrupted", done=counter, total=total)
        raise

    task_results = [TaskResult(task_id=t.id, kind=t.kind, category=t.category, level=t.difficulty.level,
                               samples=[results[(t.id, s)] for s in range(samples)]) for t in tasks]
    report = build_report(task_results, samples=samples, strict=strict, run_dir=str(run_dir.path),
                          elapsed_s=time.monotonic() - t0)
    report.llm_faults = _fault_summary(usage_before, usage)
    if usage is not None:
        run_dir.event("llm_faults", roles=report.llm_faults)
    run_dir.write_json("results.json", report.model_dump(mode="json"))
    run_dir.write_report(render_report_md(report))
    run_dir.event("eval_finished", n_tasks=len(tasks), solved_now=report.n_solved_now, resumed=report.n_resumed,
                  errors=report.overall.n_errors, pass_at_1=round(report.overall.pass_at_1, 4))
    return report
