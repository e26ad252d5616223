"""Grafting the richer mechanisms onto random template variants, so the random-contract benchmark draws them.

Each graft adds to a contract one new-language construct on variables it already has: a power, piecewise or binned
shape from an unused numeric cause, a percent event effect, a shared calendar, a gated effect, an effect that
differs by a category x quarter, a ratio, an aggregate of a child table on its parent, or a stock accumulating a
panel's flow. Magnitudes are sized from a small generated world of the variant (the spread each design column keeps
in a joint fit, the target's noise) so that the audit should confirm each planted term at about Z_GOAL standard
errors at the contract's row count; a graft that would push the target outside its bounds, or whose parts are not
observed, is not made. Fixed attributes and relinks need tables the templates do not have and are not grafted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from worldsmith.core.world_contract import WorldContract

from .audit_edges import FrameView, _columns
from .validate import edge_graph, entity_rows

Z_GOAL = 12.0
SIZING_ROWS = 4000
GRAFTS = ("power", "piecewise", "binned", "event_percent", "calendar", "gate", "moderators", "ratio", "aggregate",
          "balance")


class _Ctx:
    """The variant being grafted, a generated sample of it, and what each graft may use."""

    def __init__(self, c: WorldContract, seed: int, rng: np.random.Generator):
        from .engine import generate, scaled

        self.c, self.rng, self.data = c, rng, c.model_dump(mode="json")
        self.state = generate(scaled(c, SIZING_ROWS), seed)
        self.observed = {v for s in c.systems for v in s.variables}
        self.graph = edge_graph(c)
        self.used: set[tuple[str, str]] = set()
        self.sums = {i.total for i in c.invariants if i.kind == "sum"} | {p for i in c.invariants if i.kind == "sum"
                                                                     for p in i.parts}
        self.targets = [n for n in c.nodes().values() if n.kind == "numeric" and c.incoming(n.name)
                        and n.derive is None and n.noise.type == "normal" and n.noise.sd > 0
                        and n.name in self.observed and n.name not in self.sums]

    def reach(self, entity: str) -> set[str]:
        return {entity, *self.c.ancestors(entity)}

    def sources(self, target: str, kinds: tuple[str, ...] = ("numeric", "count")) -> list[str]:
        """Observed variables the target's rows can see, that are not caused by it and not yet its causes."""
        t = self.c.node(target)
        taken = {s for e in self.c.incoming(target) for s in e.sources} | {s for s, x in self.used if x == target}
        down = nx.descendants(self.graph, target) | {target}
        return [n.name for n in self.c.nodes().values() if n.kind in kinds and n.entity in self.reach(t.entity)
                and n.name in self.observed and n.name not in down and n.name not in taken
                and n.name not in self.sums and n.derive is None]  # exact sums are collinear with their parts

    def pick(self, items: list[Any]) -> Any:
        return items[int(self.rng.integers(0, len(items)))] if items else None

    def dated(self, target: str) -> bool:
        return self.c.entity(self.c.node(target).entity).time_column is not None


def _sized_edge(ctx: _Ctx, edge: dict[str, Any], scale: Callable[[dict, float], None]) -> bool:
    """Scale the edge's placeholder magnitudes by one factor so that every claimed design column is expected at
    Z_GOAL or more, then add the edge if the target stays within its bounds. `scale(mechanism, factor)` writes the
    sized values."""
    target = ctx.c.node(edge["target"])
    trial = WorldContract.model_validate({**ctx.data, "edges": [*ctx.data["edges"], edge]})
    e = trial.edges[-1]
    wide = ctx.state.wide(target.entity)
    view = FrameView(trial, target.entity, wide)
    y = pd.to_numeric(wide[target.name], errors="coerce").to_numpy(dtype=float)
    level = float(np.nanmean(np.abs(y)))  # a log-factor moves the target by about its level times the factor
    design = _columns(trial, e, view, target.kind)
    X = np.column_stack([d[0] for d in design])
    X = X[np.isfinite(X).all(axis=1)]
    n = entity_rows(ctx.c, ctx.c.entity(target.entity))
    spreads = [_partial_sd(X, k) * abs(mag) * (level if mult else 1.0)
               for k, (_col, mag, _label, mult) in enumerate(design) if mag != 0]
    if not spreads or min(spreads) <= 0:
        return False
    factor = max(Z_GOAL * target.noise.sd / math.sqrt(n) / s for s in spreads)
    if factor > 1e3:
        return False  # the placeholder would have to grow beyond any plausible effect
    scale(edge["mechanism"], factor)
    sized = WorldContract.model_validate({**ctx.data, "edges": [*ctx.data["edges"], edge]})
    from .mechanisms import contribution

    contrib, mult = contribution(sized, sized.edges[-1], view, target.kind)
    moved = y * np.exp(contrib) if mult else y + contrib
    b = target.bounds
    outside = np.zeros(len(y), dtype=bool)
    if b is not None and b.lower is not None:
        outside |= moved < b.lower
    if b is not None and b.upper is not None:
        outside |= moved > b.upper
    if np.nanmean(outside) > 0.01 or np.nanstd(contrib) > 2 * np.nanstd(y):
        return False  # clipping would flatten it, or it would swamp the target
    ctx.data["edges"].append(edge)
    ctx.used |= {(s, edge["target"]) for s in edge["sources"]}
    return True


def _partial_sd(X: np.ndarray, k: int) -> float:
    """Spread of design column k left after the intercept and the edge's other columns (what a joint fit can use)."""
    if len(X) < 3:
        return 0.0
    others = np.column_stack([np.ones(len(X)), np.delete(X, k, axis=1)])
    beta = np.linalg.lstsq(others, X[:, k], rcond=None)[0]
    return float(np.std(X[:, k] - others @ beta))


def _times(key: str) -> Callable[[dict, float], None]:
    def put(m: dict, f: float) -> None:
        m[key] = [v * f for v in m[key]] if isinstance(m[key], list) else m[key] * f
    return put


def _shape(ctx: _Ctx, kind: str) -> bool:
    for t in ctx.rng.permutation([x.name for x in ctx.targets]).tolist():
        src = ctx.pick(ctx.sources(t))
        if src is None:
            continue
        x = pd.to_numeric(ctx.state.wide(ctx.c.node(t).entity)[src], errors="coerce").dropna()
        q = [float(v) for v in x.quantile([0.33, 0.5, 0.67])]
        if not q[0] < q[1] < q[2]:
            continue
        mech: dict[str, Any] = {"power": {"type": "power", "coef": -1.0, "exponent": 2.0, "center": q[1]},
                                "piecewise": {"type": "piecewise", "knots": [q[1]], "slopes": [1.0, -1.0]},
                                "binned": {"type": "binned", "cuts": [q[0], q[2]], "effects": [2.0, 1.0]}}[kind]
        edge = {"id": f"{src}->{t}[{kind}]", "sources": [src], "target": t, "mechanism": mech}
        if _sized_edge(ctx, edge, _times({"power": "coef", "piecewise": "slopes", "binned": "effects"}[kind])):
            return True
    return False


def _sourceless(ctx: _Ctx, kind: str) -> bool:
    if kind == "event_percent" and not ctx.c.events:
        return False
    for t in ctx.rng.permutation([x.name for x in ctx.targets]).tolist():
        ent = ctx.c.entity(ctx.c.node(t).entity)
        if not ctx.dated(t) or (kind == "calendar" and ent.kind != "event"):
            continue  # a day calendar needs day-dated rows
        if any(e.mechanism.type in (kind, "step_event", "event_percent") for e in ctx.c.incoming(t)):
            continue  # a second step at the same date would be indistinguishable from the first
        if kind == "event_percent":
            y = pd.to_numeric(ctx.state.wide(ent.name)[t], errors="coerce")
            if abs(y.mean()) < 2 * y.std():
                continue  # a percent of a level near zero is not a meaningful effect
            ev = ctx.c.events[0].name
            mech = {"type": "event_percent", "event": ev, "percent": 1.0}

            def put(m: dict, f: float) -> None:  # the magnitude is log(1 + percent / 100)
                m["percent"] = 100.0 * math.expm1(f * math.log1p(m["percent"] / 100.0))
        else:
            name = "weekends"
            if name not in {x["name"] for x in ctx.data["calendars"]}:
                ctx.data["calendars"].append({"name": name, "weekdays": [5, 6], "description": "Saturdays and "
                                              "Sundays"})
            mech = {"type": "calendar", "calendar": name, "jump": 1.0}
            put = _times("jump")
        if _sized_edge(ctx, {"id": f"{kind}->{t}", "sources": [], "target": t, "mechanism": mech}, put):
            return True
    return False


def _moderated(ctx: _Ctx, kind: str) -> bool:
    for t in ctx.rng.permutation([x.name for x in ctx.targets]).tolist():
        srcs = ctx.sources(t)
        src = ctx.pick(srcs)
        if src is None:
            continue
        reach = ctx.reach(ctx.c.node(t).entity)
        mean = float(pd.to_numeric(ctx.state.wide(ctx.c.node(t).entity)[src], errors="coerce").mean())
        edge: dict[str, Any] = {"id": f"{src}->{t}[{kind}]", "sources": [src], "target": t,
                                "mechanism": {"type": "linear", "coef": 1.0, "center": mean}}
        if kind == "gate":
            gates = [g for g in srcs if g != src and ctx.c.node(g).kind == "numeric"]
            g = ctx.pick(gates)
            if g is None:
                continue
            cut = float(pd.to_numeric(ctx.state.wide(ctx.c.node(t).entity)[g], errors="coerce").median())
            edge["gate"] = {"variable": g, "threshold": cut, "direction": "below"}
        else:
            if not ctx.dated(t):
                continue
            cats = [n for n in ctx.c.nodes().values() if n.kind == "categorical" and n.entity in reach
                    and n.name in ctx.observed and n.distribution.type == "categorical"
                    and len(n.distribution.categories) <= 4 and min(n.distribution.probs) >= 0.15]
            cat = ctx.pick(cats)
            if cat is None:
                continue
            edge["heterogeneity"] = {"by": [cat.name, "@quarter"],
                                     "multipliers": {f"{cat.distribution.categories[0]}|Q4": 2.0}}
        if _sized_edge(ctx, edge, _times("coef")):
            return True
    return False


def _ratio(ctx: _Ctx) -> bool:
    names = set(ctx.c.nodes())
    for s in ctx.rng.permutation(len(ctx.c.systems)).tolist():
        sys = ctx.c.systems[s]
        nums = [v for v in sys.variables if ctx.c.node(v).kind == "numeric" and ctx.c.node(v).entity == sys.entity]
        if len(nums) < 2:
            continue
        wide = ctx.state.wide(sys.entity)
        for den in nums:
            d = pd.to_numeric(wide[den], errors="coerce")
            if d.min() <= 0.2 * d.median():
                continue  # denominators near zero make a ratio meaningless
            num = ctx.pick([v for v in nums if v != den])
            name = f"{num}_per_{den}"
            if name in names:
                continue
            ratio = (pd.to_numeric(wide[num], errors="coerce") / d).abs().median()
            if not np.isfinite(ratio) or ratio == 0:
                continue
            # keep about five significant digits, or the observed ratio rounds to a constant
            digits = int(min(12, max(2, 4 - math.floor(math.log10(ratio)))))
            ctx.data["variables"].append({"name": name, "entity": sys.entity, "decimals": digits,
                                          "derive": {"op": "ratio", "numerator": num, "denominator": den},
                                          "description": f"{num} divided by {den}"})
            ctx.data["systems"][s]["variables"].append(name)
            return True
    return False


def _aggregate(ctx: _Ctx) -> bool:
    blank = {d.variable for s in ctx.c.systems for d in s.defects if d.type == "missing"}
    for child in ctx.rng.permutation([e.name for e in ctx.c.entities if e.parent and e.kind != "panel"]).tolist():
        parent = str(ctx.c.entity(child).parent)
        home = [i for i, s in enumerate(ctx.c.systems) if s.entity == parent]
        vals = [v for s in ctx.c.systems if s.entity == child for v in s.variables
                if ctx.c.node(v).kind in ("numeric", "count") and ctx.c.node(v).entity == child and v not in blank]
        of = ctx.pick(vals)
        if of is None or not home:
            continue
        name = f"total_{of}"
        if name in ctx.c.nodes():
            continue
        ctx.data["variables"].append({"name": name, "entity": parent, "derive": {"op": "aggregate", "of": of},
                                      "description": f"sum of {of} over the {child} of each {parent[:-1]}"})
        ctx.data["systems"][home[0]]["variables"].append(name)
        return True
    return False


def _balance(ctx: _Ctx) -> bool:
    """A stock accumulating an observed flow of a panel (cumulative revenue of a branch)."""
    blank = {d.variable for s in ctx.c.systems for d in s.defects if d.type == "missing"}
    for s in ctx.rng.permutation(len(ctx.c.systems)).tolist():
        sys = ctx.c.systems[s]
        if ctx.c.entity(sys.entity).kind != "panel":
            continue
        flows = [v for v in sys.variables if ctx.c.node(v).kind in ("numeric", "count")
                 and ctx.c.node(v).entity == sys.entity and v not in blank]
        flow = ctx.pick(flows)
        if flow is None or f"cumulative_{flow}" in ctx.c.nodes():
            continue
        ctx.data["variables"].append({"name": f"cumulative_{flow}", "entity": sys.entity,
                                      "derive": {"op": "balance", "inflows": [flow]},
                                      "description": f"running total of {flow} since the start of the timeline"})
        ctx.data["systems"][s]["variables"].append(f"cumulative_{flow}")
        return True
    return False


def graft_mechanisms(c: WorldContract, seed: int, rng: np.random.Generator, count: int = 2) -> WorldContract:
    """The contract with up to `count` grafts of distinct kinds (drawn by rng) that fit its variables."""
    ctx = _Ctx(c, seed, rng)
    done = 0
    for kind in rng.permutation(GRAFTS).tolist():
        if done >= count:
            break
        if kind in ("power", "piecewise", "binned"):
            ok = _shape(ctx, kind)
        elif kind in ("event_percent", "calendar"):
            ok = _sourceless(ctx, kind)
        elif kind in ("gate", "moderators"):
            ok = _moderated(ctx, kind)
        else:
            ok = {"ratio": _ratio, "aggregate": _aggregate, "balance": _balance}[kind](ctx)
        done += ok
    return WorldContract.model_validate(ctx.data)
