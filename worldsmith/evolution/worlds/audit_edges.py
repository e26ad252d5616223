"""Edge audit: re-estimate every edge's magnitude from reconciled observed data.

For each target the auditor rebuilds, from observed columns, the basis of every incoming edge
(the mechanism's shape is read from the contract: threshold, half-saturation, lag, event date,
seasonal period, labels) and fits all magnitudes jointly, so each edge is judged holding the
target's other causes fixed. Heterogeneous edges get one magnitude per group.
An edge passes when the estimate has the contract's sign, is significant and is within
max(35 %, 3 standard errors) of the contract's magnitude.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from worldsmith.core.world_contract import Edge, WorldContract
from .fit import fit_target
from .mechanisms import edge_basis
from .reconcile import Reconciled

REL_TOL = 0.35
SE_TOL = 3.0
Z_MIN = 2.0
MAX_FIT_ROWS = 200_000


class CheckResult(BaseModel):
    kind: Literal["edge", "invariant", "phenomenon"]
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
    cols = list(e.sources)
    if e.heterogeneity:
        cols.append(e.heterogeneity.by)
    ent = c.entity(c.node(e.target).entity)
    if e.mechanism.type in ("seasonal", "step_event"):
        cols.append(str(ent.time_column))
    if e.mechanism.type == "lag":
        cols += ["period", c.entity(ent.parent).key]  # type: ignore[arg-type]
    return cols


def _columns(c: WorldContract, e: Edge, view: FrameView, kind: str) -> list[tuple[np.ndarray, float, str, bool]]:
    b = edge_basis(c, e, view, kind)
    out = []
    for k, label in enumerate(b.labels):
        if e.heterogeneity is None:
            out.append((b.matrix[:, k], float(b.magnitudes[k]), label, b.multiplicative))
            continue
        g = view.col(e.heterogeneity.by)
        present = sorted({x for x in g if not pd.isna(x)})
        for grp in present:
            col = b.matrix[:, k] * (g == grp)
            col[pd.isna(g)] = np.nan
            mult = e.heterogeneity.multipliers.get(grp, 1.0)
            out.append((col, float(b.magnitudes[k]) * mult, f"{label}@{grp}", b.multiplicative))
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
    X = np.column_stack([x[1] for x in cols])
    y = view.col(target)
    ok = np.isfinite(y) & np.isfinite(X).all(axis=1)
    rows = np.flatnonzero(ok)
    if len(rows) > MAX_FIT_ROWS:  # an evenly spaced subsample estimates magnitudes just as well, much faster
        rows = rows[np.linspace(0, len(rows) - 1, MAX_FIT_ROWS).astype(int)]
    Xf, yf = X[rows], y[rows]
    live = Xf.std(axis=0) > 0
    res = fit_target(node.kind, Xf[:, live], np.array([x[4] for x in cols])[live], yf)
    est = np.full(len(cols), np.nan)
    se = np.full(len(cols), np.nan)
    est[live], se[live] = res.coef, res.se
    for e in usable:
        idx = [i for i, x in enumerate(cols) if x[0] == e.id]
        verdicts = [judge(est[i], se[i], cols[i][2]) for i in idx]
        labels = [cols[i][3] for i in idx]
        single = len(idx) == 1
        results.append(CheckResult(
            kind="edge", id=str(e.id), status="pass" if all(v[0] for v in verdicts) else "fail",
            observed=float(est[idx[0]]) if single else {labels[j]: float(est[i]) for j, i in enumerate(idx)},
            expected=cols[idx[0]][2] if single else {labels[j]: cols[i][2] for j, i in enumerate(idx)},
            reason="; ".join(f"{labels[j]}: {v[1]}" if not single else v[1] for j, v in enumerate(verdicts)),
            details={"n": int(len(rows)), "method": res.method, "mechanism": e.mechanism.type,
                     "se": {labels[j]: float(se[i]) for j, i in enumerate(idx)}}))
    return results


def audit_edges(c: WorldContract, rec: Reconciled) -> list[CheckResult]:
    out: list[CheckResult] = []
    for target in dict.fromkeys(e.target for e in c.edges):
        out += audit_target(c, target, rec)
    order = {str(e.id): i for i, e in enumerate(c.edges)}
    return sorted(out, key=lambda r: order[r.id])
