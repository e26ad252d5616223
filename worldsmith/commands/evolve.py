"""`worldsmith evolve …`: verified workspace evolution.

    worldsmith evolve DATA_DIR [--steps N --max-depth D ...]   evolve a folder (a world folder: its data room,
                                                               scored against the world's truth)
    worldsmith evolve --sample commercial_growth               the sample workspace: a world's data room
    worldsmith evolve --resume RUN                             continue a killed run where it stopped
    worldsmith evolve tasks RUN [--n N --samples S]            backward task synthesis from a run
    worldsmith evolve show RUN [--out graph.png] [--json]      draw the exploration graph, list verified findings

The group sends a first word that names no sub-command (a data folder, or --resume) to ``run``, so
`evolve ./data` and `evolve run ./data` are the same. Services: ``worldsmith/app/evolve.py``, ``evolve_tasks.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import click
import typer
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from worldsmith.commands.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    console,
    emit_json,
    fail,
    friendly_errors,
    runtime,
)

DEFAULT_COMMAND = "run"


class DefaultCommandGroup(TyperGroup):
    """A group whose first argument, when it names no sub-command (a data folder), goes to ``run``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        first = args[0] if args else ""
        if args and first not in self.commands and DEFAULT_COMMAND in self.commands and (
                not first.startswith("-") or first.split("=")[0] in ("--resume", "--sample")):
            args = [DEFAULT_COMMAND, *args]
        return super().parse_args(ctx, args)


app = typer.Typer(cls=DefaultCommandGroup, no_args_is_help=True,
                  help="Verified workspace evolution: explore a data folder, inspect the exploration graph.")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="evolve")


@app.command("show")
def show_cmd(
    run: Annotated[Path, typer.Argument(help="An evolution run directory (holding workspace/graph.sqlite).")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="PNG to draw the graph to (default: RUN/exploration_graph.png).")] = None,
    no_image: Annotated[bool, typer.Option("--no-image", help="List the findings only; draw nothing.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Draw a run's exploration graph coloured by node status and list its verified findings."""
    from worldsmith.app.evolve import show_run

    try:
        view = show_run(run, out, draw=not no_image)
    except FileNotFoundError as exc:
        fail(str(exc), code=2)
    if json_out:
        emit_json(view.model_dump(mode="json"))
        return
    console.print(f"{escape(view.run)}: {view.headline}", highlight=False)
    if view.image:
        console.print(f"graph: {escape(view.image)}", highlight=False)
    table = Table(title=f"verified findings ({len(view.findings)})", show_lines=False)
    for col in ("finding", "node", "depth", "mode", "status", "depends on", "statement"):
        table.add_column(col, overflow="fold")
    for r in view.findings:
        table.add_row(r.finding, str(r.node), str(r.depth), r.mode, r.status, r.depends_on or "—", escape(r.statement))
    console.print(table)


def _render(event: dict) -> None:
    kind = event.get("type")
    if kind == "setup":
        console.print(f"[cyan]setup[/] root node {event['root']}: {escape(event['overview'])}", highlight=False)
    elif kind == "plan":
        for item in event.get("items", []):
            console.print(f"[cyan]round {event['step']}[/] {item['mode']}: {escape(item['question'])}", highlight=False)
        if not event.get("items"):
            console.print(f"[yellow]round {event['step']}[/] planned nothing: "
                          f"{escape('; '.join(event.get('errors', [])) or 'no usable decision')}", highlight=False)
    elif kind == "node":
        colour = {"supported": "green", "revised": "yellow"}.get(event["status"], "red")
        console.print(f"  node {event['node']} ({event['mode']}): [{colour}]{event['status']}[/]", highlight=False)
    elif kind == "agent":
        where = f" node {event['node']}" if "node" in event else ""
        if event["phase"] == "start":
            console.print(f"  [dim]{event['agent']}{where} working…[/]", highlight=False)
        else:
            state = "ok" if event.get("ok") else "no result"
            console.print(f"  [dim]{event['agent']}{where}: {state} in {event['s']:.0f} s, {event['tokens']} tokens[/]",
                          highlight=False)
    elif kind == "stop":
        console.print(f"[cyan]stop[/] {escape(event['reason'])}", highlight=False)
    elif kind == "task":
        console.print(f"  task from node {event['node']}: {event['status']} "
                      f"{escape(event.get('task') or event.get('reason', ''))}", highlight=False)


@app.command("run")
def run_cmd(
    data_dir: Annotated[Path | None, typer.Argument(help="The data folder to evolve (a world folder: its data room, "
                                                        "scored against the world's canonical truth).")] = None,
    steps: Annotated[int, typer.Option(help="Director rounds.")] = 3,
    max_depth: Annotated[int, typer.Option(help="Deepest node (the root is depth 0).")] = 3,
    max_nodes: Annotated[int, typer.Option(help="Most nodes besides the root.")] = 12,
    review_rounds: Annotated[int, typer.Option(help="Executor → validator rounds per node.")] = 2,
    max_tokens: Annotated[int, typer.Option(help="Token budget of the whole run.")] = 2_000_000,
    directions: Annotated[int, typer.Option(help="Directions per expansion (k).")] = 2,
    concurrency: Annotated[int, typer.Option(help="Independent branches run at once.")] = 2,
    docs: Annotated[Path | None, typer.Option(help="A folder of documents (.md/.txt/.pdf) for search mode.")] = None,
    tasks: Annotated[int, typer.Option(help="Then synthesise up to this many tasks (0: none).")] = 0,
    samples: Annotated[int, typer.Option(help="Teacher trajectories per task for rejection sampling.")] = 2,
    resume: Annotated[Path | None, typer.Option(help="Continue the run in this run directory.")] = None,
    sample: Annotated[str | None, typer.Option(help="Evolve the sample workspace instead: a world's data room built "
                                                    "from this domain's template (e.g. commercial_growth), scored "
                                                    "against its truth.")] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory to create (default: a stamped one under runs/).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable summary.")] = False,
) -> None:
    """Evolve a data folder: profile → director → proposer → executor ⇄ validator → commit/discard → memory."""
    import asyncio

    from worldsmith.app.evolve import run_evolution
    from worldsmith.app.evolve_tasks import synthesize_tasks
    from worldsmith.core.evolution_schemas import EvolveBudget, EvolveConfig
    from worldsmith.core.store import ArtifactError
    from worldsmith.llm import LLMError

    if sum(x is not None for x in (data_dir, resume, sample)) != 1:
        fail("give the data folder DATA_DIR, --sample DOMAIN or --resume RUN (exactly one)", code=EXIT_USAGE)
    for label, folder in (("data folder", data_dir), ("run directory", resume), ("documents folder", docs)):
        if folder is not None and not folder.is_dir():
            fail(f"{folder}: no such {label}", code=EXIT_USAGE)
    try:
        config = EvolveConfig(budget=EvolveBudget(steps=steps, max_depth=max_depth, max_nodes=max_nodes,
                                                  review_rounds=review_rounds, max_tokens=max_tokens),
                              directions=directions, concurrency=concurrency, docs=str(docs) if docs else None)
    except ValueError as exc:
        fail(f"bad option: {exc}", code=EXIT_USAGE)
    printer = None if json_out else _render

    async def go() -> tuple:
        rt = runtime()
        folder = data_dir
        if sample is not None:
            from worldsmith.app.evolve import sample_world

            folder = await asyncio.to_thread(sample_world, rt.settings.runs_dir, sample)
        run, summary = await run_evolution(rt, folder, config=config, resume=resume, out=out, on_event=printer)
        made = await synthesize_tasks(rt, run.path, n=tasks, samples=samples, on_event=printer) if tasks else None
        return run, summary, made

    with friendly_errors(LLMError, ValueError, OSError, ArtifactError, KeyError):
        run, summary, made = asyncio.run(go())
    failed = bool(summary.nodes) and not summary.verified  # nodes ran, none verified: red here, exit status 1 below
    if json_out:
        emit_json({"run_dir": str(run.path), "summary": summary.model_dump(mode="json"),
                   "tasks": made.model_dump(mode="json") if made else None})
    else:
        truth = ""
        if summary.truth is not None and summary.truth.precision is not None:
            truth = f"; precision {summary.truth.precision:.0%}, recall {summary.truth.recall or 0:.0%}"
        colour = "red" if failed else "green"
        console.print(f"[{colour}]{summary.nodes} nodes, {summary.verified} verified[/]{truth}; "
                      f"report: {run.path / 'report.md'}", highlight=False)
    if failed:
        raise typer.Exit(EXIT_FAILED)


@app.command("tasks")
def tasks_cmd(
    run: Annotated[Path, typer.Argument(help="An evolution run directory.")],
    n: Annotated[int, typer.Option("--n", help="Most tasks to synthesise.")] = 6,
    samples: Annotated[int, typer.Option(help="Teacher trajectories per task for rejection sampling (0: none).")] = 2,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable summary.")] = False,
) -> None:
    """Backward task synthesis: packaged tasks (Harbor layout) from the run's verified nodes, in RUN/tasks."""
    import asyncio

    from worldsmith.app.evolve_tasks import REPORT_FILE, synthesize_tasks
    from worldsmith.core.store import ArtifactError
    from worldsmith.llm import LLMError

    async def go():
        return await synthesize_tasks(runtime(), run, n=n, samples=samples, on_event=None if json_out else _render)

    with friendly_errors(LLMError, ValueError, OSError, ArtifactError):
        summary = asyncio.run(go())
    written = [o for o in summary.outcomes if o.status == "written"]
    failed = bool(summary.outcomes) and not written  # every target dropped: red here, exit status 1 below
    if json_out:
        emit_json(summary.model_dump(mode="json"))
    else:
        rates = ", ".join(f"depth {d}: {r:.0%}" for d, r in summary.pass_rate_by_depth.items()) or "not sampled"
        console.print(f"[{'red' if failed else 'green'}]{len(written)} tasks[/] in {escape(summary.tasks_dir)} "
                      f"({len(summary.outcomes) - len(written)} dropped); kept trajectories "
                      f"{summary.kept_trajectories}; pass rate {rates}", highlight=False)
        console.print(f"report: {escape(str(Path(summary.tasks_dir) / REPORT_FILE))}", highlight=False)
        for node, earlier in summary.restated.items():
            console.print(f"  node {node}: no task, its finding restates the numbers of node"
                          f"{'s' if len(earlier) > 1 else ''} {', '.join(map(str, earlier))}", highlight=False)
    if failed:  # a script reading --json learns it from the exit status too
        raise typer.Exit(EXIT_FAILED)
