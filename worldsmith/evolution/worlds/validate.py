"""Semantic validation of a world contract: every problem, each with a path and a fix.

`validate_contract` never stops at the first problem: the full list is what a contract-writing
agent is shown. Checks on observation systems and phenomena live in `validate_io`.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import networkx as nx

from worldsmith.core.world_contract import Entity, NodeInfo, WorldContract
from worldsmith.core.world_contract_types import SOURCELESS
from .problems import ContractError, ContractProblem, Problems, as_data, problems_from_validation_error
from .validate_mechanisms import (check_calendars, check_derived, check_fixed, check_moderators, check_relinks,
                                  check_shape, dependency_edges)

RESERVED = {"date", "period"}
_DIST_KINDS = {"normal": "numeric", "lognormal": "numeric", "uniform": "numeric", "categorical": "categorical",
               "poisson": "count", "bernoulli": "binary", "person_name": "text", "fixed": "numeric"}
_ONE_SOURCE = ("linear", "logistic", "multiplicative", "threshold", "saturating", "lag")


def validate_contract(c: WorldContract) -> list[ContractProblem]:
    """Every semantic problem of a structurally valid contract (errors and warnings)."""
    from .coherence import check_plausibility
    from .validate_claims import check_clipping, check_observability, check_power
    from .validate_effects import check_claims
    from .validate_io import check_invariants, check_phenomena, check_systems

    p = Problems()
    nodes = c.nodes()
    sections = [("names", lambda: _check_names(c, p)), ("timeline", lambda: _check_timeline(c, p)),
                ("entities", lambda: _check_entities(c, p)), ("variables", lambda: _check_nodes(c, nodes, p)),
                ("edges", lambda: _check_edges(c, nodes, p)), ("edges", lambda: _check_dag(c, p)),
                ("events", lambda: _check_events_confounders(c, nodes, p)),
                ("calendars", lambda: check_calendars(c, p)), ("entities", lambda: check_fixed(c, p)),
                ("entities", lambda: check_relinks(c, p)),
                ("variables", lambda: check_derived(c, nodes, p)),
                ("invariants", lambda: check_invariants(c, nodes, p)), ("systems", lambda: check_systems(c, nodes, p)),
                ("phenomena", lambda: check_phenomena(c, nodes, p)),
                ("claims", lambda: check_claims(c, nodes, p)),
                ("observability", lambda: check_observability(c, p)),
                ("bounds", lambda: check_clipping(c, nodes, p)), ("edges", lambda: check_power(c, nodes, p)),
                ("plausibility", lambda: check_plausibility(c, p))]
    for where, run in sections:
        try:
            run()
        except (KeyError, ValueError, AttributeError, TypeError, IndexError) as err:
            # a name problem reported above can make later checks impossible; say so instead of crashing
            p.add("unchecked", where, f"checks of {where} stopped early ({err})", "fix the problems above first")
    return p.items


def parse_contract(data: Any) -> tuple[WorldContract | None, list[ContractProblem]]:
    """Parse JSON/dict into a contract; schema errors and semantic problems come back as one list."""
    from pydantic import ValidationError

    try:
        c = WorldContract.model_validate(as_data(data))
    except ValidationError as err:
        return None, problems_from_validation_error(err)
    return c, validate_contract(c)


def check_contract(c: WorldContract) -> WorldContract:
    """Raise ContractError listing every error; warnings pass."""
    errors = [x for x in validate_contract(c) if x.severity == "error"]
    if errors:
        raise ContractError(errors)
    return c


# ----------------------------------------------------------------------------- names
def _dupes(items: list[str]) -> list[str]:
    return sorted(k for k, n in Counter(items).items() if n > 1)


def _check_names(c: WorldContract, p: Problems) -> None:
    for what, names in (("entity", [e.name for e in c.entities]), ("edge id", [str(e.id) for e in c.edges]),
                        ("event", [e.name for e in c.events]), ("system", [s.name for s in c.systems]),
                        ("phenomenon", [x.id for x in c.phenomena])):
        for d in _dupes(names):
            p.add("duplicate_name", what, f"{what} name {d!r} is used more than once", "give each a unique name")
    all_nodes = [a.name for e in c.entities for a in e.attributes] + [v.name for v in c.variables]
    for d in _dupes(all_nodes):
        p.add("duplicate_name", "variables", f"variable/attribute {d!r} is declared more than once",
              "variable names are global across entities; rename one")
    keys = {e.key for e in c.entities if e.key}
    for n in sorted(set(all_nodes) & (keys | RESERVED)):
        p.add("reserved_name", "variables", f"variable {n!r} collides with an id or time column name",
              f"rename it; {sorted(keys | RESERVED)} are generated columns")
    for n in all_nodes:
        if not n.isidentifier():
            p.add("bad_name", "variables", f"variable name {n!r} is not a valid identifier", "use snake_case")


def _check_timeline(c: WorldContract, p: Problems) -> None:
    t = c.timeline
    if t.end <= t.start:
        p.add("timeline", "timeline", f"end {t.end} is not after start {t.start}", "set end later than start")
    elif len(t.periods()) < 2:
        p.add("timeline", "timeline.grain", f"the timeline has fewer than 2 {t.grain}s",
              "lengthen the timeline or use a finer grain")


# ----------------------------------------------------------------------------- entities
def _check_entities(c: WorldContract, p: Problems) -> None:
    names = {e.name for e in c.entities}
    spellings: dict[str, str] = {}
    for i, e in enumerate(c.entities):
        path = f"entities[{i}]({e.name})"
        if e.kind == "panel":
            words: set[str] = set()
        elif not e.id_prefix or not e.id_prefix.isalpha() or not str(e.alias).isalpha():
            p.add("id_prefix", f"{path}.id_prefix", f"id prefix {e.id_prefix!r} / alias {e.alias!r} must be letters "
                  "only", "e.g. id_prefix 'C', alias 'CUST'")
            words = set()
        else:
            words = {e.id_prefix.lower(), str(e.alias).lower()}
        for word in words:
            if word in spellings and spellings[word] != e.name:
                p.add("id_prefix", f"{path}.id_prefix", f"id prefix/alias {word!r} is also used by entity "
                      f"{spellings[word]!r}; ids of the two would be indistinguishable", "choose distinct prefixes")
            spellings[word] = e.name
        if e.parent is not None and e.parent not in names:
            p.add("unknown_entity", f"{path}.parent", f"parent entity {e.parent!r} does not exist",
                  f"use one of {sorted(names)}")
        if e.parent in names and c.entity(e.parent).kind == "panel":
            p.add("panel_parent", f"{path}.parent", f"parent {e.parent!r} is a panel and has no ids of its own",
                  "attach children to a static or event entity")
        if e.kind == "panel":
            if e.parent is None:
                p.add("panel_parent", path, "a panel entity needs a parent (the unit observed each period)",
                      "set parent to the unit entity, e.g. 'stores'")
            if e.count is not None:
                p.warn("panel_count", f"{path}.count", "count is ignored for panels (rows = parent rows x periods)")
        elif e.count is None or e.count < 1:
            p.add("count", f"{path}.count", f"{e.kind} entity needs count >= 1 (got {e.count})", "set count")
        if e.parent_skew < 0:
            p.add("impossible_param", f"{path}.parent_skew", "parent_skew must be >= 0")
        attrs = {a.name: a for a in e.attributes}
        for g in e.groups:
            if g not in attrs or attrs[g].kind != "categorical":
                p.add("bad_group", f"{path}.groups", f"group {g!r} is not a categorical attribute of {e.name}",
                      f"categorical attributes: {[a for a, v in attrs.items() if v.kind == 'categorical']}")
    graph = nx.DiGraph([(e.name, e.parent) for e in c.entities if e.parent in names])
    for cyc in nx.simple_cycles(graph):
        p.add("entity_cycle", "entities", "entity parents form a loop: " + " -> ".join([*cyc, cyc[0]]),
              "a parent chain must end at an entity without parent")


# ----------------------------------------------------------------------------- nodes
def _check_distribution(d: Any, path: str, p: Problems) -> None:
    if d.type == "normal" and d.sd < 0:
        p.add("impossible_param", f"{path}.sd", f"normal sd is negative ({d.sd})", "use sd >= 0")
    if d.type == "lognormal" and d.sigma < 0:
        p.add("impossible_param", f"{path}.sigma", f"lognormal sigma is negative ({d.sigma})", "use sigma >= 0")
    if d.type == "uniform" and not d.low < d.high:
        p.add("impossible_param", path, f"uniform low {d.low} is not below high {d.high}", "swap or widen them")
    if d.type == "poisson" and d.lam < 0:
        p.add("impossible_param", f"{path}.lam", f"poisson lam is negative ({d.lam})", "use lam >= 0")
    if d.type == "bernoulli" and not 0 <= d.p <= 1:
        p.add("impossible_param", f"{path}.p", f"bernoulli p={d.p} is outside [0, 1]", "use a probability")
    if d.type == "categorical":
        if len(d.categories) != len(d.probs) or not d.categories:
            p.add("impossible_param", path, f"{len(d.categories)} categories but {len(d.probs)} probs",
                  "give one probability per category")
        if any(x < 0 for x in d.probs) or not math.isclose(sum(d.probs), 1.0, abs_tol=1e-6):
            p.add("impossible_param", f"{path}.probs", f"probs {d.probs} must be >= 0 and sum to 1 "
                  f"(sum is {sum(d.probs):.6g})", "rescale them")
        for dup in _dupes(d.categories):
            p.add("impossible_param", f"{path}.categories", f"category {dup!r} is listed twice")
    if d.type == "fixed" and not d.values:
        p.add("impossible_param", f"{path}.values", "fixed values are empty", "list one value per entity row")


def _node_path(c: WorldContract, n: NodeInfo) -> str:
    if n.is_attribute:
        e = next(i for i, x in enumerate(c.entities) if x.name == n.entity)
        return f"entities[{e}].attributes({n.name})"
    return f"variables({n.name})"


def _check_nodes(c: WorldContract, nodes: dict[str, NodeInfo], p: Problems) -> None:
    names = {e.name for e in c.entities}
    targets = {e.target for e in c.edges}
    for v in c.variables:
        if v.entity not in names:
            p.add("unknown_entity", f"variables({v.name}).entity", f"entity {v.entity!r} does not exist",
                  f"use one of {sorted(names)}")
    for n in nodes.values():
        path = _node_path(c, n)
        if n.bounds and n.bounds.lower is not None and n.bounds.upper is not None and n.bounds.lower >= n.bounds.upper:
            p.add("impossible_param", f"{path}.bounds", f"lower {n.bounds.lower} >= upper {n.bounds.upper}")
        if n.noise.sd < 0:
            p.add("impossible_param", f"{path}.noise.sd", f"noise sd is negative ({n.noise.sd})", "use sd >= 0")
        if n.distribution is not None:
            _check_distribution(n.distribution, f"{path}.distribution", p)
            want = _DIST_KINDS[n.distribution.type] if n.distribution.type != "fixed" else \
                ("categorical" if n.distribution.labelled else "numeric")
            if want != n.kind and not (n.kind == "count" and want == "numeric"):
                p.add("kind_mismatch", f"{path}.distribution", f"a {n.distribution.type} distribution gives "
                      f"{want} values but the variable is {n.kind}", "match kind and distribution")
            if n.name in targets and not n.is_attribute:
                p.add("caused_root", f"{path}.distribution", f"{n.name} has incoming edges and a distribution",
                      "a caused variable is intercept + edge contributions + noise: drop the distribution")
        elif n.name not in targets and n.derive is None:
            p.add("no_cause", path, f"{n.name} has no incoming edge and no distribution",
                  "add a distribution or an edge into it")


# ----------------------------------------------------------------------------- edges
def _support(n: NodeInfo) -> tuple[float, float]:
    lo, hi = -math.inf, math.inf
    d = n.distribution
    if d is not None and d.type == "uniform":
        lo, hi = d.low, d.high
    if d is not None and d.type in ("lognormal", "poisson"):
        lo = 0.0
    if n.kind == "binary":
        lo, hi = 0.0, 1.0
    if n.bounds:
        lo = max(lo, n.bounds.lower) if n.bounds.lower is not None else lo
        hi = min(hi, n.bounds.upper) if n.bounds.upper is not None else hi
    return lo, hi


def _check_edges(c: WorldContract, nodes: dict[str, NodeInfo], p: Problems) -> None:
    for i, e in enumerate(c.edges):
        path, m = f"edges[{i}]({e.id})", e.mechanism
        tgt = nodes.get(e.target)
        unknown = [s for s in e.sources if s not in nodes]
        for s in unknown:
            p.add("unknown_variable", f"{path}.sources", f"source {s!r} is not a declared variable or attribute",
                  f"declared: {sorted(nodes)}")
        if tgt is None:
            p.add("unknown_variable", f"{path}.target", f"target {e.target!r} is not a declared variable",
                  f"declared: {sorted(nodes)}")
            continue
        if tgt.is_attribute:
            p.add("exogenous_target", f"{path}.target", f"{e.target} is an entity attribute (exogenous)",
                  "declare it under variables to give it causes")
        if tgt.kind in ("categorical", "text"):
            p.add("bad_target", f"{path}.target", f"{e.target} is {tgt.kind}; edges can only drive numeric, "
                  "count or binary variables", "model a binary or numeric outcome instead")
        want = 0 if m.type in SOURCELESS else 2 if m.type == "interaction" else 1
        if len(e.sources) != want:
            p.add("source_count", f"{path}.sources", f"{m.type} takes {want} source(s), got {len(e.sources)}",
                  f"{'/'.join(SOURCELESS)} take none, interaction two, others one")
        if e.target in e.sources:
            p.add("cycle", path, f"{e.target} causes itself", "remove the self-loop")
        if unknown or len(e.sources) != want:
            continue
        _check_edge_entities(c, e, nodes, path, p)
        _check_mechanism(c, e, nodes, tgt, path, p)


def _check_edge_entities(c: WorldContract, e: Any, nodes: dict[str, NodeInfo], path: str, p: Problems) -> None:
    te = nodes[e.target].entity
    if te not in {x.name for x in c.entities}:
        return
    reach = {te, *c.ancestors(te)}
    for s in e.sources:
        if nodes[s].entity not in reach:
            p.add("entity_direction", f"{path}.sources", f"{s} lives on {nodes[s].entity}, which is neither "
                  f"{te} nor one of its parents {c.ancestors(te)}",
                  "effects flow from an entity to itself or to its child entities only")
    check_moderators(c, e, nodes, reach, path, p)


def _check_mechanism(c: WorldContract, e: Any, nodes: dict[str, NodeInfo], tgt: NodeInfo, path: str,
                     p: Problems) -> None:
    check_shape(c, e, nodes, tgt, path, p)
    m = e.mechanism
    src = [nodes[s] for s in e.sources]
    ent = c.entity(tgt.entity) if tgt.entity in {x.name for x in c.entities} else None
    if m.type == "logistic" and tgt.kind != "binary":
        p.add("impossible_param", f"{path}.mechanism", f"logistic needs a binary target; {tgt.name} is {tgt.kind}",
              "use linear/multiplicative, or make the target binary")
    if m.type in ("linear", "logistic", "multiplicative"):
        s = src[0]
        if s.kind == "categorical":
            if not m.levels:
                p.add("levels", f"{path}.mechanism.levels", f"categorical source {s.name} needs `levels` "
                      "(effect per label)", f"labels: {s.distribution.categories}")
            else:
                bad = sorted(set(m.levels) - set(s.distribution.categories))
                if bad:
                    p.add("levels", f"{path}.mechanism.levels", f"labels {bad} are not categories of {s.name}",
                          f"use {s.distribution.categories}")
        elif m.levels:
            p.add("levels", f"{path}.mechanism.levels", f"levels given but {s.name} is {s.kind}", "use coef")
        elif s.kind == "text":
            p.add("bad_source", f"{path}.sources", f"{s.name} is text and cannot drive anything")
    elif any(s.kind in ("categorical", "text") for s in src):
        p.add("bad_source", f"{path}.sources", f"{m.type} needs numeric/binary/count sources; got "
              f"{[(s.name, s.kind) for s in src]}", "use linear with levels for categorical causes")
    if m.type == "threshold" and src:
        lo, hi = _support(src[0])
        if not lo < m.threshold < hi:
            p.add("impossible_param", f"{path}.mechanism.threshold", f"threshold {m.threshold} is outside the "
                  f"range of {src[0].name} ({lo}, {hi})", "move it inside the source's bounds")
    if m.type == "saturating":
        if m.half <= 0:
            p.add("impossible_param", f"{path}.mechanism.half", f"half-saturation must be > 0 (got {m.half})")
        if src and _support(src[0])[0] < 0:
            p.add("impossible_param", f"{path}.sources", f"saturating needs a non-negative source; {src[0].name} "
                  "can be negative", "declare bounds.lower: 0 or use a lognormal/poisson source")
    if m.type == "lag" and ent is not None:
        n_periods = len(c.timeline.periods())
        if ent.kind != "panel" or src[0].entity != ent.name:
            p.add("lag", path, "lag needs source and target on the same panel entity", "declare a panel entity")
        if not 1 <= m.lag < n_periods:
            p.add("impossible_param", f"{path}.mechanism.lag", f"lag {m.lag} is beyond the timeline "
                  f"({n_periods} {c.timeline.grain}s)", f"use 1..{n_periods - 1}")
    if m.type in SOURCELESS and ent is not None and ent.time_column is None:
        p.add("needs_time", path, f"{m.type} needs a dated target; {ent.name} is {ent.kind}",
              "put the target on an event or panel entity")
    if m.type == "seasonal" and m.period_days <= 0:
        p.add("impossible_param", f"{path}.mechanism.period_days", "period_days must be > 0")
    if m.type == "step_event":
        ev = {x.name: x for x in c.events}.get(m.event)
        if ev is None:
            p.add("unknown_event", f"{path}.mechanism.event", f"event {m.event!r} is not declared",
                  f"declare it under events; known: {sorted(x.name for x in c.events)}")


def edge_graph(c: WorldContract) -> nx.DiGraph:
    """Dependencies between nodes: every edge's sources, the columns its groups and gate read, and a derived
    variable's inputs come before its target."""
    g = nx.DiGraph()
    g.add_nodes_from(c.nodes())
    for e in c.edges:
        nodes = c.edge_nodes(e)
        for s in nodes[:-1]:
            g.add_edge(s, e.target, edge=e.id)
    for src, tgt, why in dependency_edges(c):
        if not g.has_edge(src, tgt):
            g.add_edge(src, tgt, edge=why)
    return g


def _check_dag(c: WorldContract, p: Problems) -> None:
    g = edge_graph(c)
    g.remove_edges_from(nx.selfloop_edges(g))
    for k, cyc in enumerate(nx.simple_cycles(g)):
        if k == 5:
            p.add("cycle", "edges", "more cycles exist; fix the ones above first")
            break
        ids = [g.edges[a, b]["edge"] for a, b in zip(cyc, [*cyc[1:], cyc[0]])]
        p.add("cycle", "edges", "cycle " + " -> ".join([*cyc, cyc[0]]) + f" (edges {ids})",
              "remove or reverse one of these edges so the graph is acyclic")


def _check_events_confounders(c: WorldContract, nodes: dict[str, NodeInfo], p: Problems) -> None:
    for i, ev in enumerate(c.events):
        if not c.timeline.start < ev.date < c.timeline.end:
            p.add("event_date", f"events[{i}]({ev.name}).date", f"{ev.date} is not strictly inside the timeline "
                  f"{c.timeline.start}..{c.timeline.end}", "move it so data exist before and after")
    g = edge_graph(c)
    for i, cf in enumerate(c.confounders):
        path = f"confounders[{i}]"
        missing = [n for n in (cf.variable, cf.cause, cf.effect) if n not in nodes]
        if missing:
            p.add("unknown_variable", path, f"unknown variables {missing}", f"declared: {sorted(nodes)}")
            continue
        for end in (cf.cause, cf.effect):
            if not nx.has_path(g, cf.variable, end) or cf.variable == end:
                p.add("confounder", path, f"{cf.variable} does not cause {end}, so it cannot confound "
                      f"{cf.cause} -> {cf.effect}", f"add an edge path {cf.variable} -> {end}")


def entity_rows(c: WorldContract, e: Entity) -> int:
    if e.kind == "panel":
        parent = c.entity(e.parent)  # type: ignore[arg-type]
        return entity_rows(c, parent) * len(c.timeline.periods())
    return int(e.count or 0)


__all__ = ["validate_contract", "parse_contract", "check_contract", "ContractError", "ContractProblem",
           "edge_graph", "entity_rows"]
