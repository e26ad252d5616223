"""Deterministic task specs from an audited world (the truth side of world tasks).

Sample a subgraph of the DAG; a *cause* task targets its node with the largest in-degree ("what drives X?"),
a *consequence* task its node with the largest out-degree ("what does X change?"). Only phenomena the audit
recovered from the observed files become answers or rubric items. Expected values come from canonical truth.
LLM agents later phrase the request and add method/presentation items; nothing here needs a model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import networkx as nx
import numpy as np
from pydantic import BaseModel, Field

from worldsmith.core.answer_spec import AnswerFacets, quantity_sentence
from worldsmith.core.schemas import Criterion, Tolerance

from .artifacts import PhenomenonTruth
from .audit import load_contract, load_phenomena_truth, read_audit, recoverable_phenomena
from worldsmith.core.world_contract import WorldContract
from .recipes import recipe_columns


class TaskSpec(BaseModel):
    """Everything a task writer needs about one target; never shown to solvers."""

    world_id: str
    kind: Literal["cause", "consequence"]
    target: str
    target_description: str = ""
    subgraph: list[str] = Field(description="edge ids of the sampled subgraph")
    related: list[str] = Field(description="true parents (cause) or children (consequence) of the target")
    decoys: list[str] = Field(default_factory=list, description="variables that are NOT direct causes/effects")
    confounded: list[tuple[str, str]] = Field(default_factory=list, description="(spurious driver, confounder)")
    directions: dict[str, str] = Field(default_factory=dict, description="related variable -> increases/decreases/changes")
    phenomena: list[PhenomenonTruth] = Field(default_factory=list)


def dag(contract: WorldContract) -> nx.DiGraph:
    g = nx.DiGraph()
    for name in contract.nodes():
        g.add_node(name)
    for e in contract.edges:
        for src in e.sources:
            g.add_edge(src, e.target, id=e.id, mechanism=e.mechanism.type)
    return g


def _direction(contract: WorldContract, src: str, target: str) -> str:
    for e in contract.incoming(target):
        if src in e.sources:
            m = e.mechanism
            coef = getattr(m, "coef", None)
            if getattr(m, "levels", None) or m.type in ("power", "piecewise", "binned"):
                coef = None  # by level, or a shape that can rise then fall: no single direction
            elif coef is None and getattr(m, "jump", None) is not None:
                coef = m.jump * (1 if getattr(m, "direction", "above") == "above" else -1)
            if isinstance(coef, (int, float)) and coef != 0:
                return "increases" if coef > 0 else "decreases"
    return "changes"


def sample_specs(world_dir: str | Path, *, max_tasks: int = 10, seed: int = 0, hops: int = 2,
                 focus: Sequence[str] = ()) -> list[TaskSpec]:
    """Cause and consequence specs over random subgraphs, each grounded in ≥1 recoverable phenomenon.

    ``focus`` (variables a topic asked for, best first) are sampled first and become the target of their own
    subgraph when they have causes (or consequences); the rest follow in seeded random order.
    """
    world_dir = Path(world_dir)
    contract = load_contract(world_dir)
    truth = load_phenomena_truth(world_dir)
    ok = {r.id for r in recoverable_phenomena(read_audit(world_dir))}
    by_var: dict[str, list[PhenomenonTruth]] = {}
    for p in contract.phenomena:
        if p.id in ok and p.id in truth:
            for col in recipe_columns(p.recipe):
                by_var.setdefault(col, []).append(truth[p.id])
    g = dag(contract)
    und = g.to_undirected()
    rng = np.random.default_rng(seed)
    seeds = sorted(v for v in g.nodes if g.degree(v) > 0)
    first = [v for v in dict.fromkeys(focus) if v in seeds]
    specs: dict[tuple[str, str], TaskSpec] = {}
    for start in first + [v for v in rng.permutation(seeds) if v not in first]:
        if len(specs) >= max_tasks:
            break
        nodes = set(nx.single_source_shortest_path_length(und, start, cutoff=hops))
        sub = g.subgraph(nodes)
        for kind in ("cause", "consequence"):
            degree = sub.in_degree if kind == "cause" else sub.out_degree
            target = start if start in first and degree(start) > 0 else max(sorted(nodes), key=lambda v: degree(v))
            if degree(target) == 0 or (kind, target) in specs:
                continue
            related = sorted(sub.predecessors(target) if kind == "cause" else sub.successors(target))
            grounded = _phenomena_for(by_var, target, related)
            if not grounded:
                continue
            specs[(kind, target)] = _spec(contract, world_dir.name, kind, target, related, sub, grounded)
            if len(specs) >= max_tasks:
                break
    return list(specs.values())


def _phenomena_for(by_var: dict[str, list[PhenomenonTruth]], target: str, related: list[str]) -> list[PhenomenonTruth]:
    seen: dict[str, PhenomenonTruth] = {}
    for v in [target, *related]:
        for p in by_var.get(v, []):
            seen.setdefault(p.id, p)
    return list(seen.values())


def _spec(contract: WorldContract, world_id: str, kind: str, target: str, related: list[str], sub: nx.DiGraph,
          grounded: list[PhenomenonTruth]) -> TaskSpec:
    nodes = contract.nodes()
    if kind == "cause":
        decoys = sorted(v for v in sub.nodes if v not in related and v != target and not nx.has_path(sub, target, v))
        confounded = [(c.cause, c.variable) for c in contract.confounders
                      if c.effect == target and c.cause not in related]
        directions = {r: _direction(contract, r, target) for r in related}
    else:
        decoys = sorted(v for v in sub.nodes if v not in related and v != target and not nx.has_path(sub, v, target))
        confounded = []
        directions = {r: _direction(contract, target, r) for r in related}
    return TaskSpec(world_id=world_id, kind=kind, target=target, target_description=nodes[target].description,
                    subgraph=sorted(d["id"] for _, _, d in sub.edges(data=True)), related=related,
                    decoys=decoys[:3], confounded=confounded, directions=directions, phenomena=grounded)


def quantity_phrase(statement_template: str) -> str:
    """'The test arm pays {value:.2f} USD more.' → 'The test arm pays X USD more.' (the value to compute is X)."""
    return re.sub(r"\{value[^}]*\}", "X", statement_template)


def _tol(p: PhenomenonTruth, factor: float = 1.0) -> Tolerance:
    t = p.tolerance.model_dump() if hasattr(p.tolerance, "model_dump") else dict(p.tolerance)
    return Tolerance(abs=(t.get("abs") or 0.0) * factor or None, rel=t.get("rel") or None)


def rubric_items(spec: TaskSpec, contract: WorldContract,
                 facets: dict[str, AnswerFacets] | None = None) -> list[Criterion]:
    """Ground-truth rubric items: computations from canonical values (in the unit the instruction asks for, tied
    to its sentence), directional insights from the DAG, and negative items for conclusions the world contradicts."""
    items: list[Criterion] = []
    templates = {p.id: p.statement for p in contract.phenomena}
    for p in spec.phenomena:
        if not isinstance(p.value, (int, float)):
            continue
        f = (facets or {}).get(p.id)
        if f is None:
            phrase = quantity_phrase(templates.get(p.id, p.statement))
            items.append(Criterion(id=f"comp_{p.id}", section="computation", polarity="+", type="filter",
                                   observable=f"the value X in: {phrase}", satisfy=f"reports X ≈ {p.value:.4g}",
                                   violate="reports a different value or none", expected_value=float(p.value),
                                   tolerance=_tol(p), source="gt", weight=2.0))
            continue
        value = float(p.value) * f.factor
        items.append(Criterion(id=f"comp_{p.id}", section="computation", polarity="+", type="filter",
                               observable=f"the number `{p.id}`: {quantity_sentence(f)}",
                               satisfy=f"reports `{p.id}` ≈ {value:.4g} {f.unit_words}",
                               violate="reports a different value, another quantity or none", expected_value=value,
                               tolerance=_tol(p, f.factor), unit=f.grading_unit, source="gt", weight=2.0))
    verb = "drives" if spec.kind == "cause" else "is affected by"
    for r in spec.related:
        subj, obj = (r, spec.target) if spec.kind == "cause" else (spec.target, r)
        direction = spec.directions.get(r, "changes")
        claim = f"{subj} {direction} {obj}" if direction != "changes" else _level_claim(contract, subj, obj)
        items.append(Criterion(id=f"ins_{r}", section="insight", polarity="+", type="preference",
                               observable=f"whether the report names {r} in relation to {spec.target}",
                               satisfy=f"identifies that {claim}",
                               violate=f"omits {r} or states the opposite direction", source="gt", weight=1.0))
    for spurious, confounder in spec.confounded:
        items.append(Criterion(id=f"neg_conf_{spurious}", section="insight", polarity="-", type="preference",
                               observable=f"claims about {spurious} causing {spec.target}",
                               satisfy=f"concludes that {spurious} causes {spec.target} without accounting for {confounder}",
                               violate=f"treats the {spurious}-{spec.target} association as confounded by {confounder}",
                               source="gt", weight=1.0))
    for d in spec.decoys[:2]:
        rel = f"{d} {verb.replace('drives', 'directly drives')} {spec.target}" if spec.kind == "cause" else \
            f"{spec.target} directly changes {d}"
        items.append(Criterion(id=f"neg_decoy_{d}", section="insight", polarity="-", type="preference",
                               observable=f"claims that {rel}", satisfy=f"asserts that {rel}",
                               violate=f"does not claim that {rel}", source="gt", weight=0.5))
    return items


def _level_claim(contract: WorldContract, src: str, target: str) -> str:
    """A directional claim for a categorical source: which level raises the target most, which least."""
    for e in contract.incoming(target):
        levels = getattr(e.mechanism, "levels", None) if src in e.sources else None
        if levels:  # labels not listed have effect 0
            hi, lo = max(levels.items(), key=lambda kv: kv[1]), min(levels.items(), key=lambda kv: kv[1])
            parts = ([f"highest when {src} is {hi[0]!r}"] if hi[1] > 0 else []) + (
                [f"lowest when {src} is {lo[0]!r}"] if lo[1] < 0 else [])
            if parts:
                return f"{target} is " + " and ".join(parts)
    return f"{src} changes {target} (say in which direction)"


_METHOD_TEXT = {
    "unit_drift": "converts {cols} to a single unit (the recording unit changes part-way through)",
    "duplicates": "removes duplicate records before computing",
    "missing": "handles the missing values in {cols} explicitly",
    "recode": "maps the recoded category labels of {cols} to one coding",
    "rename": "recognises renamed columns ({cols}) as the same variable",
    "split_column": "recombines the split column ({cols})",
    "delay": "accounts for reporting delays in {cols}",
    "unlabeled_fk": "joins the tables through the unlabeled key column ({cols})",
    "id_style": "reconciles identifier spellings across files",
}


def load_ledger(world_dir: str | Path) -> list[dict]:
    """The projection ledger's entries (truth side: never shown to solvers)."""
    import json

    data = json.loads((Path(world_dir) / ".truth" / "ledger.json").read_text(encoding="utf-8"))
    return list(data.get("entries", [])) if isinstance(data, dict) else list(data)


def method_items(spec: TaskSpec, ledger: list[dict], max_items: int = 3,
                 systems: set[str] | None = None) -> list[Criterion]:
    """Method items from the projection ledger: the data problems a correct analysis of these variables must fix.

    `systems`: the systems whose files the task names (`answer_specs.systems_named`); a defect elsewhere is not
    reachable from the task, so no item grades it."""
    relevant = {spec.target, *spec.related}
    items: list[Criterion] = []
    seen: set[str] = set()
    for entry in ledger:
        if systems is not None and entry.get("system") not in systems:
            continue
        cols = [c for c in entry.get("columns", []) if c in relevant] or (
            [] if entry.get("defect") not in ("duplicates", "id_style") else ["rows"])
        text = _METHOD_TEXT.get(entry.get("defect", ""))
        if not cols or text is None:
            continue
        key = f"{entry['defect']}:{','.join(sorted(cols))}"
        if key in seen:
            continue
        seen.add(key)
        items.append(Criterion(id=f"meth_{len(items) + 1}", section="method", polarity="+", type="preference",
                               observable=f"how the analysis treats {entry['system']} data",
                               satisfy=text.format(cols=", ".join(cols)), violate="ignores this data problem",
                               source="gt", weight=0.5))
        if len(items) >= max_items:
            break
    return items
