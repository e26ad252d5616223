"""Eval: solve tasks with the analyst, grade them, write the report; shared by `worldsmith eval`, the router and
the DABench benchmark script."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from worldsmith.graphs.runtime import GraphRuntime

#: ``progress(done, total)`` after each finished trajectory.
Progress = Callable[[int, int], None]


async def evaluate_path(rt: GraphRuntime, path: Path, *, samples: int | None = None, limit: int | None = None,
                        ids: list[str] | None = None, split: str | None = None, run_path: Path | None = None,
                        progress: Progress | None = None, retry_errors: bool | None = None) -> dict[str, Any]:
    """Evaluate the analyst on the tasks at `path` in a new run directory (or continue `run_path`).

    retry_errors: on resume, solve again the items that failed on an error (None: the eval.retry_errors setting).
    Returns the summary every front end shows: status ('ok' | 'partial' | 'failed': how many trajectories ended
    in an error), counts, run_dir, report, overall and by_level metrics. An LLMFatalError (key rejected, endpoint
    unreachable) stops the run at once and propagates, its run directory marked failed."""
    from worldsmith.core.runs import RunDir, batch_status
    from worldsmith.graphs.solve import TaskSolver
    from worldsmith.llm.errors import LLMFatalError
    from worldsmith.training.evaluate import evaluate, load_tasks

    settings = rt.settings
    samples = samples or settings.eval.samples
    retry_errors = settings.eval.retry_errors if retry_errors is None else retry_errors
    tasks = load_tasks(path, limit=limit, ids=ids, split=split)
    run = RunDir.open(run_path) if run_path else RunDir.create("eval", settings.runs_dir, config=settings.masked())
    run.event("eval_request", tasks=str(path), n_tasks=len(tasks), samples=samples, retry_errors=retry_errors,
              agent=_agent_identity(rt.llm))
    temperature = settings.eval.temperature_when_sampling if samples > 1 else None
    solver = TaskSolver(rt, temperature=temperature, greedy_first=settings.eval.greedy_first)
    if samples > 1:
        run.event("sampling", temperature=temperature, greedy_first=settings.eval.greedy_first)
    model = settings.llm.for_role("agent").model
    try:
        report = await evaluate(tasks, solver, samples=samples, run_dir=run, concurrency=settings.eval.concurrency,
                                llm=rt.llm, model=model, progress=progress, retry_errors=retry_errors,
                                usage=rt.llm.usage)
    except LLMFatalError as exc:
        run.finish(status="failed", error=str(exc), kind=exc.kind)
        raise LLMFatalError(f"{exc} — eval stopped; continue later with --resume {run.path}", kind=exc.kind,
                            role=exc.role, endpoint=exc.endpoint) from exc
    finally:
        await rt.sessions.close_all()
        await rt.llm.aclose()  # this loop's HTTP connections end with it, not later in the garbage collector
    o = report.overall
    pairs = o.n_tasks * o.samples
    status = batch_status(o.n_errors, pairs)
    run.finish(status=status, pass_at_1=o.pass_at_1, n_tasks=o.n_tasks, errors=o.n_errors)
    return {"status": status, "counts": {"trajectories": pairs, "failed": o.n_errors, "completed": pairs - o.n_errors},
            "run_dir": str(run.path), "report": str(run.path / "report.md"), "llm_faults": report.llm_faults,
            "task_ids": [t.id for t in tasks],
            "overall": o.model_dump(), "by_level": {k: v.model_dump() for k, v in report.by_level.items()}}


def _agent_identity(llm: Any) -> dict[str, Any] | None:
    """What the agent's endpoint is, as the LLM cache identifies it (an embedded model's SHA-256, a GGUF named by path
    included): the record of which weights an eval measured. None when it cannot be told before the first call."""
    from worldsmith.llm.errors import LLMError

    provider = getattr(llm, "provider", None)
    try:
        return provider("agent").cache_identity() if callable(provider) else None
    except LLMError:
        return None  # a misconfigured endpoint fails at its first call, with the error that names the key
