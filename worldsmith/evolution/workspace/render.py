"""Pictures and tables of an exploration graph: a layered drawing (PNG) coloured by status, the verified
findings as rows, and a Markdown section a run report embeds.

The layout is our own (no graphviz here): one layer per depth, nodes within a layer ordered by the mean
position of their parents (the barycentre heuristic), which keeps a tree free of crossings and a compose
node between the workspaces it merges.
"""

from __future__ import annotations

import io
import os
from collections import Counter
from pathlib import Path

from pydantic import BaseModel

from worldsmith.core.store import atomic_write_bytes
from worldsmith.core.workspace_types import Node, NodeStatus, finding_id
from worldsmith.evolution.workspace.graph import ExplorationGraph

STATUS_COLOURS: dict[NodeStatus, str] = {
    "proposed": "#bdbdbd",  # grey: not run yet
    "running": "#64b5f6",  # blue
    "supported": "#43a047",  # green
    "revised": "#fdd835",  # yellow: kept with the validator's corrections
    "unsupported": "#e53935",  # red
    "failed": "#6d4c41",  # brown: the run broke
}
STATUS_ORDER: tuple[NodeStatus, ...] = tuple(STATUS_COLOURS)


class FindingRow(BaseModel):
    """One verified finding as the table shows it."""

    finding: str
    node: int
    depth: int
    mode: str
    status: str
    depends_on: str | None
    statement: str


def layered_layout(nodes: list[Node]) -> dict[int, tuple[float, float]]:
    """Position per node id: y = −depth, x spread 0..n−1 within a layer, layers centred on x = 0, each layer
    ordered by its nodes' mean parent x (ties by id)."""
    layers: dict[int, list[Node]] = {}
    for n in nodes:
        layers.setdefault(n.depth, []).append(n)
    pos: dict[int, tuple[float, float]] = {}
    for depth in sorted(layers):
        def key(n: Node) -> tuple[float, int]:
            xs = [pos[p][0] for p in n.parents if p in pos]
            return (sum(xs) / len(xs) if xs else 0.0, n.id)

        layer = sorted(layers[depth], key=key)
        offset = (len(layer) - 1) / 2
        for i, n in enumerate(layer):
            pos[n.id] = (i - offset, -float(depth))
    return pos


def finding_rows(graph: ExplorationGraph) -> list[FindingRow]:
    """The verified findings (supported and revised nodes that stated one), by node id."""
    return [FindingRow(finding=finding_id(n.id), node=n.id, depth=n.depth, mode=n.mode, status=n.status,
                       depends_on=n.depends_on, statement=n.conclusion)
            for n in graph.nodes() if n.verified and n.conclusion.strip()]


def status_counts(nodes: list[Node]) -> dict[str, int]:
    counts = Counter(n.status for n in nodes)
    return {s: counts[s] for s in STATUS_ORDER if counts[s]}


def headline(nodes: list[Node]) -> str:
    """'12 analysis nodes besides the initial workspace, max depth 3; supported 7, …': the counts a reader matches
    against the verdict mix and the node budget, which never count the initial workspace."""
    analysis = [n for n in nodes if n.mode != "root"]
    counts = ", ".join(f"{s} {c}" for s, c in status_counts(analysis).items()) or "none yet"
    return (f"{len(analysis)} analysis node{'' if len(analysis) == 1 else 's'} besides the initial workspace, "
            f"max depth {max([0, *(n.depth for n in nodes)])}; {counts}")


def draw_graph(graph: ExplorationGraph, out: str | os.PathLike[str], *, title: str | None = None) -> Path:
    """Draw the graph to a PNG at ``out`` (written atomically); an empty graph draws a note saying so."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    nodes = graph.nodes()
    pos = layered_layout(nodes)
    width = max([1, *Counter(n.depth for n in nodes).values()])
    depth = max([0, *(n.depth for n in nodes)])
    fig, ax = plt.subplots(figsize=(min(4 + 1.6 * width, 24), min(2.5 + 1.4 * (depth + 1), 20)))
    try:
        for parent, child in graph.edges():
            (x0, y0), (x1, y1) = pos[parent], pos[child]
            ax.annotate("", xy=(x1, y1 + 0.18), xytext=(x0, y0 - 0.18),
                        arrowprops={"arrowstyle": "->", "color": "#616161", "lw": 1.0})
        for n in nodes:
            x, y = pos[n.id]
            ax.scatter([x], [y], s=900, color=STATUS_COLOURS[n.status], edgecolors="#212121", zorder=3)
            ax.text(x, y, str(n.id), ha="center", va="center", fontsize=9, fontweight="bold", zorder=4)
            ax.text(x, y - 0.3, n.mode, ha="center", va="top", fontsize=7, color="#424242")
        if not nodes:
            ax.text(0.5, 0.5, "no nodes yet", ha="center", va="center", transform=ax.transAxes)
        counts = status_counts(nodes)
        ax.legend(handles=[Line2D([], [], marker="o", linestyle="", markersize=9, color=STATUS_COLOURS[s],
                                  markeredgecolor="#212121", label=f"{s} ({c})") for s, c in counts.items()],
                  loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=8)
        ax.set_title(title or f"exploration graph: {len(nodes)} nodes, depth {depth}", fontsize=10)
        ax.set_xlim(-width / 2 - 0.5, width / 2 + 0.5)
        ax.set_ylim(-depth - 0.7, 0.5)
        ax.axis("off")
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    finally:
        plt.close(fig)
    return atomic_write_bytes(out, buf.getvalue())


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ").strip()


def markdown_section(graph: ExplorationGraph, *, image: str | None = None, heading: str = "## Exploration graph") -> str:
    """A report section: node counts by status, the picture (``image`` relative to the report) and the
    verified findings as a Markdown table."""
    nodes = graph.nodes()
    lines = [heading, "", headline(nodes) + ".", ""]
    if image:
        lines += [f"![exploration graph]({image})", ""]
    rows = finding_rows(graph)
    lines += [f"### Verified findings ({len(rows)})", ""]
    if not rows:
        return "\n".join([*lines, "None yet.", ""])
    lines += ["| finding | node | depth | mode | status | depends on | statement |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r.finding} | {r.node} | {r.depth} | {r.mode} | {r.status} | {_cell(r.depends_on) or '—'} "
              f"| {_cell(r.statement)} |" for r in rows]
    return "\n".join([*lines, ""])
