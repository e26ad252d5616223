"""Coherent worlds: the contract's plausibility rules and entity lifetimes, checked twice.

`check_plausibility` runs with contract validation (a rule the edges already break is an error with its path);
`coherence_problems` runs on the generated canonical state, before any file is written, and `build_world` refuses
a world that breaks one (`IncoherentWorld`), so an implausible world never reaches a task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import networkx as nx
import numpy as np
import pandas as pd

from worldsmith.core.world_coherence import Follows, Unmoved
from worldsmith.core.world_contract import WorldContract
from .problems import Problems

if TYPE_CHECKING:
    from .engine import CanonicalState


class IncoherentWorld(ValueError):
    """A generated world breaks a plausibility rule or an entity lifetime; carries every problem."""

    def __init__(self, world_id: str, problems: list[str]):
        self.problems = problems
        super().__init__(f"world {world_id} is not coherent:\n" + "\n".join(f"  - {p}" for p in problems))


def check_plausibility(c: WorldContract, p: Problems) -> None:
    """Static checks: entity lifetimes are well formed and no edge contradicts a declared rule."""
    from .validate import edge_graph

    nodes = c.nodes()
    for i, e in enumerate(c.entities):
        if e.ends_with is None:
            continue
        path = f"entities[{i}].ends_with"
        flag = nodes.get(e.ends_with)
        if e.kind != "event" or e.parent is None:
            p.add("ends_with", path, f"{e.name} is a {e.kind} entity without a dated parent link",
                  "use ends_with on an event entity with a parent")
        elif flag is None or flag.entity != e.parent or flag.kind != "binary":
            p.add("ends_with", path, f"{e.ends_with!r} is not a binary variable of {e.parent}",
                  f"name a binary variable of {e.parent} (e.g. churned)")
        if any(x.parent == e.name for x in c.entities):
            p.add("ends_with", path, f"{e.name} has child entities, whose rows would outlive it",
                  "put ends_with on a leaf entity")
        if e.end_column in nodes:
            p.add("ends_with", path, f"the end-date column {e.end_column!r} clashes with a variable", "rename it")
    g = edge_graph(c)
    for i, e in enumerate(c.entities):  # an aggregate over rows that end with a flag cannot also cause that flag
        if e.ends_with is None or e.ends_with not in g:
            continue
        for name in nx.ancestors(g, e.ends_with):
            d = getattr(nodes.get(name), "derive", None)
            if d is not None and d.op == "aggregate" and d.of in nodes and nodes[d.of].entity == e.name:
                p.add("ends_with", f"entities[{i}].ends_with", f"{name!r} aggregates {e.name} rows, which end with "
                      f"{e.ends_with!r}, and also causes {e.ends_with!r}: a cycle",
                      f"aggregate a variable of another entity, or drop the path from {name!r} to {e.ends_with!r}")
    for i, r in enumerate(c.plausibility):
        path = f"plausibility[{i}]"
        named = [r.variable, r.by] if isinstance(r, Unmoved) else [r.target, *r.sources]
        if unknown := [n for n in named if n not in nodes]:
            p.add("unknown_variable", path, f"unknown variables {unknown}", f"declared: {sorted(nodes)}")
            continue
        if isinstance(r, Unmoved):
            cats = getattr(nodes[r.by].distribution, "categories", None)
            if nodes[r.by].kind != "categorical" or r.level not in (cats or []):
                p.add("implausible", path, f"{r.level!r} is not a label of the categorical {r.by}",
                      f"labels: {cats}")
                continue
            for why in _moves(c, r):
                p.add("implausible", path, f"the {r.level!r} arm of {r.by} must not move {r.variable}, but {why}",
                      f"give {r.level!r} no effect (levels 0 / multiplier 0)")
        else:
            for s in r.sources:
                if not nx.has_path(g, s, r.target):
                    p.add("implausible", path, f"{r.target} must follow {s}, but no edge path leads from {s} to it",
                          f"add an edge from {s} towards {r.target}")


def _moves(c: WorldContract, r: Unmoved) -> list[str]:
    """Edges into `r.variable` that give the `r.level` arm of `r.by` an effect."""
    out = []
    for e in c.incoming(r.variable):
        levels = getattr(e.mechanism, "levels", None) or {}
        if r.by in e.sources and float(levels.get(r.level, 0.0)) != 0.0:
            out.append(f"edge {e.id} gives it {levels[r.level]:+g}")
        h = e.heterogeneity
        if h is not None and h.by == r.by and r.by not in e.sources and float(h.multipliers.get(r.level, 1.0)) != 0:
            out.append(f"edge {e.id} ({e.mechanism.type}) applies to it with multiplier "
                       f"{h.multipliers.get(r.level, 1.0):g}")
    return out


def coherence_problems(state: CanonicalState) -> list[str]:
    """Checks on the canonical state: no row outlives its parent's end, each `follows` slope is positive."""
    c = state.contract
    out: list[str] = []
    for e in c.entities:
        if e.ends_with is None:
            continue
        parent = c.entity(str(e.parent))
        child, owner = state.tables[e.name], state.tables[parent.name]
        end = owner.set_index(parent.key)[str(e.end_column)]
        late = child[str(e.time_column)] > child[str(parent.key)].map(end)
        if late.any():
            out.append(f"{int(late.sum())} {e.name} row(s) are dated after their {parent.name}'s end "
                       f"({e.end_column}), e.g. {child.loc[late].iloc[0].to_dict()}")
    for r in c.plausibility:
        if isinstance(r, Follows):
            out += _follows(state, r)
    return out


def _follows(state: CanonicalState, r: Follows) -> list[str]:
    c = state.contract
    numeric = [s for s in r.sources if c.node(s).kind in ("numeric", "count", "binary")]
    wide = state.wide(c.node(r.target).entity, [r.target, *numeric]).dropna()
    if len(wide) <= len(numeric) + 1:
        return [f"{r.target} cannot be checked against {numeric}: {len(wide)} complete rows"]
    x = np.column_stack([np.ones(len(wide)), *(pd.to_numeric(wide[s]).to_numpy(float) for s in numeric)])
    coef = np.linalg.lstsq(x, pd.to_numeric(wide[r.target]).to_numpy(float), rcond=None)[0][1:]
    return [f"{r.target} does not follow {s}: its slope on {s}, the others held fixed, is {b:.4g}"
            for s, b in zip(numeric, coef) if not b > 0]
