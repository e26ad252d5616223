"""Validation of invariants, observation systems (and their defects) and phenomena."""

from __future__ import annotations

import datetime as dt
from typing import Any

from worldsmith.core.world_contract import NodeInfo, ObservationSystem, WorldContract
from .problems import Problems
from .recipes import recipe_columns, recipe_entity, where_columns

XLSX_MAX_ROWS = 200_000


def check_invariants(c: WorldContract, nodes: dict[str, NodeInfo], p: Problems) -> None:
    entities = {e.name: e for e in c.entities}
    for i, inv in enumerate(c.invariants):
        path = f"invariants[{i}]({inv.kind})"
        ent = getattr(inv, "entity", None)
        if ent is not None and ent not in entities:
            p.add("unknown_entity", path, f"entity {ent!r} does not exist", f"use one of {sorted(entities)}")
            continue
        names = [n for n in (getattr(inv, "variable", None), getattr(inv, "total", None)) if n]
        names += list(getattr(inv, "parts", []))
        unknown = [n for n in names if n not in nodes]
        if unknown:
            p.add("unknown_variable", path, f"unknown variables {unknown}", f"declared: {sorted(nodes)}")
            continue
        if inv.kind == "unique_ids" and entities[inv.entity].kind == "panel":
            p.add("invariant", path, f"{inv.entity} is a panel without its own id", "check a static/event entity")
        if inv.kind == "foreign_key" and entities[inv.entity].parent is None:
            p.add("invariant", path, f"{inv.entity} has no parent, so no foreign key to check")
        if inv.kind == "non_negative":
            b = nodes[inv.variable].bounds
            if b is None or b.lower is None or b.lower < 0:
                p.add("invariant", path, f"non-negativity of {inv.variable} is not guaranteed by the contract",
                      f"declare bounds.lower: 0 on {inv.variable}")
        if inv.kind == "bounds" and nodes[inv.variable].bounds is None:
            p.add("invariant", path, f"{inv.variable} declares no bounds to check", "add bounds")
        if inv.kind == "units" and nodes[inv.variable].unit != inv.unit:
            p.add("invariant", path, f"{inv.variable} is declared in {nodes[inv.variable].unit!r}, not {inv.unit!r}",
                  "make the unit agree with the variable's unit")
        if inv.kind == "shared_event":
            _check_shared_event(c, inv, path, p)
        if inv.kind == "sum":
            _check_sum(c, inv, nodes, path, p)


def _check_shared_event(c: WorldContract, inv: Any, path: str, p: Problems) -> None:
    if inv.event not in {e.name for e in c.events}:
        p.add("unknown_event", path, f"event {inv.event!r} is not declared")
    systems = {s.name: s for s in c.systems}
    for s in inv.systems:
        if s not in systems:
            p.add("unknown_system", path, f"system {s!r} does not exist", f"use one of {sorted(systems)}")
        elif systems[s].entity in {e.name for e in c.entities} and c.entity(systems[s].entity).time_column is None:
            p.add("invariant", path, f"system {s} records undated entity {systems[s].entity}")


def _check_sum(c: WorldContract, inv: Any, nodes: dict[str, NodeInfo], path: str, p: Problems) -> None:
    total = nodes[inv.total]
    edges = c.incoming(inv.total)
    exact = (sorted(s for e in edges for s in e.sources) == sorted(inv.parts)
             and all(e.mechanism.type == "linear" and e.mechanism.coef == 1 and e.mechanism.center == 0
                     and e.heterogeneity is None and e.gate is None for e in edges)
             and total.intercept == 0 and (total.noise.type == "none" or total.noise.sd == 0) and total.bounds is None)
    if not exact:
        p.add("invariant", path, f"{inv.total} = {' + '.join(inv.parts)} is not implied by the edges",
              f"make {inv.total}'s only edges linear coef 1 from {inv.parts}, intercept 0, no noise, no bounds")
    if inv.tolerance < 0:
        p.add("impossible_param", f"{path}.tolerance", "tolerance must be >= 0")


def _system_columns(c: WorldContract, s: ObservationSystem) -> list[str]:
    e = c.entity(s.entity)
    cols = [e.key] if e.key and e.kind != "panel" else []
    if e.parent:
        cols.append(c.entity(e.parent).key)
    if e.time_column:
        cols.append(e.time_column)
    return [*cols, *s.variables]


def check_systems(c: WorldContract, nodes: dict[str, NodeInfo], p: Problems) -> None:
    entities = {e.name for e in c.entities}
    observed: set[str] = set()
    for i, s in enumerate(c.systems):
        path = f"systems[{i}]({s.name})"
        if s.entity not in entities:
            p.add("unknown_entity", f"{path}.entity", f"entity {s.entity!r} does not exist",
                  f"use one of {sorted(entities)}")
            continue
        ent = c.entity(s.entity)
        for v in s.variables:
            if v not in nodes:
                p.add("unknown_variable", f"{path}.variables", f"{v!r} is not a declared variable")
            elif nodes[v].entity != s.entity:
                p.add("wrong_entity", f"{path}.variables", f"{v} belongs to {nodes[v].entity}, not {s.entity}",
                      f"record it in a system on {nodes[v].entity}")
        observed |= set(s.variables)
        if s.partition != "none" and ent.time_column is None:
            p.add("partition", f"{path}.partition", f"{s.entity} is undated and cannot be split by {s.partition}",
                  "use partition 'none'")
        try:
            probe = dt.date(2024, 11, 23).strftime(s.date_format)
            ok = dt.datetime.strptime(probe, s.date_format).date() == dt.date(2024, 11, 23)
        except ValueError:
            ok = False
        if not ok:
            p.add("date_format", f"{path}.date_format", f"{s.date_format!r} does not round-trip a date",
                  "use a strftime format with %Y, %m and %d")
        rows = _rows(c, ent)
        if s.format == "xlsx" and rows > XLSX_MAX_ROWS:
            p.warn("xlsx_size", f"{path}.format", f"xlsx with ~{rows} rows is slow to write and read",
                   f"use xlsx for tables under {XLSX_MAX_ROWS} rows")
        cols = _system_columns(c, s)
        for j, d in enumerate(s.defects):
            _check_defect(c, s, ent, cols, nodes, d, f"{path}.defects[{j}]({d.type})", p)
    stems = [(s.stem, s.format) for s in c.systems if s.format not in ("xlsx", "sqlite")]
    if len(set(stems)) != len(stems):
        p.add("duplicate_name", "systems", "two systems write the same file stem and format",
              "set distinct `file` (only xlsx/sqlite systems may share a workbook/database)")
    used = {s for e in c.edges for s in [*e.sources, e.target]}
    for ph in c.phenomena:
        used |= set(recipe_columns(ph.recipe)) if _safe(ph) else set()
    for v in sorted((used & set(nodes)) - observed):
        p.warn("unobserved", "systems", f"{v} is used by an edge or phenomenon but no system records it",
               "the audit will skip what depends on it; add it to a system's variables")


def _safe(ph: Any) -> bool:
    return all(isinstance(x, str) for x in recipe_columns(ph.recipe))


def _rows(c: WorldContract, ent: Any) -> int:
    if ent.kind == "panel" and ent.parent in {e.name for e in c.entities}:
        return _rows(c, c.entity(ent.parent)) * len(c.timeline.periods())
    return int(ent.count or 0)


def _inside(c: WorldContract, day: dt.date) -> bool:
    return c.timeline.start < day < c.timeline.end


def _check_defect(c: WorldContract, s: ObservationSystem, ent: Any, cols: list[str], nodes: dict[str, NodeInfo],
                  d: Any, path: str, p: Problems) -> None:
    var = getattr(d, "variable", None) or getattr(d, "column", None)
    if var is not None and var not in cols:
        p.add("defect_column", path, f"{var!r} is not a column of system {s.name}", f"columns: {cols}")
        return
    rate = getattr(d, "rate", None)
    top = 1.0 if d.type == "delay" else 0.999
    if rate is not None and not 0 <= rate <= top:
        p.add("impossible_param", f"{path}.rate", f"rate {rate} must be in [0, {top}]")
    needs_time = d.type in ("delay", "unit_drift") or (d.type == "recode" and d.since is not None)
    if needs_time and ent.time_column is None:
        p.add("needs_time", path, f"{d.type} needs dated rows; {ent.name} is {ent.kind}")
    if d.type == "delay" and (ent.kind != "event" or d.days < 0 or d.jitter_days < 0):
        p.add("impossible_param", path, "delays apply to event entities with days, jitter_days >= 0")
    if d.type == "missing" and d.mechanism == "mar" and d.depends_on not in cols:
        p.add("defect_column", f"{path}.depends_on", f"MAR missingness needs depends_on = a column of {s.name}",
              f"columns: {cols}")
    if d.type == "missing" and var in cols[:2] and var in {e.key for e in c.entities}:
        p.add("defect_column", path, "blanking an id column makes rows unjoinable", "blank a variable instead")
    if d.type == "duplicates" and rate is not None and rate > 0.5:
        p.add("impossible_param", f"{path}.rate", "duplicate rate above 0.5 is not a realistic defect")
    if d.type == "unit_drift":
        n = nodes.get(d.variable)
        if n is None or n.kind not in ("numeric", "count"):
            p.add("unit_drift", path, f"{d.variable} is not numeric")
        elif n.unit != d.from_unit:
            p.add("unit_drift", f"{path}.from_unit", f"{d.variable} is in {n.unit!r}, not {d.from_unit!r}")
        if d.factor <= 0 or d.factor == 1:
            p.add("impossible_param", f"{path}.factor", f"factor {d.factor} must be > 0 and != 1")
        if not _inside(c, d.since):
            p.add("impossible_param", f"{path}.since", f"{d.since} is outside the timeline")
    if d.type == "recode":
        n = nodes.get(d.variable)
        if n is None or n.kind != "categorical":
            p.add("recode", path, f"{d.variable} is not categorical")
        else:
            cats = set(n.distribution.categories)
            bad = sorted(set(d.mapping) - cats)
            if bad:
                p.add("recode", f"{path}.mapping", f"{bad} are not categories of {d.variable}", f"use {sorted(cats)}")
            new = list(d.mapping.values())
            if len(set(new)) != len(new) or set(new) & (cats - set(d.mapping)):
                p.add("recode", f"{path}.mapping", "new labels must be distinct and not reuse a kept label",
                      "otherwise the recoding cannot be undone")
        if d.since is not None and not _inside(c, d.since):
            p.add("impossible_param", f"{path}.since", f"{d.since} is outside the timeline")
    if d.type in ("rename", "unlabeled_fk") and d.new_name in cols:
        p.add("rename", f"{path}.new_name", f"{d.new_name!r} collides with an existing column")
    if d.type == "rename" and d.from_partition > 0:
        years = c.timeline.end.year - c.timeline.start.year + 1
        if s.partition == "none" or d.from_partition >= years:  # counted in years, also for quarter files
            p.add("rename", f"{path}.from_partition", f"year {d.from_partition} of the partitions does not exist "
                  f"({years if s.partition != 'none' else 1} year(s))", "use partition 'year' or 'quarter', or 0")
    if d.type == "unlabeled_fk" and (ent.parent is None or d.column != c.entity(ent.parent).key):
        p.add("unlabeled_fk", path, f"{d.column} is not the foreign key of {ent.name}")
    if d.type == "split_column" and (nodes.get(d.column) is None or nodes[d.column].kind != "text"):
        p.add("split_column", path, f"{d.column} is not a text (person_name) column")
    if d.type == "cancellations":
        _check_cancellations(c, s, ent, cols, d, path, p)
    if not getattr(d, "memo", True):
        hidden = {"delay": "a posting delay leaves no trace in the data: solvers will use the posting dates",
                  "duplicates": "repeated records are visible as repeated keys"}
        p.warn("undocumented_defect", f"{path}.memo", f"{d.type} has no memo; "
               + hidden.get(d.type, "solvers must discover it from the data (the audit knows it from the contract)"),
               "keep it only if the data shows it; set memo: true to document it")


def _check_cancellations(c: WorldContract, s: ObservationSystem, ent: Any, cols: list[str], d: Any, path: str,
                         p: Problems) -> None:
    if d.depends_on is not None and d.depends_on not in cols:
        p.add("defect_column", f"{path}.depends_on", f"{d.depends_on!r} is not a column of system {s.name}",
              f"columns: {cols}")
    children = [e.name for e in c.entities if e.parent == ent.name]
    if children:
        p.add("cancellations", path, f"{ent.name} records are parents of {children}: their rows would point at "
              "records missing from every export", "cancel rows of an entity nothing else belongs to")
    if d.rate > 0.5:
        p.warn("cancellations", f"{path}.rate", f"cancelling {d.rate:.0%} of {ent.name} is not a realistic defect",
               "keep cancellation rates under 0.5")


def check_phenomena(c: WorldContract, nodes: dict[str, NodeInfo], p: Problems) -> None:
    events = {e.name for e in c.events}
    for i, ph in enumerate(c.phenomena):
        path = f"phenomena[{i}]({ph.id})"
        r: Any = ph.recipe
        if not ph.id.isidentifier():
            p.add("bad_name", f"{path}.id", f"{ph.id!r} is not snake_case", "use e.g. 'north_south_gap'")
        keys = {e.key for e in c.entities}
        cols = [*recipe_columns(r), *where_columns(r)]
        unknown = [x for x in cols if x not in nodes and x not in keys and x not in ("date", "period")]
        if unknown:
            p.add("unknown_variable", f"{path}.recipe", f"recipe refers to unknown columns {unknown}",
                  f"declared: {sorted(nodes)}")
            continue
        if r.op == "distinct_count" and r.entity not in {e.name for e in c.entities}:
            p.add("unknown_entity", f"{path}.recipe.entity", f"entity {r.entity!r} does not exist")
            continue
        try:
            ent = c.entity(recipe_entity(c, r))
        except ValueError as err:
            p.add("recipe_entity", f"{path}.recipe", str(err))
            continue
        except KeyError:
            continue  # the recipe's variables sit on an unknown entity: reported under variables
        for f in ("x", "y", "variable"):
            name = getattr(r, f, None)
            if name and nodes[name].kind in ("categorical", "text") and r.op not in ("share", "distinct_count"):
                p.add("recipe_kind", f"{path}.recipe.{f}", f"{name} is {nodes[name].kind}; {r.op} needs numbers")
        if r.op == "partial_corr":
            bad = [v for v in r.controls if v in (r.x, r.y) or nodes[v].kind == "text"]
            if bad:
                p.add("recipe_kind", f"{path}.recipe.controls", f"{bad} cannot be held fixed (x, y or free text)",
                      "control for other numeric, binary or categorical columns")
        if getattr(r, "by", None):
            by = nodes[r.by]
            if by.kind != "categorical":
                p.add("recipe_kind", f"{path}.recipe.by", f"{r.by} is not categorical")
            else:
                wanted = list(getattr(r, "groups", ())) + ([r.group] if getattr(r, "group", None) else [])
                bad = [g for g in wanted if g not in by.distribution.categories]
                if bad:
                    p.add("recipe_group", f"{path}.recipe", f"groups {bad} are not labels of {r.by}",
                          f"use {by.distribution.categories}")
        if r.op == "pre_post":
            if r.event not in events:
                p.add("unknown_event", f"{path}.recipe.event", f"event {r.event!r} is not declared")
            if ent.time_column is None:
                p.add("needs_time", f"{path}.recipe", f"pre_post needs a dated entity; {ent.name} is {ent.kind}")
        if r.op == "lagged_corr" and (ent.kind != "panel" or not 1 <= r.lag < len(c.timeline.periods())):
            p.add("lag", f"{path}.recipe", "lagged_corr needs a panel entity and 1 <= lag < periods")
        if ph.tolerance.abs < 0 or ph.tolerance.rel < 0:
            p.add("impossible_param", f"{path}.tolerance", "tolerances must be >= 0")
        if r.op != "top_group" and ph.tolerance.abs == 0 and ph.tolerance.rel == 0:
            p.warn("tolerance", f"{path}.tolerance", "zero tolerance: any rounding fails the audit")
        if "{value" not in ph.statement:
            p.warn("statement", f"{path}.statement", "statement has no {value} placeholder")
        for eid in ph.edges:
            if eid not in {e.id for e in c.edges}:
                p.add("unknown_edge", f"{path}.edges", f"edge {eid!r} does not exist")
