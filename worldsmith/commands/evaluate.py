"""`worldsmith eval --tasks PATH`: solve tasks with the analyst, grade, report pass@1 / pass@k."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from worldsmith.commands.common import EXIT_USAGE, console, emit_json, fail, friendly_errors, runtime


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_cmd)


def load_tasks(path: Path, *, limit: int | None = None, ids: list[str] | None = None, split: str | None = None) -> list:
    """Tasks from a collection (index.jsonl), one task package (task.json) or a DABench-format folder."""
    from worldsmith.core.taskpkg import TaskCollection, read_task_package
    from worldsmith.training.dabench import load_dabench

    if (path / "questions.jsonl").is_file():
        tasks = load_dabench(path, ids=ids, limit=limit)
    elif (path / "index.jsonl").is_file():
        tasks = TaskCollection(path).tasks(split)
        if ids:
            tasks = [t for t in tasks if t.id in set(ids)]
        tasks = tasks[:limit] if limit else tasks
    elif (path / "task.json").is_file():
        tasks = [read_task_package(path)]
    else:
        raise FileNotFoundError(f"{path}: not a task collection (index.jsonl), a task package (task.json) "
                                "or a DABench-format folder (questions.jsonl)")
    if not tasks:
        raise ValueError(f"{path}: no tasks selected")
    return tasks


async def evaluate_path(rt: Any, path: Path, *, samples: int | None = None, limit: int | None = None,
                        ids: list[str] | None = None, split: str | None = None, run_path: Path | None = None,
                        show_progress: bool = False) -> dict[str, Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from worldsmith.core.runs import RunDir
    from worldsmith.graphs.solve import TaskSolver
    from worldsmith.training.evaluate import evaluate

    settings = rt.settings
    samples = samples or settings.eval.samples
    tasks = load_tasks(path, limit=limit, ids=ids, split=split)
    run = RunDir.open(run_path) if run_path else RunDir.create("eval", settings.runs_dir, config=settings.masked())
    run.event("eval_request", tasks=str(path), n_tasks=len(tasks), samples=samples)
    temperature = settings.eval.temperature_when_sampling if samples > 1 else None
    solver = TaskSolver(rt, temperature=temperature)
    model = settings.llm.for_role("agent").model
    progress = Progress(TextColumn("[bold]eval[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console, disable=not show_progress or not console.is_terminal)
    bar = progress.add_task("eval", total=len(tasks) * samples)
    started = time.monotonic()

    def on_progress(done: int, total: int) -> None:
        if show_progress and not console.is_terminal:  # a log file or a pipe gets a line per trajectory, not a bar
            console.print(f"eval {done}/{total} trajectories, {(time.monotonic() - started) / 60:.1f} min",
                          highlight=False)
        progress.update(bar, completed=done, total=total)

    with progress:
        report = await evaluate(tasks, solver, samples=samples, run_dir=run, concurrency=settings.eval.concurrency,
                                llm=rt.llm, model=model, progress=on_progress)
    await rt.sessions.close_all()
    o = report.overall
    run.finish(status="ok", pass_at_1=o.pass_at_1, n_tasks=o.n_tasks)
    return {"status": "ok", "run_dir": str(run.path), "report": str(run.path / "report.md"),
            "overall": o.model_dump(), "by_level": {k: v.model_dump() for k, v in report.by_level.items()}}


def eval_cmd(tasks: Annotated[Path, typer.Option("--tasks", help="Collection, task package, or DABench-format folder.")],
             samples: Annotated[Optional[int], typer.Option(help="Trajectories per task (pass@1 = mean over them).")] = None,
             limit: Annotated[Optional[int], typer.Option(help="Only the first N tasks.")] = None,
             ids: Annotated[Optional[list[str]], typer.Option("--id", help="Only these task ids (repeatable).")] = None,
             split: Annotated[Optional[str], typer.Option(help="Collection split to use (train/test/dev).")] = None,
             resume: Annotated[Optional[Path], typer.Option(help="Continue an earlier eval run directory.")] = None,
             json_out: Annotated[bool, typer.Option("--json", help="Machine-readable summary.")] = False) -> None:
    """Evaluate the analyst: every trajectory is saved; the report has pass@1, pass@k, per level and category."""
    from worldsmith.llm import LLMError
    from worldsmith.training.dabench import DABenchError

    if not tasks.exists():
        fail(f"{tasks}: no such folder", code=EXIT_USAGE)
    if samples is not None and samples < 1:
        fail("--samples must be at least 1", code=EXIT_USAGE)
    rt = runtime()
    with friendly_errors(LLMError, DABenchError, FileNotFoundError, ValueError):
        result = asyncio.run(evaluate_path(rt, tasks, samples=samples, limit=limit, ids=ids, split=split,
                                           run_path=resume, show_progress=not json_out))
    if json_out:
        emit_json(result)
        return
    o = result["overall"]
    console.print(f"[bold]pass@1 {o['pass_at_1']:.1%}[/] over {o['n_tasks']} tasks × {o['samples']} sample(s); "
                  f"by question {o['accuracy_by_question']:.1%}, by sub-question {o['accuracy_by_sub_question']:.1%}, "
                  f"proportional {o['proportional_accuracy']:.1%}; errors {o['n_errors']}")
    for level, m in sorted(result["by_level"].items()):
        console.print(f"  {level:<8} pass@1 {m['pass_at_1']:.1%} ({m['n_tasks']} tasks)")
    console.print(f"[dim]report: {result['report']}[/]")
