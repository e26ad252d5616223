"""Pictures and tables of a world: the DAG as a PNG (matplotlib + networkx, no graphviz binary)
and the defect ledger as a rich Table. Entry points for a future `worldsmith world show DIR`."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
from rich.table import Table

from .artifacts import LEDGER
from worldsmith.core.world_contract import WorldContract

_PALETTE = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]


def dag(contract: WorldContract) -> nx.DiGraph:
    """Nodes = variables plus pseudo nodes for time and events; edge attribute `mechanism`."""
    g = nx.DiGraph()
    for name, n in contract.nodes().items():
        g.add_node(name, entity=n.entity, kind=n.kind)
    for e in contract.edges:
        nodes = contract.edge_nodes(e)
        for s in nodes[:-1]:
            if s not in g:
                g.add_node(s, entity="@", kind="time")
            g.add_edge(s, e.target, mechanism=e.mechanism.type, id=e.id)
    return g


def _layers(g: nx.DiGraph) -> dict[str, int]:
    layer = {}
    for i, gen in enumerate(nx.topological_generations(g)):
        for n in gen:
            layer[n] = i
    return layer


def render_dag_png(contract: WorldContract, path: str | Path, dpi: int = 120) -> Path:
    """Draw the causal DAG left to right by generation, coloured by entity, edges labelled by mechanism."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = dag(contract)
    layer = _layers(g)
    nx.set_node_attributes(g, layer, "layer")
    pos = nx.multipartite_layout(g, subset_key="layer", align="vertical")
    entities = sorted({d["entity"] for _, d in g.nodes(data=True)})
    colour = {e: ("#DDDDDD" if e == "@" else _PALETTE[i % len(_PALETTE)]) for i, e in enumerate(entities)}
    width = max(8.0, 2.6 * (max(layer.values(), default=0) + 1))
    height = max(5.0, 0.9 * max(sum(1 for v in layer.values() if v == k) for k in set(layer.values()) or {0}))
    fig, ax = plt.subplots(figsize=(width, height))
    nx.draw_networkx_edges(g, pos, ax=ax, arrows=True, arrowsize=14, edge_color="#666666", node_size=1600,
                           connectionstyle="arc3,rad=0.06")
    nx.draw_networkx_nodes(g, pos, ax=ax, node_size=1600, node_color=[colour[g.nodes[n]["entity"]] for n in g],
                           alpha=0.9)
    nx.draw_networkx_labels(g, pos, ax=ax, font_size=7)
    nx.draw_networkx_edge_labels(g, pos, ax=ax, font_size=6,
                                 edge_labels={(a, b): d["mechanism"] for a, b, d in g.edges(data=True)})
    handles = [plt.Line2D([], [], marker="o", ls="", color=colour[e], label=("time/events" if e == "@" else e))
               for e in entities]
    ax.legend(handles=handles, loc="lower right", fontsize=7, frameon=False)
    ax.set_title(f"{contract.title} ({contract.domain.value})", fontsize=10)
    ax.axis("off")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return path


def ledger_table(world_dir: str | Path) -> Table:
    """The defects applied to each observation system (truth: for reviewers, not solvers)."""
    data = json.loads((Path(world_dir) / LEDGER).read_text(encoding="utf-8"))
    t = Table(title=f"Defect ledger: {Path(world_dir).name}")
    for col in ("system", "defect", "columns", "rows", "example", "memo"):
        t.add_column(col, justify="right" if col == "rows" else "left")
    for e in data["entries"]:
        example = f"{e['example_before']} -> {e['example_after']}" if e.get("example_before") is not None else ""
        t.add_row(e["system"], e["defect"], ", ".join(e["columns"]), str(e["rows_affected"]), example,
                  "yes" if e["documented"] else "no")
    return t
