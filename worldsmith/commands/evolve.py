"""`worldsmith evolve …`: verified workspace evolution.

    worldsmith evolve show RUN [--out graph.png] [--json]   draw the exploration graph, list verified findings

Hooks for the evolution run itself: add ``@app.command("run")`` here and `worldsmith evolve DATA_DIR` reaches it
(the group sends a first word that names no sub-command to ``run``, so `evolve ./data` and `evolve run ./data`
are the same); add ``@app.command("tasks")`` for `evolve tasks RUN`. Both call services in
``worldsmith/app/evolve.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import click
import typer
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from worldsmith.commands.common import console, emit_json, fail

DEFAULT_COMMAND = "run"


class DefaultCommandGroup(TyperGroup):
    """A group whose first argument, when it names no sub-command (a data folder), goes to ``run``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and not args[0].startswith("-") and args[0] not in self.commands and DEFAULT_COMMAND in self.commands:
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
    counts = ", ".join(f"{s} {c}" for s, c in view.status_counts.items()) or "no nodes"
    console.print(f"{escape(view.run)}: {view.nodes} nodes, max depth {view.max_depth} ({counts})", highlight=False)
    if view.image:
        console.print(f"graph: {escape(view.image)}", highlight=False)
    table = Table(title=f"verified findings ({len(view.findings)})", show_lines=False)
    for col in ("finding", "node", "depth", "mode", "status", "depends on", "statement"):
        table.add_column(col, overflow="fold")
    for r in view.findings:
        table.add_row(r.finding, str(r.node), str(r.depth), r.mode, r.status, r.depends_on or "—", escape(r.statement))
    console.print(table)
