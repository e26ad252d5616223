"""Warnings about claims a world can never confirm: invariants on columns no observation system exposes, and
variables whose distribution puts a large share of values at a declared bound (clipping flattens the mechanism
there, so effects measured on those rows are biased towards zero)."""

from __future__ import annotations

import math
from typing import Any

from worldsmith.core.world_contract import NodeInfo, WorldContract

from .problems import Problems

CLIP_WARN_SHARE = 0.05  # a bound that clips more than this share of a distribution's mass is probably a mistake


def _observed(c: WorldContract) -> tuple[set[str], set[str]]:
    """(variables some system records, entities some system records)."""
    return ({v for s in c.systems for v in s.variables}, {s.entity for s in c.systems})


def _invariant_columns(c: WorldContract, inv: Any) -> tuple[list[str], str | None]:
    """Variables an invariant reads, and the entity whose rows it needs (for id/link checks)."""
    if inv.kind in ("non_negative", "bounds", "units"):
        return [inv.variable], None
    if inv.kind == "sum":
        return [inv.total, *inv.parts], None
    if inv.kind in ("unique_ids", "foreign_key"):
        return [], inv.entity
    return [], None  # shared_event: checked against the systems it names


def check_observability(c: WorldContract, p: Problems) -> None:
    variables, entities = _observed(c)
    for i, inv in enumerate(c.invariants):
        cols, entity = _invariant_columns(c, inv)
        unseen = [v for v in cols if v not in variables]
        if unseen:
            p.warn("unobservable_invariant", f"invariants[{i}]({inv.kind})",
                   f"no observation system records {unseen}, so this invariant can never be checked",
                   f"add {unseen} to a system's variables, or drop the invariant")
        if entity is not None and entity not in entities:
            p.warn("unobservable_invariant", f"invariants[{i}]({inv.kind})",
                   f"no observation system records entity {entity}, so this invariant can never be checked",
                   f"add a system on {entity}, or drop the invariant")
        if inv.kind == "foreign_key" and entity is not None and c.entity(entity).parent not in entities:
            p.warn("unobservable_invariant", f"invariants[{i}]({inv.kind})",
                   f"no observation system records the parent {c.entity(entity).parent}, so its ids cannot be "
                   f"resolved", f"add a system on {c.entity(entity).parent}")


def _normal_cdf(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def share_outside(n: NodeInfo, lower: float | None, upper: float | None) -> float | None:
    """Share of a root variable's distribution below `lower` or above `upper` (None: not computable statically)."""
    d = n.distribution
    if d is None:
        return None
    lo = lower if lower is not None else -math.inf
    hi = upper if upper is not None else math.inf
    if d.type == "normal":
        if d.sd <= 0:
            return float(not lo <= d.mean <= hi)
        return _normal_cdf((lo - d.mean) / d.sd) + 1.0 - _normal_cdf((hi - d.mean) / d.sd)
    if d.type == "lognormal":
        below = _normal_cdf((math.log(lo) - d.mu) / d.sigma) if lo > 0 and d.sigma > 0 else 0.0
        above = 1.0 - _normal_cdf((math.log(hi) - d.mu) / d.sigma) if 0 < hi < math.inf and d.sigma > 0 else 0.0
        return below + above
    if d.type == "uniform" and d.high > d.low:
        width = d.high - d.low
        return max(0.0, min(lo, d.high) - d.low) / width + max(0.0, d.high - max(hi, d.low)) / width
    return None


def check_clipping(c: WorldContract, nodes: dict[str, NodeInfo], p: Problems) -> None:
    """Warn when a root variable's bounds cut off more than CLIP_WARN_SHARE of its distribution (the engine clips
    those values onto the bound). Caused variables depend on the data and are not judged here."""
    from .validate import _node_path

    for name, n in nodes.items():
        if n.bounds is None or c.incoming(name) or n.kind not in ("numeric", "count"):
            continue
        share = share_outside(n, n.bounds.lower, n.bounds.upper)
        if share is not None and share > CLIP_WARN_SHARE:
            p.warn("clipped_at_bounds", f"{_node_path(c, n)}.bounds",
                   f"about {share:.0%} of {name}'s {n.distribution.type} distribution lies outside "
                   f"[{n.bounds.lower}, {n.bounds.upper}] and would be clipped onto the bound",
                   "widen the bounds or move the distribution inside them")


POWER_WARN_Z = 4.0  # the audit confirms an edge at z >= 2; below this expected z a true world fails too often


def _share_above(n: NodeInfo, x: float) -> float | None:
    """Share of a root variable's distribution above x (None when not computable statically)."""
    below = share_outside(n, x, None)
    return None if below is None else 1.0 - below


def _basis_sd(c: WorldContract, e: Any, nodes: dict[str, NodeInfo]) -> float | None:
    """Standard deviation of an edge's basis column, for the shapes whose spread follows from the contract alone."""
    m = e.mechanism
    src = nodes.get(e.sources[0]) if e.sources else None
    d = src.distribution if src is not None and not c.incoming(src.name) else None
    if m.type in ("linear", "lag") and d is not None and not getattr(m, "levels", None):
        return {"normal": lambda: d.sd, "uniform": lambda: (d.high - d.low) / math.sqrt(12),
                "bernoulli": lambda: math.sqrt(d.p * (1 - d.p))}.get(d.type, lambda: None)()
    if m.type == "threshold" and src is not None:
        q = _share_above(src, m.threshold)
        return None if q is None else math.sqrt(q * (1 - q))
    if m.type == "step_event":
        q = (c.timeline.end - c.event(m.event).date).days / c.timeline.days
        return math.sqrt(max(q * (1 - q), 0.0))
    if m.type == "seasonal":
        return math.sqrt(0.5)  # a sine over whole periods
    return None


def check_power(c: WorldContract, nodes: dict[str, NodeInfo], p: Problems) -> None:
    """Warn when an edge's claimed effect is too small for its table's rows and its target's noise: the audit could
    not confirm it even in a world generated exactly as claimed. Judged for numeric targets with normal noise and
    the shapes `_basis_sd` knows; expected z = |magnitude| * sd(basis) * sqrt(rows) / noise sd."""
    from .validate import entity_rows

    for i, e in enumerate(c.edges):
        tgt = nodes.get(e.target)
        if tgt is None or tgt.kind != "numeric" or tgt.noise.type != "normal" or tgt.noise.sd <= 0:
            continue
        sd = _basis_sd(c, e, nodes)
        mag = {"linear": "coef", "lag": "coef", "threshold": "jump", "step_event": "jump", "seasonal": "amplitude"}
        if sd is None or e.mechanism.type not in mag:
            continue
        size = abs(getattr(e.mechanism, mag[e.mechanism.type]))
        rows = entity_rows(c, c.entity(tgt.entity))
        z = size * sd * math.sqrt(rows) / tgt.noise.sd
        if size > 0 and z < POWER_WARN_Z:
            p.warn("undetectable_edge", f"edges[{i}]({e.id})",
                   f"with {rows} rows and noise sd {tgt.noise.sd:g} the claimed {mag[e.mechanism.type]} {size:g} "
                   f"is expected at z = {z:.1f}: too small for the audit to confirm",
                   f"raise the effect, lower {tgt.name}'s noise, or add rows (z >= {POWER_WARN_Z:g} needs about "
                   f"{math.ceil(rows * (POWER_WARN_Z / max(z, 1e-9)) ** 2)} rows)")
