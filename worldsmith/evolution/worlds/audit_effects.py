"""Audit of no-effect and conditional claims (`core.world_contract_claims`) on reconciled observed data.

The source's effect is estimated as one linear term fitted jointly with the bases of the target's declared incoming
edges (the edge audit's design), so a spurious driver that only shares a cause with the target shows no effect once
that cause is held fixed. Edges that themselves involve the claimed source are left out of the design: they are
what the claim is about (an interaction that switches the effect on under the condition, say).

A no-effect claim passes when the whole interval estimate ± EQUIV_Z standard errors lies inside ±bound (an
equivalence test: a noisy estimate near zero is not evidence of no effect). A conditional claim passes when, on the
rows where its condition holds, the effect matches `effect` as an edge would (`audit_edges.judge`), and on the other
rows it passes the no-effect test.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pandas as pd

from worldsmith.core.world_contract import WorldContract
from worldsmith.core.world_contract_claims import ConditionalClaim, NoEffectClaim

from . import kernels
from .audit_edges import MIN_ROWS, CheckResult, FrameView, _columns, _needed, judge
from .fit import fit_target
from .reconcile import Reconciled

EQUIV_Z = 2.0


def estimate_effect(c: WorldContract, source: str, target: str, wide: pd.DataFrame) -> tuple[float, float, int, str]:
    """(estimate, standard error, rows, note) of one unit of `source` on `target`, holding fixed the target's declared
    causes that do not involve `source`; NaN estimate when it cannot be estimated (the note says why)."""
    missing = [x for x in (source, target) if x not in wide.columns]
    if missing:
        return np.nan, np.nan, 0, f"columns {missing} are not observed"
    node = c.node(target)
    view = FrameView(c, node.entity, wide)
    design: list[tuple[np.ndarray, bool]] = [(view.col(source), False)]
    left_out = []
    for e in c.incoming(target):
        if source in e.sources:
            continue
        if any(x not in wide.columns for x in _needed(c, e)):
            left_out.append(str(e.id))
            continue
        design += [(col, mult) for col, _, _, mult in _columns(c, e, view, node.kind)]
    X = np.column_stack([col for col, _ in design])
    mult = np.array([m for _, m in design])
    y = view.col(target)
    ok = np.isfinite(y) & np.isfinite(X).all(axis=1)
    note = f"held fixed: {len(design) - 1} term(s) of {target}'s other causes" + (
        f"; not observed, so not held fixed: {left_out}" if left_out else "")
    n = int(ok.sum())
    if n < max(MIN_ROWS, 10 * X.shape[1]) or np.nanstd(X[ok, 0]) == 0:
        return np.nan, np.nan, n, f"only {n} usable rows (or no variation in {source})"
    res = fit_target(node.kind, X[ok], mult, y[ok])
    return float(res.coef[0]), float(res.se[0]), n, note


def _none(est: float, se: float, bound: float) -> tuple[bool, str]:
    if not (np.isfinite(est) and np.isfinite(se)):
        return False, "could not be estimated"
    hi = abs(est) + EQUIV_Z * se
    return hi <= bound, f"estimate {est:.4g} ± {se:.2g}: |effect| up to {hi:.3g} vs bound {bound:g}"


def _where(claim: ConditionalClaim) -> list[tuple[str, str, Any]]:
    return [(w.column, w.op, w.value.isoformat() if isinstance(w.value, dt.date) else w.value) for w in claim.when]


def check_no_effect(c: WorldContract, claim: NoEffectClaim, wide: pd.DataFrame) -> CheckResult:
    est, se, n, note = estimate_effect(c, claim.source, claim.target, wide)
    ok, why = _none(est, se, claim.bound)
    return CheckResult(kind="claim", id=claim.id, status="pass" if ok else "fail",
                       observed=est if np.isfinite(est) else None, expected=0.0,
                       reason=f"{claim.source} -> {claim.target}: {why}",
                       details={"kind": claim.kind, "n": n, "se": se, "bound": claim.bound, "note": note})


def check_conditional(c: WorldContract, claim: ConditionalClaim, wide: pd.DataFrame) -> CheckResult:
    lacking = [w.column for w in claim.when if w.column not in wide.columns]
    if lacking:
        return CheckResult(kind="claim", id=claim.id, status="fail", reason=f"condition columns {lacking} are "
                           "not observed: the condition cannot be checked")
    inside = kernels.apply_where(wide, _where(claim))
    outside = wide.drop(index=inside.index)
    e_in, s_in, n_in, note = estimate_effect(c, claim.source, claim.target, inside.reset_index(drop=True))
    e_out, s_out, n_out, _ = estimate_effect(c, claim.source, claim.target, outside.reset_index(drop=True))
    ok_in, why_in = judge(e_in, s_in, claim.effect)
    ok_out, why_out = _none(e_out, s_out, claim.bound)
    return CheckResult(kind="claim", id=claim.id, status="pass" if ok_in and ok_out else "fail",
                       observed={"where": e_in if np.isfinite(e_in) else None,
                                 "elsewhere": e_out if np.isfinite(e_out) else None},
                       expected={"where": claim.effect, "elsewhere": 0.0},
                       reason=f"where the condition holds ({n_in} rows): {why_in}; elsewhere ({n_out} rows): {why_out}",
                       details={"kind": claim.kind, "bound": claim.bound, "note": note})


def audit_claims(c: WorldContract, rec: Reconciled) -> list[CheckResult]:
    """Every no-effect and conditional claim of the contract, judged on the target's reconciled wide table."""
    out = []
    for claim in c.claims:
        wide = rec.wide(c.node(claim.target).entity)
        if wide is None:
            out.append(CheckResult(kind="claim", id=claim.id, status="fail",
                                   reason=f"no system records {c.node(claim.target).entity}"))
        elif claim.kind == "no_effect":
            out.append(check_no_effect(c, claim, wide))
        else:
            out.append(check_conditional(c, claim, wide))
    return out
