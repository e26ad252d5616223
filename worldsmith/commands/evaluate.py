"""`worldsmith eval --tasks PATH`: solve tasks with the analyst, grade, report pass@1 / pass@k (the service is
worldsmith.app.eval; this module parses flags, shows progress and prints the summary)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from worldsmith.commands.common import EXIT_FAILED, EXIT_USAGE, console, emit_json, fail, friendly_errors, runtime


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_cmd)
    app.command("compare")(compare_cmd)


def progress_reporter(show: bool) -> tuple[Progress, Callable[[int, int], None]]:
    """A rich bar on a terminal, a line per finished trajectory in a log file or pipe, nothing when not `show`."""
    progress = Progress(TextColumn("[bold]eval[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console, disable=not show or not console.is_terminal)
    bar = progress.add_task("eval", total=None)
    started = time.monotonic()

    def on_progress(done: int, total: int) -> None:
        if show and not console.is_terminal:
            console.print(f"eval {done}/{total} trajectories, {(time.monotonic() - started) / 60:.1f} min",
                          highlight=False)
        progress.update(bar, completed=done, total=total)

    return progress, on_progress


def eval_cmd(tasks: Annotated[Path, typer.Option("--tasks", help="Collection, task list (tasks.jsonl), task package, or DABench-format folder.")],
             samples: Annotated[Optional[int], typer.Option(help="Trajectories per task (pass@1 = mean over them).")] = None,
             limit: Annotated[Optional[int], typer.Option(help="Only the first N tasks.")] = None,
             ids: Annotated[Optional[list[str]], typer.Option("--id", help="Only these task ids (repeatable).")] = None,
             split: Annotated[Optional[str], typer.Option(help="Collection split to use (train/test/dev).")] = None,
             resume: Annotated[Optional[Path], typer.Option(help="Continue an earlier eval run directory.")] = None,
             retry_errors: Annotated[Optional[bool], typer.Option(
                 "--retry-errors/--keep-errors",
                 help="With --resume: solve again the items that failed on an LLM or sandbox error (default: the "
                      "eval.retry_errors setting).")] = None,
             json_out: Annotated[bool, typer.Option("--json", help="Machine-readable summary.")] = False) -> None:
    """Evaluate the analyst: every trajectory is saved; the report has pass@1, pass@k, per level and category.

    Exit 0 when at least one trajectory completed (status ok or partial), 1 when every one failed or the run was
    stopped (the API key was rejected or the endpoint is unreachable), 2 for bad usage."""
    from worldsmith.app.eval import evaluate_path
    from worldsmith.llm import LLMError
    from worldsmith.llm.errors import LLMFatalError
    from worldsmith.training.dabench import DABenchError

    if not tasks.exists():
        fail(f"{tasks}: no such folder", code=EXIT_USAGE)
    if samples is not None and samples < 1:
        fail("--samples must be at least 1", code=EXIT_USAGE)
    rt = runtime()
    progress, on_progress = progress_reporter(show=not json_out)
    with friendly_errors(LLMError, DABenchError, FileNotFoundError, ValueError), progress:
        try:
            result = asyncio.run(evaluate_path(rt, tasks, samples=samples, limit=limit, ids=ids, split=split,
                                               run_path=resume, progress=on_progress, retry_errors=retry_errors))
        except LLMFatalError as exc:
            if not json_out:
                raise
            # a script reads one JSON object either way: the run stopped (key rejected, endpoint unreachable)
            emit_json({"status": "failed", "stopped": True, "error": str(exc), "kind": exc.kind})
            raise typer.Exit(EXIT_FAILED) from None
    if json_out:
        emit_json(result)
    else:
        print_summary(result)
    if result["status"] == "failed":
        raise typer.Exit(EXIT_FAILED)


def print_summary(result: dict) -> None:
    from worldsmith.training.metrics import format_kinds

    o, counts = result["overall"], result["counts"]
    if result["status"] != "ok":
        style = "red" if result["status"] == "failed" else "yellow"
        console.print(f"[bold {style}]{result['status']}:[/] {counts['failed']} of {counts['trajectories']} "
                      "trajectories failed with an error (see the report's Errors section)", highlight=False)
    console.print(f"[bold]pass@1 {o['pass_at_1']:.1%}[/] over {o['n_tasks']} tasks × {o['samples']} sample(s); "
                  f"by question {o['accuracy_by_question']:.1%}, by sub-question {o['accuracy_by_sub_question']:.1%}, "
                  f"proportional {o['proportional_accuracy']:.1%}; errors {o['n_errors']}")
    if o.get("guards") or o.get("n_unsupported"):
        fired = ", ".join(f"{kind} {t['fired']} (re-asked {t['reasked']})" for kind, t in o.get("guards", {}).items())
        console.print(f"  answer guards: {fired or 'none fired'}; unsupported answers {o.get('n_unsupported', 0)}",
                      highlight=False)
    for role, f in sorted(result.get("llm_faults", {}).items()):
        parts = [f"retried {format_kinds(f.get('retried', {}), 'none')}",
                 f"gave up {format_kinds(f.get('failed', {}), 'none')}"]
        if f.get("empty_completions"):
            parts.append(f"{f['empty_completions']} empty completion(s)")
        console.print(f"  llm faults, role {role}: " + "; ".join(parts), highlight=False)
    for level, m in sorted(result["by_level"].items()):
        console.print(f"  {level:<8} pass@1 {m['pass_at_1']:.1%} ({m['n_tasks']} tasks)")
    console.print(f"[dim]report: {result['report']}[/]")


def compare_cmd(before: Annotated[Path, typer.Argument(help="The eval run directory (or benchmark summary JSON) before, e.g. the base student's.")],
                after: Annotated[Path, typer.Argument(help="The one after, on the same task set, e.g. the trained student's.")],
                tasks: Annotated[Optional[Path], typer.Option(help="The task set, for a run that stopped before its end (default: the one it names).")] = None,
                alpha: Annotated[float, typer.Option(help="Significance level of the verdict.")] = 0.05,
                json_out: Annotated[bool, typer.Option("--json", help="Machine-readable result.")] = False) -> None:
    """Before and after on the same questions: solved counts, the questions gained and lost, and an exact McNemar
    test of whether the change is beyond chance (paired, so the question draw cancels out).

    Exit 0 when compared, 1 when a path is no eval run or the runs share no question, 2 for bad usage."""
    from worldsmith.training.bench_summary import load_summary, paired_comparison, paired_text

    if not 0 < alpha < 1:
        fail(f"--alpha must lie between 0 and 1, got {alpha}", code=EXIT_USAGE)
    with friendly_errors(FileNotFoundError, ValueError):
        result = paired_comparison(load_summary(before, tasks), load_summary(after, tasks))
    if json_out:
        emit_json(result)
        return
    console.print(paired_text(result, alpha=alpha), highlight=False, soft_wrap=True)
