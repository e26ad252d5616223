"""Audit of exact relations: derived variables (ratio, stock-and-flow balance, aggregate of a finer grain) and
fixed entity attributes, each recomputed from the observed files and compared row by row.

Observed numbers are rounded to their variable's `decimals`, so each row is allowed the error that rounding of the
columns involved can produce; a relation holds when at least PASS_SHARE of the comparable rows agree (documented
defects the reconciliation cannot undo, such as near-duplicates, may break a few). Results are reported as
invariants with ids `derived:<variable>` and `fixed:<attribute>`.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from worldsmith.core.world_contract import WorldContract

from .audit_edges import CheckResult
from .reconcile import Reconciled

PASS_SHARE = 0.95
MIN_COMPARABLE_SHARE = 0.05  # fewer comparable rows than this share of the table confirm nothing


def _half_ulp(c: WorldContract, name: str) -> float:
    """Largest rounding error of an observed value of `name` (a documented unit change written the value as
    value x factor before rounding, so undoing it divides the rounding error by the factor)."""
    n = c.node(name)
    if n.kind in ("count", "binary"):
        return 0.0
    factors = [d.factor for s in c.systems for d in s.defects if d.type == "unit_drift" and d.variable == name]
    widen = max([1.0, *(1.0 / abs(f) for f in factors if f)])
    return 0.5 * 10.0 ** -n.decimals * widen if n.decimals is not None else 0.0


def _num(df: pd.DataFrame, col: str) -> np.ndarray:
    return pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def _verdict(cid: str, got: np.ndarray, want: np.ndarray, tol: np.ndarray, what: str) -> CheckResult:
    ok = np.isfinite(got) & np.isfinite(want)
    n = int(ok.sum())
    if n == 0 or n < MIN_COMPARABLE_SHARE * len(got):  # e.g. the variable is blank almost everywhere
        return CheckResult(kind="invariant", id=cid, status="fail", observed=n, expected=len(got),
                           reason=f"{what}: only {n} of {len(got)} observed rows can be recomputed, too few to "
                                  "confirm the relation")
    close = np.abs(got[ok] - want[ok]) <= tol[ok] * 1.01 + 1e-9 + 1e-9 * np.abs(want[ok])
    share = float(close.mean())
    worst = float(np.max(np.abs(got[ok] - want[ok])))
    return CheckResult(kind="invariant", id=cid, status="pass" if share >= PASS_SHARE else "fail",
                       observed=share, expected=1.0,
                       reason=f"{what}: {share:.1%} of {n} rows agree within rounding (largest gap {worst:.4g})",
                       details={"rows": n})


def _missing(cid: str, cols: list[str]) -> CheckResult:
    return CheckResult(kind="invariant", id=cid, status="skip", reason=f"columns not observed: {cols}")


def _ratio(c: WorldContract, name: str, d: Any, rec: Reconciled) -> CheckResult:
    cid, wide = f"derived:{name}", rec.wide(c.node(name).entity)
    cols = [name, d.numerator, d.denominator]
    if wide is None or any(x not in wide.columns for x in cols):
        return _missing(cid, [x for x in cols if wide is None or x not in wide.columns])
    v, num, den = (_num(wide, x) for x in cols)
    with np.errstate(invalid="ignore", divide="ignore"):
        want = np.where(den != 0, num / np.where(den != 0, den, 1.0) * d.scale, np.nan)
        en, ed = _half_ulp(c, d.numerator), _half_ulp(c, d.denominator)
        tol = abs(d.scale) * (en / np.abs(den) + np.abs(num) * ed / den ** 2) + _half_ulp(c, name)
    return _verdict(cid, v, want, tol, f"{name} = {d.numerator} / {d.denominator} x {d.scale:g}")


def _unit_key(c: WorldContract, entity: str) -> str:
    return str(c.entity(str(c.entity(entity).parent)).key)


def _balance(c: WorldContract, name: str, d: Any, rec: Reconciled) -> CheckResult:
    cid, ent = f"derived:{name}", c.node(name).entity
    wide, unit = rec.wide(ent), _unit_key(c, ent)
    cols = [name, unit, "period", *d.inflows, *d.outflows]
    if wide is None or any(x not in wide.columns for x in cols):
        return _missing(cid, [x for x in cols if wide is None or x not in wide.columns])
    grid = c.timeline.periods()
    df = wide[cols].assign(_t=grid.get_indexer(pd.to_datetime(wide["period"]))).sort_values([unit, "_t"])
    stock = _num(df, name)
    prev = df.groupby(unit, sort=False)[name].shift(1)
    gap = df.groupby(unit, sort=False)["_t"].diff()
    prev = np.where(df["_t"].to_numpy() == 0, d.initial,
                    np.where(gap.to_numpy() == 1, pd.to_numeric(prev, errors="coerce").to_numpy(dtype=float), np.nan))
    flow = sum((_num(df, x) for x in d.inflows), np.zeros(len(df))) - \
        sum((_num(df, x) for x in d.outflows), np.zeros(len(df)))
    tol = 2 * _half_ulp(c, name) + sum(_half_ulp(c, x) for x in [*d.inflows, *d.outflows])
    return _verdict(cid, stock - prev, flow, np.full(len(df), tol),
                    f"{name} changes each period by {' + '.join(d.inflows) or '0'}"
                    + "".join(f" - {x}" for x in d.outflows))


def _period_of(c: WorldContract, dates: pd.Series) -> pd.Series:
    grid = c.timeline.periods()
    t = pd.to_datetime(dates, errors="coerce")
    k = np.searchsorted(grid.to_numpy(), t.to_numpy(), side="right") - 1
    out = pd.Series(grid[np.clip(k, 0, len(grid) - 1)], index=dates.index)
    return out.where(t.notna() & (k >= 0))


def _aggregate(c: WorldContract, name: str, d: Any, rec: Reconciled) -> CheckResult:
    cid, coarse_ent, fine_ent = f"derived:{name}", c.node(name).entity, c.node(d.of).entity
    t = c.entity(coarse_ent)
    keys = [str(t.key)] if t.kind != "panel" else [_unit_key(c, coarse_ent), "period"]
    fine, coarse = rec.wide(fine_ent), rec.wide(coarse_ent)
    need_fine = [keys[0], d.of] + ([str(c.entity(fine_ent).time_column)] if t.kind == "panel" else [])
    if fine is None or coarse is None or any(x not in fine.columns for x in need_fine) \
            or any(x not in coarse.columns for x in [*keys, name]):
        return _missing(cid, [name, d.of, *keys])
    f = pd.DataFrame({keys[0]: fine[keys[0]].to_numpy(), "_v": _num(fine, d.of)})
    if t.kind == "panel":
        f["period"] = _period_of(c, fine[str(c.entity(fine_ent).time_column)]).to_numpy()
    f = f.dropna(subset=keys)
    g = f.groupby(keys)["_v"]
    agg = g.agg(d.how if d.how != "count" else "size")
    complete = g.apply(lambda s: bool(s.notna().all())) if d.how != "count" else pd.Series(True, index=agg.index)
    rows = g.size()
    co = coarse[[*keys, name]].copy()
    if t.kind == "panel":
        co["period"] = pd.to_datetime(co["period"], errors="coerce")
    co = co.dropna(subset=keys).drop_duplicates(subset=keys).set_index(keys)
    want = agg.where(complete).reindex(co.index)  # a group with a blank fine value cannot be recomputed
    if d.how in ("sum", "count"):
        want[~co.index.isin(agg.index)] = 0.0  # a coarse row without any fine row sums to 0
    ulp = _half_ulp(c, d.of)
    spread = {"sum": rows.reindex(co.index).fillna(0).to_numpy(dtype=float) * ulp,
              "count": np.zeros(len(co))}.get(d.how, np.full(len(co), ulp))
    got = pd.to_numeric(co[name], errors="coerce").to_numpy(dtype=float)
    return _verdict(cid, got, want.to_numpy(dtype=float), spread + _half_ulp(c, name),
                    f"{name} = {d.how} of {d.of} per {' x '.join(keys)}")


_ID_NUMBER = re.compile(r"(\d+)\s*$")


def _fixed(c: WorldContract, entity: str, attr: Any, rec: Reconciled) -> CheckResult:
    cid = f"fixed:{attr.name}"
    table, key = rec.table(entity), str(c.entity(entity).key)
    if table is None or attr.name not in table.columns or key not in table.columns:
        return _missing(cid, [key, attr.name])
    number = table[key].astype("string").str.extract(_ID_NUMBER, expand=False)
    idx = pd.to_numeric(number, errors="coerce").to_numpy(dtype=float) - 1
    values = attr.distribution.values
    inside = np.isfinite(idx) & (idx >= 0) & (idx < len(values))
    pos = np.where(inside, idx, 0).astype(int)
    if attr.distribution.labelled:
        seen = table[attr.name].astype("string").str.strip().to_numpy(dtype=object, na_value=None)
        exp = np.asarray([str(v) for v in values], dtype=object)[pos]
        known = inside & np.array([s is not None for s in seen])
        got = np.where(known, (seen == exp).astype(float), np.nan)
        return _verdict(cid, got, np.where(known, 1.0, np.nan), np.zeros(len(got)),
                        f"{attr.name} equals the contract's label for each {entity} row")
    want = np.where(inside, np.asarray(values, dtype=float)[pos], np.nan)
    return _verdict(cid, _num(table, attr.name), want, np.full(len(want), _half_ulp(c, attr.name)),
                    f"{attr.name} equals the contract's value for each {entity} row")


def check_exact_relations(c: WorldContract, rec: Reconciled) -> list[CheckResult]:
    out = []
    for v in c.variables:
        if v.derive is not None:
            out.append({"ratio": _ratio, "balance": _balance, "aggregate": _aggregate}[v.derive.op](
                c, v.name, v.derive, rec))
    for e in c.entities:
        out += [_fixed(c, e.name, a, rec) for a in e.attributes if a.distribution.type == "fixed"]
    return out
