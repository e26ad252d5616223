"""Invariant and phenomenon checks on reconciled observed data."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .audit_claims import phenomenon_claims
from .audit_edges import CheckResult
from worldsmith.core.world_contract import WorldContract
from .recipes import evaluate, recipe_columns, recipe_entity, where_columns
from .reconcile import Reconciled


def _inv(inv: Any, ok: bool, reason: str, observed: Any = None, expected: Any = None) -> CheckResult:
    target = getattr(inv, "entity", None) or getattr(inv, "variable", None) or getattr(inv, "total", None) \
        or getattr(inv, "event", None)
    return CheckResult(kind="invariant", id=f"{inv.kind}:{target}", status="pass" if ok else "fail",
                       observed=observed, expected=expected, reason=reason)


def _skip(inv: Any, reason: str) -> CheckResult:
    r = _inv(inv, False, reason)
    r.status = "skip"
    return r


def _values(c: WorldContract, rec: Reconciled, var: str) -> pd.Series | None:
    wide = rec.wide(c.node(var).entity)
    if wide is None or var not in wide.columns:
        return None
    return pd.to_numeric(wide[var], errors="coerce").dropna()


CLIP_NOTE_SHARE = 0.05  # a larger share of observed values sitting exactly on a declared bound is worth a note


def clipping_notes(c: WorldContract, rec: Reconciled) -> list[str]:
    """Variables with a large share of observed values exactly at a declared bound: the engine clipped them there,
    which flattens every mechanism into that variable (its estimated effects shrink towards zero)."""
    notes = []
    for name, n in c.nodes().items():
        if n.bounds is None or n.kind not in ("numeric", "count"):
            continue
        v = _values(c, rec, name)
        if v is None or v.empty:
            continue
        for side, bound in (("lower", n.bounds.lower), ("upper", n.bounds.upper)):
            share = float((v == bound).mean()) if bound is not None else 0.0
            if share > CLIP_NOTE_SHARE:
                notes.append(f"`{name}`: {share:.1%} of observed values sit at the {side} bound {bound:g} "
                             f"(clipped); effects on `{name}` are attenuated there")
    return notes


def check_invariant(c: WorldContract, inv: Any, rec: Reconciled) -> CheckResult:
    if inv.kind == "unique_ids":
        t = rec.table(inv.entity)
        key = c.entity(inv.entity).key
        if t is None or key not in t.columns:
            return _skip(inv, f"{inv.entity} ids are not observed")
        bad, dup = int(t[key].isna().sum()), int(t[key].duplicated().sum())
        removed = {s: n for s, n in rec.removed.items() if c.system(s).entity == inv.entity}
        return _inv(inv, bad == 0 and dup == 0, f"{len(t)} distinct ids after normalising spellings; "
                    f"{bad} unreadable, {dup} clashing; repeated records removed per system: {removed}", len(t))
    if inv.kind == "foreign_key":
        e = c.entity(inv.entity)
        child, parent = rec.table(e.name), rec.table(str(e.parent))
        fk = c.entity(str(e.parent)).key
        if child is None or parent is None or fk not in child.columns:
            return _skip(inv, f"{e.name} -> {e.parent} link is not observable")
        vals = child[fk]
        share = float(vals.dropna().isin(set(parent[fk].dropna())).mean()) if vals.notna().any() else 0.0
        return _inv(inv, share == 1.0 and vals.notna().all(), f"{share:.2%} of {fk} values resolve to a {e.parent} "
                    f"record; {int(vals.isna().sum())} blank", share, 1.0)
    if inv.kind in ("non_negative", "bounds"):
        v = _values(c, rec, inv.variable)
        if v is None:
            return _skip(inv, f"{inv.variable} is not observed")
        n = c.node(inv.variable)
        eps = 10.0 ** -(n.decimals if n.decimals is not None else 6)
        lo = 0.0 if inv.kind == "non_negative" else n.bounds.lower  # type: ignore[union-attr]
        hi = None if inv.kind == "non_negative" else n.bounds.upper  # type: ignore[union-attr]
        bad = ((v < lo - eps) if lo is not None else False) | ((v > hi + eps) if hi is not None else False)
        nbad = int(np.sum(bad))
        return _inv(inv, nbad == 0, f"{nbad} of {len(v)} values outside [{lo}, {hi}]", [float(v.min()), float(v.max())],
                    [lo, hi])
    if inv.kind == "units":
        return _check_units(c, inv, rec)
    if inv.kind == "shared_event":
        return _check_event(c, inv, rec)
    if inv.kind == "sum":
        wide = rec.wide(c.node(inv.total).entity)
        cols = [inv.total, *inv.parts]
        if wide is None or any(x not in wide.columns for x in cols):
            return _skip(inv, f"columns {cols} are not all observed")
        d = wide[cols].apply(pd.to_numeric, errors="coerce").dropna()
        decimals = max(c.node(x).decimals or 0 for x in cols)
        gap = (d[inv.total] - d[inv.parts].sum(axis=1)).abs()
        share = float((gap <= inv.tolerance + len(cols) * 10.0 ** -decimals).mean()) if len(d) else 0.0
        return _inv(inv, share >= 0.99, f"{share:.2%} of {len(d)} complete rows satisfy "
                    f"{inv.total} = {' + '.join(inv.parts)}", share, 1.0)
    raise ValueError(f"unknown invariant kind {inv.kind!r}")


def _check_units(c: WorldContract, inv: Any, rec: Reconciled) -> CheckResult:
    notes = rec.plan.unit_notes.get(inv.variable, [])
    if not notes:
        return _inv(inv, True, f"no unit change documented; values read as {inv.unit}")
    wide = rec.wide(c.node(inv.variable).entity)
    time = c.entity(c.node(inv.variable).entity).time_column
    for n in notes:
        if n.from_unit != inv.unit:
            return _inv(inv, False, f"memo says `{inv.variable}` was recorded in {n.from_unit}, "
                        f"contract says {inv.unit}")
        if wide is None or time not in wide.columns:
            return _skip(inv, "dates needed to check the unit change are not observed")
        v = pd.to_numeric(wide[inv.variable], errors="coerce")
        after = wide[time] >= pd.Timestamp(n.since)
        ratio = float(v[after].median() / v[~after].median())
        if not 2 / 3 <= ratio <= 1.5:
            return _inv(inv, False, f"after reconciliation the median still jumps x{ratio:.2f} at {n.since}",
                        ratio, 1.0)
    return _inv(inv, True, f"documented change(s) to {[n.to_unit for n in notes]} undone; all values in {inv.unit}")


def _check_event(c: WorldContract, inv: Any, rec: Reconciled) -> CheckResult:
    want = c.event(inv.event).date.isoformat()
    got = rec.plan.events.get(inv.event)
    if got != want:
        return _inv(inv, False, f"the events memo dates {inv.event} at {got}, contract at {want}", got, want)
    for s in inv.systems:
        rec.table(c.system(s).entity)
        df = rec.by_system.get(s)
        time = c.entity(c.system(s).entity).time_column
        if df is None or time not in df.columns:
            return _skip(inv, f"system {s} dates are not observed")
        lo, hi = df[time].min(), df[time].max()
        if not lo < pd.Timestamp(want) <= hi:
            return _inv(inv, False, f"{s} covers {lo.date()}..{hi.date()}, not {want}")
    return _inv(inv, True, f"{inv.event} ({want}) is in the memo and inside the date range of {inv.systems}", got, want)


def check_phenomenon(c: WorldContract, pid: str, rec: Reconciled, canonical: Any,
                     edges: dict[str, CheckResult] | None = None) -> CheckResult:
    """Recompute the phenomenon on observed data and compare with the canonical value; then require every edge it
    claims (`audit_claims.phenomenon_claims`) to have been confirmed by the edge audit (`edges`, by id)."""
    ph = c.phenomenon(pid)
    base = CheckResult(kind="phenomenon", id=pid, status="fail", expected=canonical)
    if canonical is None:
        base.reason = "no canonical value: the recipe is undefined on the canonical data"
        return base
    entity = recipe_entity(c, ph.recipe)
    wide = rec.wide(entity)
    need = [*recipe_columns(ph.recipe), *where_columns(ph.recipe)]
    if ph.recipe.op == "distinct_count":
        need.append(str(c.entity(ph.recipe.entity).key))  # type: ignore[union-attr]
    lacking = [x for x in need if wide is None or x not in wide.columns]
    if lacking:
        base.reason = f"not recoverable: columns {lacking} are not observed"
        return base
    try:
        observed = evaluate(c, ph.recipe, wide)  # type: ignore[arg-type]
    except (KeyError, ValueError, ZeroDivisionError, TypeError) as err:
        base.reason = f"recipe failed on observed data: {err}"
        return base
    base.observed = observed
    if isinstance(canonical, str) or isinstance(observed, str):
        ok = observed == canonical
        base.reason = f"observed {observed!r} vs canonical {canonical!r}"
    else:
        ok = bool(np.isfinite(observed)) and ph.tolerance.allows(float(observed), float(canonical))
        base.observed = float(observed) if np.isfinite(observed) else None
        base.reason = (f"observed {observed:.6g} vs canonical {canonical:.6g} "
                       f"(tolerance ±{ph.tolerance.width(float(canonical)):.3g})")
    claims = phenomenon_claims(c, ph)
    refuted = [f"{e}: {edges[e].reason}" for e in claims if edges and e in edges and edges[e].status == "fail"]
    if ok and refuted:
        ok = False
        base.reason += "; the effect it claims is not in the data: " + "; ".join(refuted)
    base.status = "pass" if ok else "fail"
    base.details = {"entity": entity, "tolerance": ph.tolerance.model_dump(), "claims": claims}
    return base
