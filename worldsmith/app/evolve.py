"""Workspace evolution as the CLI, router, UI and server use it.

Now: :func:`show_run` (the exploration graph's picture, counts and verified findings). The evolution run
itself (`evolve DATA_DIR`) and backward task synthesis (`evolve tasks RUN`) are added here as
``run_evolution`` / ``synthesize_tasks`` on top of the store, the graph and the agents.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

from worldsmith.evolution.workspace.graph import ExplorationGraph
from worldsmith.evolution.workspace.render import (
    FindingRow,
    draw_graph,
    finding_rows,
    markdown_section,
    status_counts,
)
from worldsmith.evolution.workspace.store import WORKSPACE_DIRNAME

#: Where `show` draws the graph when no --out is given (inside the run directory, next to report.md).
GRAPH_IMAGE = "exploration_graph.png"


class EvolveView(BaseModel):
    """What `evolve show` reports about one run."""

    run: str
    nodes: int
    max_depth: int
    status_counts: dict[str, int]
    findings: list[FindingRow]
    image: str | None
    markdown: str


def open_graph(run: str | os.PathLike[str]) -> ExplorationGraph:
    """The exploration graph of a run directory (or of its ``workspace/`` folder); a clear error otherwise."""
    run = Path(run)
    for db in (run / WORKSPACE_DIRNAME / "graph.sqlite", run / "graph.sqlite"):
        if db.is_file():
            return ExplorationGraph(db)
    if not run.is_dir():
        raise FileNotFoundError(f"{run}: no such run directory")
    raise FileNotFoundError(f"{run}: no exploration graph ({WORKSPACE_DIRNAME}/graph.sqlite); "
                            "give the folder of an evolution run")


def show_run(run: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *, draw: bool = True) -> EvolveView:
    """Draw a run's exploration graph (to ``out``, default ``RUN/exploration_graph.png``) and collect its
    verified findings and a Markdown section for the run report."""
    graph = open_graph(run)
    nodes = graph.nodes()
    image = None
    if draw:
        target = Path(out) if out is not None else Path(run) / GRAPH_IMAGE
        image = str(draw_graph(graph, target))
    md_image = None
    if image is not None:
        md_image = os.path.relpath(image, Path(run)) if out is None else image
    return EvolveView(run=str(run), nodes=len(nodes), max_depth=max([0, *(n.depth for n in nodes)]),
                      status_counts=status_counts(nodes), findings=finding_rows(graph), image=image,
                      markdown=markdown_section(graph, image=md_image))
