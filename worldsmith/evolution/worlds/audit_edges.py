"""Edge audit: re-estimate every edge's magnitude from reconciled observed data.

For each target the auditor rebuilds, from observed columns, the basis of every incoming edge
(the mechanism's shape is read from the contract: threshold, half-saturation, lag, event date,
seasonal period, labels) and fits all magnitudes jointly, so each edge is judged holding the
target's other causes fixed. Heterogeneous edges get one magnitude per group; edges whose basis columns are
identical (same source, target, shape and grouping column) share one term, judged against the sum of their
magnitudes. An edge passes when the estimate has the contract's sign, is significant and is within
max(35 %, 3 standard errors) of the contract's magnitude; with fewer than MIN_ROWS complete rows (or
MIN_ROWS_PER_TERM per term) nothing can be confirmed and the target's edges fail.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from worldsmith.core.world_contract import Edge, WorldContract
from worldsmith.core.world_contract_types import SOURCELESS
from .fit import fit_target
from .mechanisms import edge_basis
from .moderators import gate_open, group_labels, moderator_columns
from .reconcile import Reconciled

REL_TOL = 0.35
SE_TOL = 3.0
Z_MIN = 2.0
MAX_FIT_ROWS = 200_000
MIN_ROWS = 30  # below this (or MIN_ROWS_PER_TERM per estimated term) standard errors mean nothing: the claim fails
MIN_ROWS_PER_TERM = 10


class CheckResult(BaseModel):
    kind: Literal["edge", "invariant", "phenomenon", "claim"]
    id: str
    status: Literal["pass", "fail", "skip"]
    observed: Any = None
    expected: Any = None
    reason: str = ""
    details: dict[str, Any] = Field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == "pass"


class FrameView:
    """RowView over a reconciled wide table."""

    def __init__(self, c: WorldContract, entity: str, df: pd.DataFrame):
        self.c, self.e, self.df = c, c.entity(entity), df

    def col(self, name: str) -> np.ndarray:
        s = self.df[name]
        if self.c.node(name).kind in ("numeric", "count", "binary"):
            return pd.to_numeric(s, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        return s.astype(object).to_numpy()

    def days(self) -> np.ndarray:
        t = pd.to_datetime(self.df[self.e.time_column])
        return ((t - pd.Timestamp(self.c.timeline.start)).dt.days).to_numpy(dtype=float, na_value=np.nan)

    def lagged(self, name: str, lag: int) -> np.ndarray:
        unit = self.df[self.c.entity(self.e.parent).key].to_numpy()  # type: ignore[arg-type]
        idx = self.c.timeline.periods().get_indexer(pd.to_datetime(self.df["period"]))
        s = pd.Series(self.col(name), index=pd.MultiIndex.from_arrays([unit, idx]))
        s = s[~s.index.duplicated()]
        return s.reindex(pd.MultiIndex.from_arrays([unit, idx - lag])).to_numpy(dtype=float)


def judge(est: float, se: float, exp: float) -> tuple[bool, str]:
    if not (np.isfinite(est) and np.isfinite(se)):
        return False, "could not be estimated"
    if exp == 0:
        ok = abs(est) <= SE_TOL * se
        return ok, f"estimate {est:.4g} ± {se:.2g} vs 0"
    z = abs(est) / se if se > 0 else np.inf
    if np.sign(est) != np.sign(exp):
        return False, f"sign flipped: estimate {est:.4g} ± {se:.2g} vs contract {exp:.4g}"
    if z < Z_MIN:
        return False, f"not detectable: estimate {est:.4g} ± {se:.2g} (z={z:.1f}) vs contract {exp:.4g}"
    if abs(est - exp) > max(REL_TOL * abs(exp), SE_TOL * se):
        return False, f"size off: estimate {est:.4g} ± {se:.2g} vs contract {exp:.4g}"
    return True, f"estimate {est:.4g} ± {se:.2g} vs contract {exp:.4g}"


def _needed(c: WorldContract, e: Edge) -> list[str]:
    cols = list(e.sources) + moderator_columns(e)
    ent = c.entity(c.node(e.target).entity)
    dated = e.heterogeneity is not None and any(x.startswith("@") for x in e.heterogeneity.columns)
    if e.mechanism.type in SOURCELESS or dated:
        cols.append(str(ent.time_column))
    if e.mechanism.type == "lag":
        cols += ["period", c.entity(ent.parent).key]  # type: ignore[arg-type]
    return cols


def _columns(c: WorldContract, e: Edge, view: FrameView, kind: str) -> list[tuple[np.ndarray, float, str, bool]]:
    """Design columns of one edge: one per basis column, split per group (heterogeneity); a gated edge adds, per
    column, its complement on the rows where the gate is shut, which the contract claims has no effect (0)."""
    b = edge_basis(c, e, view, kind)
    out = []
    g = group_labels(c, e, view) if e.heterogeneity is not None else None
    gate = gate_open(e, view)
    for k, label in enumerate(b.labels):
        split = [(b.matrix[:, k], float(b.magnitudes[k]), label)]
        if g is not None:
            split = []
            for grp in sorted({x for x in g if not pd.isna(x)}):
                col = b.matrix[:, k] * (g == grp)
                col[pd.isna(g)] = np.nan
                mult = e.heterogeneity.multipliers.get(grp, 1.0)  # type: ignore[union-attr]
                split.append((col, float(b.magnitudes[k]) * mult, f"{label}@{grp}"))
        for col, mag, lab in split:
            if gate is None:
                out.append((col, mag, lab, b.multiplicative))
            else:
                out.append((col * gate, mag, f"{lab}@gate_open", b.multiplicative))
                out.append((col * (1.0 - gate), 0.0, f"{lab}@gate_shut", b.multiplicative))
    return out


def audit_target(c: WorldContract, target: str, rec: Reconciled) -> list[CheckResult]:
    edges = c.incoming(target)
    node = c.node(target)
    wide = rec.wide(node.entity)
    if wide is None or target not in wide.columns:
        return [CheckResult(kind="edge", id=str(e.id), status="skip", reason=f"target `{target}` is not observed")
                for e in edges]
    results, usable = [], []
    for e in edges:
        lacking = [x for x in _needed(c, e) if x not in wide.columns]
        if lacking:
            results.append(CheckResult(kind="edge", id=str(e.id), status="skip",
                                       reason=f"inputs not observed: {lacking}"))
        else:
            usable.append(e)
    if not usable:
        return results
    view = FrameView(c, node.entity, wide)
    cols: list[tuple[str, np.ndarray, float, str, bool]] = []
    for e in usable:
        cols += [(str(e.id), *x) for x in _columns(c, e, view, node.kind)]
    slot = _shared_slots(cols)
    uniq = sorted(set(slot))
    X = np.column_stack([cols[u][1] for u in uniq])
    y = view.col(target)
    ok = np.isfinite(y) & np.isfinite(X).all(axis=1)
    rows = np.flatnonzero(ok)
    if len(rows) > MAX_FIT_ROWS:  # an evenly spaced subsample estimates magnitudes just as well, much faster
        rows = rows[np.linspace(0, len(rows) - 1, MAX_FIT_ROWS).astype(int)]
    Xf, yf = X[rows], y[rows]
    live = Xf.std(axis=0) > 0 if len(rows) > 1 else np.zeros(len(uniq), dtype=bool)
    u_est = np.full(len(uniq), np.nan)
    u_se = np.full(len(uniq), np.nan)
    method = "none"
    few = len(rows) < max(MIN_ROWS, MIN_ROWS_PER_TERM * len(uniq))
    if live.any() and not few:
        res = fit_target(node.kind, Xf[:, live], np.array([cols[u][4] for u in uniq])[live], yf)
        u_est[live], u_se[live], method = res.coef, res.se, res.method
    pos = {u: k for k, u in enumerate(uniq)}
    # columns with the same basis (same source, target, shape and group) are one term: its estimate is judged
    # against the sum of the contract's magnitudes of every edge that shares it
    shared_exp = {u: sum(cols[i][2] for i in range(len(cols)) if slot[i] == u) for u in uniq}
    est = np.array([u_est[pos[slot[i]]] for i in range(len(cols))])
    se = np.array([u_se[pos[slot[i]]] for i in range(len(cols))])
    exp = [shared_exp[slot[i]] for i in range(len(cols))]
    for e in usable:
        idx = [i for i, x in enumerate(cols) if x[0] == e.id]
        too_few = (False, f"only {len(rows)} complete rows for {len(uniq)} estimated terms: too few to confirm "
                          "the claim")
        verdicts = [too_few if few else judge(est[i], se[i], exp[i]) for i in idx]
        labels = [cols[i][3] for i in idx]
        single = len(idx) == 1
        joint = sorted({cols[j][0] for i in idx for j in range(len(cols)) if slot[j] == slot[i]} - {e.id})
        details = {"n": len(rows), "method": method, "mechanism": e.mechanism.type,
                   "se": {labels[j]: float(se[i]) for j, i in enumerate(idx)}}
        if joint:
            details["estimated_jointly_with"] = joint
        results.append(CheckResult(
            kind="edge", id=str(e.id), status="pass" if all(v[0] for v in verdicts) else "fail",
            observed=float(est[idx[0]]) if single else {labels[j]: float(est[i]) for j, i in enumerate(idx)},
            expected=exp[idx[0]] if single else {labels[j]: exp[i] for j, i in enumerate(idx)},
            reason="; ".join(f"{labels[j]}: {v[1]}" if not single else v[1] for j, v in enumerate(verdicts)),
            details=details))
    return results


def _shared_slots(cols: list[tuple[str, np.ndarray, float, str, bool]]) -> list[int]:
    """For each design column, the index of the first column with the same values (and the same additive or
    multiplicative role): two edges from one source into one target split by one grouping column produce identical
    columns, which a regression cannot tell apart, so they are estimated as one term."""
    slot: list[int] = []
    for i, (_, arr, _, _, mult) in enumerate(cols):
        same = next((j for j in range(i) if slot[j] == j and cols[j][4] == mult
                     and np.array_equal(cols[j][1], arr, equal_nan=True)), i)
        slot.append(same)
    return slot


def audit_edges(c: WorldContract, rec: Reconciled) -> list[CheckResult]:
    out: list[CheckResult] = []
    for target in dict.fromkeys(e.target for e in c.edges):
        out += audit_target(c, target, rec)
    order = {str(e.id): i for i, e in enumerate(c.edges)}
    return sorted(out, key=lambda r: order[r.id])
