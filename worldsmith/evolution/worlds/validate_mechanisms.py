"""Validation of the richer contract language: shapes, percent events, calendars, gates, multi-moderator groups,
derived variables (ratio, balance, aggregate) and fixed attributes. Every problem has a path and a hint."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from worldsmith.core.world_contract import NodeInfo, WorldContract
from worldsmith.core.world_contract_derived import derivation_inputs
from worldsmith.core.world_contract_types import CALENDAR_MODERATORS, MODERATOR_SEP

from .problems import Problems

NUMERIC = ("numeric", "count", "binary")


def _ascending(xs: list[float]) -> bool:
    return all(a < b for a, b in pairwise(xs))


def check_shape(c: WorldContract, e: Any, nodes: dict[str, NodeInfo], tgt: NodeInfo, path: str, p: Problems) -> None:
    """Parameters of power / piecewise / binned / event_percent / calendar edges."""
    m = e.mechanism
    if m.type == "power" and m.exponent <= 0:
        p.add("impossible_param", f"{path}.mechanism.exponent", f"exponent must be > 0 (got {m.exponent})",
              "use 2 for an inverted U (with a negative coef), 0.5 for a square root")
    if m.type == "piecewise":
        if not m.knots or not _ascending(m.knots):
            p.add("impossible_param", f"{path}.mechanism.knots", f"knots {m.knots} must be non-empty and ascending")
        if len(m.slopes) != len(m.knots) + 1:
            p.add("impossible_param", f"{path}.mechanism.slopes", f"{len(m.knots)} knot(s) make "
                  f"{len(m.knots) + 1} segments but {len(m.slopes)} slope(s) are given", "give one slope per segment")
    if m.type == "binned":
        if not m.cuts or not _ascending(m.cuts):
            p.add("impossible_param", f"{path}.mechanism.cuts", f"cuts {m.cuts} must be non-empty and ascending")
        if len(m.effects) != len(m.cuts):
            p.add("impossible_param", f"{path}.mechanism.effects", f"{len(m.cuts)} cut(s) make {len(m.cuts)} bins "
                  f"above the lowest but {len(m.effects)} effect(s) are given",
                  "give one effect per bin above the lowest (the lowest bin is the reference)")
    if m.type == "event_percent":
        if m.event not in {x.name for x in c.events}:
            p.add("unknown_event", f"{path}.mechanism.event", f"event {m.event!r} is not declared",
                  f"declare it under events; known: {sorted(x.name for x in c.events)}")
        if tgt.kind not in ("numeric", "count"):
            p.add("impossible_param", f"{path}.mechanism", f"a percent change needs a numeric or count target; "
                  f"{tgt.name} is {tgt.kind}", "use step_event on a binary target")
        if m.percent <= -100:
            p.add("impossible_param", f"{path}.mechanism.percent", f"percent {m.percent} would make the target "
                  "zero or negative", "use a percent above -100")
    if m.type == "calendar" and m.calendar not in {x.name for x in c.calendars}:
        p.add("unknown_calendar", f"{path}.mechanism.calendar", f"calendar {m.calendar!r} is not declared",
              f"declare it under calendars; known: {sorted(x.name for x in c.calendars)}")


def check_moderators(c: WorldContract, e: Any, nodes: dict[str, NodeInfo], reach: set[str], path: str,
                     p: Problems) -> None:
    """Heterogeneity over one or more moderators, and the gate."""
    te = c.entity(nodes[e.target].entity)
    if e.heterogeneity is not None:
        labels: list[list[str]] = []
        for col in e.heterogeneity.columns:
            if col in CALENDAR_MODERATORS:
                if te.time_column is None:
                    p.add("heterogeneity", f"{path}.heterogeneity.by", f"{col} needs a dated target; {te.name} is "
                          f"{te.kind}", "put the target on an event or panel entity")
                years = [str(y) for y in range(c.timeline.start.year, c.timeline.end.year + 1)]
                labels.append(["Q1", "Q2", "Q3", "Q4"] if col == "@quarter" else years)
                continue
            h = nodes.get(col)
            if h is None or h.kind != "categorical" or h.entity not in reach:
                p.add("heterogeneity", f"{path}.heterogeneity.by", f"{col!r} is not a categorical variable of "
                      f"{te.name} or its parents", f"group by a categorical attribute or {list(CALENDAR_MODERATORS)}")
                return
            labels.append(list(h.distribution.categories))
        width = len(labels)
        for key in e.heterogeneity.multipliers:
            parts = key.split(MODERATOR_SEP)
            if len(parts) != width or any(x not in labs for x, labs in zip(parts, labels)):
                example = MODERATOR_SEP.join(labs[0] for labs in labels)
                p.add("heterogeneity", f"{path}.heterogeneity.multipliers", f"group {key!r} is not a combination of "
                      f"labels of {e.heterogeneity.columns}", f"write groups like {example!r}")
    if e.gate is not None:
        g = nodes.get(e.gate.variable)
        if g is None or g.kind not in NUMERIC or g.entity not in reach:
            p.add("gate", f"{path}.gate.variable", f"{e.gate.variable!r} is not a numeric variable of {te.name} or "
                  "its parents", "gate on a numeric/count/binary variable the target's rows can see")
        elif e.gate.variable == e.target or e.gate.variable in e.sources and e.mechanism.type == "threshold":
            p.add("gate", f"{path}.gate", "a gate on the target itself (or on a threshold edge's own source) says "
                  "nothing new", "gate on another variable")


def check_calendars(c: WorldContract, p: Problems) -> None:
    for i, cal in enumerate(c.calendars):
        path = f"calendars[{i}]({cal.name})"
        if not cal.dates and not cal.weekdays:
            p.add("calendar", path, "a calendar needs dates or weekdays", "e.g. weekdays [5, 6] for weekends")
        bad = [d for d in cal.weekdays if not 0 <= d <= 6]
        if bad:
            p.add("calendar", f"{path}.weekdays", f"weekdays {bad} are not 0 (Monday) .. 6 (Sunday)")
        outside = [str(d) for d in cal.dates if not c.timeline.start <= d <= c.timeline.end]
        if outside:
            p.add("calendar", f"{path}.dates", f"dates {outside} are outside the timeline "
                  f"{c.timeline.start}..{c.timeline.end}", "drop them or widen the timeline")


def check_fixed(c: WorldContract, p: Problems) -> None:
    for i, e in enumerate(c.entities):
        for a in e.attributes:
            if a.distribution.type != "fixed":
                continue
            path = f"entities[{i}]({e.name}).attributes({a.name}).distribution"
            if e.kind != "static":
                p.add("fixed", path, f"fixed values need a static entity; {e.name} is {e.kind}",
                      "list the values on the static entity the rows belong to")
            elif e.count != len(a.distribution.values):
                p.add("fixed", path, f"{len(a.distribution.values)} fixed value(s) but {e.name} has count "
                      f"{e.count}", f"give one value per row or set count to {len(a.distribution.values)}")
    for v in c.variables:
        if v.distribution is not None and v.distribution.type == "fixed":
            p.add("fixed", f"variables({v.name}).distribution", "fixed values belong to entity attributes",
                  f"move {v.name} under its entity's attributes")


def _grain_ok(c: WorldContract, source: str, target: str) -> bool:
    """An aggregate's entity is an ancestor of the source entity, or a panel whose unit is the source's unit or
    one of its ancestors (the source being dated)."""
    if target in c.ancestors(source):
        return True
    t, s = c.entity(target), c.entity(source)
    if t.kind != "panel" or s.kind == "static":
        return False
    chain = [s.parent, *c.ancestors(str(s.parent))] if s.kind == "panel" else [source, *c.ancestors(source)]
    return t.parent in chain and source != target


def check_derived(c: WorldContract, nodes: dict[str, NodeInfo], p: Problems) -> None:
    for v in c.variables:
        d = v.derive
        if d is None:
            continue
        path = f"variables({v.name}).derive"
        if c.incoming(v.name):
            p.add("derived", path, f"{v.name} is derived and also has incoming edges",
                  "drop the edges (a derived variable is computed exactly) or drop derive")
        if v.distribution is not None:
            p.add("derived", path, f"{v.name} is derived and also has a distribution", "drop the distribution")
        if v.kind not in ("numeric", "count"):
            p.add("derived", path, f"a derived variable is numeric; {v.name} is {v.kind}", "set kind numeric")
        inputs = derivation_inputs(d)
        unknown = [x for x in inputs if x not in nodes]
        if unknown:
            p.add("unknown_variable", path, f"inputs {unknown} are not declared", f"declared: {sorted(nodes)}")
            continue
        if v.name in inputs:
            p.add("cycle", path, f"{v.name} is derived from itself")
        wrong = [x for x in inputs if nodes[x].kind not in NUMERIC]
        if wrong:
            p.add("derived", path, f"inputs {wrong} are not numeric", "derive from numeric, count or binary columns")
        reach = {v.entity, *c.ancestors(v.entity)} if v.entity in {e.name for e in c.entities} else set()
        if d.op == "ratio":
            far = [x for x in inputs if nodes[x].entity not in reach]
            if far:
                p.add("derived", path, f"inputs {far} do not live on {v.entity} or its parents",
                      "a ratio reads columns of its own rows")
        if d.op == "balance":
            if not d.inflows and not d.outflows:
                p.add("derived", path, "a balance needs inflows or outflows")
            if v.entity in reach and c.entity(v.entity).kind != "panel":
                p.add("derived", path, f"a stock-and-flow balance needs a panel; {v.entity} is "
                      f"{c.entity(v.entity).kind}", "declare the stock on a panel entity (one row per unit x period)")
            far = [x for x in inputs if nodes[x].entity != v.entity]
            if far:
                p.add("derived", path, f"flows {far} are not on {v.entity}", "put the flows on the stock's panel")
        if d.op == "aggregate" and v.entity in reach and not _grain_ok(c, nodes[d.of].entity, v.entity):
            p.add("grain", path, f"{v.entity} is not a coarser grain of {nodes[d.of].entity}",
                  "aggregate into an ancestor entity (a region from its stores) or into a panel whose unit is an "
                  "ancestor of the dated source (a monthly series from events)")


def dependency_edges(c: WorldContract) -> list[tuple[str, str, str]]:
    """(input, target, why) pairs the generation order must respect beyond edge sources."""
    out: list[tuple[str, str, str]] = []
    for e in c.edges:
        cols = [x for x in (e.heterogeneity.columns if e.heterogeneity else []) if x not in CALENDAR_MODERATORS]
        cols += [e.gate.variable] if e.gate else []
        out += [(x, e.target, str(e.id)) for x in cols]
    for v in c.variables:
        if v.derive is not None:
            out += [(x, v.name, f"derive:{v.name}") for x in derivation_inputs(v.derive)]
    return out


def check_relinks(c: WorldContract, p: Problems) -> None:
    """A relink revises a static entity's parent link at a date inside the timeline."""
    for i, e in enumerate(c.entities):
        if e.relink is None:
            continue
        path = f"entities[{i}]({e.name}).relink"
        if e.kind != "static" or e.parent is None:
            p.add("relink", path, f"only a static entity with a parent can be relinked; {e.name} is {e.kind}"
                  f"{'' if e.parent else ' without parent'}", "relink the entity whose parent changes (stores of "
                  "regions), and hang dated tables below it")
        elif e.parent in {x.name for x in c.entities} and (c.entity(e.parent).count or 0) < 2:
            p.add("relink", path, f"{e.parent} has fewer than 2 rows, so no row can change parent",
                  f"give {e.parent} count >= 2")
        if not 0 <= e.relink.share <= 1:
            p.add("impossible_param", f"{path}.share", f"share {e.relink.share} is not in [0, 1]",
                  "the share of rows whose parent changes, e.g. 0.2")
        elif e.relink.share == 0:
            p.warn("relink", f"{path}.share", "share 0: no row changes parent", "drop the relink or raise share")
        if not c.timeline.start < e.relink.date < c.timeline.end:
            p.add("relink", f"{path}.date", f"{e.relink.date} is not strictly inside the timeline "
                  f"{c.timeline.start}..{c.timeline.end}", "move it so rows exist under both links")
