"""Derived variables in the engine: ratios, stock-and-flow balances and aggregates over a finer grain.

`row_map` says which row of a coarser entity each row of a finer one belongs to: through the parent chain (a
store's region), and for a panel target also through the period that contains the row's date (a store-month's
country-month, an order's store-month). Aggregates are bincounts over that map.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import pandas as pd

from worldsmith.core.world_contract import WorldContract


class SkeletonLike(Protocol):
    n: int
    parent_idx: np.ndarray | None
    days: np.ndarray | None
    n_periods: int


def chain_index(c: WorldContract, sk: dict[str, SkeletonLike], source: str, ancestor: str,
                days: np.ndarray | None = None) -> np.ndarray:
    """Row of `ancestor` each row of `source` belongs to (identity when they are the same entity); dated rows
    (`days`) follow a link revised mid-timeline as of their date."""
    from .relink import parent_step

    idx = np.arange(sk[source].n)
    cur = source
    while cur != ancestor:
        if sk[cur].parent_idx is None:
            raise ValueError(f"entity {ancestor!r} is not an ancestor of {source!r}")
        idx = parent_step(sk[cur], idx, days)
        cur = str(c.entity(cur).parent)
    return idx


def period_index(c: WorldContract, days: np.ndarray) -> np.ndarray:
    """Index of the timeline period containing each day offset."""
    starts = ((c.timeline.periods() - pd.Timestamp(c.timeline.start)).days).to_numpy(dtype=float)
    return np.clip(np.searchsorted(starts, days, side="right") - 1, 0, len(starts) - 1)


def row_map(c: WorldContract, sk: dict[str, SkeletonLike], source: str, target: str) -> np.ndarray:
    """Target row of each source row (see the module docstring for which pairs are valid)."""
    t = c.entity(target)
    if t.kind != "panel":
        return chain_index(c, sk, source, target, sk[source].days)
    unit = str(t.parent)
    if c.entity(source).kind == "panel" and source != target:
        # a panel's rows are unit-major: walk each row up to the target's unit (as of its period), keep the period
        n_p = sk[source].n_periods
        rows = np.arange(sk[source].n)
        return chain_index(c, sk, source, unit, sk[source].days) * n_p + rows % n_p
    days = sk[source].days
    if days is None:
        raise ValueError(f"{source} has no dates, so it cannot be aggregated into the panel {target}")
    return chain_index(c, sk, source, unit, days) * sk[target].n_periods + period_index(c, days)


def aggregate(values: np.ndarray, idx: np.ndarray, size: int, how: str) -> np.ndarray:
    """Aggregate values into `size` groups given by idx; groups without rows get 0 (sum, count) or NaN."""
    v = np.asarray(values, dtype=float)
    n = np.bincount(idx, minlength=size).astype(float)
    if how == "count":
        return n
    total = np.bincount(idx, weights=v, minlength=size)
    if how == "sum":
        return total
    if how == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, total / np.maximum(n, 1), np.nan)
    out = np.full(size, np.inf if how == "min" else -np.inf)
    (np.minimum if how == "min" else np.maximum).at(out, idx, v)
    out[n == 0] = np.nan
    return out


def balance(inflow: np.ndarray, outflow: np.ndarray, n_periods: int, initial: float) -> np.ndarray:
    """stock[t] = stock[t-1] + inflow[t] - outflow[t] within each unit of a unit-major panel."""
    flow = (inflow - outflow).reshape(-1, n_periods)
    return (initial + np.cumsum(flow, axis=1)).reshape(-1)


def derive_values(c: WorldContract, name: str, view: Any, sk: dict[str, SkeletonLike],
                  values: dict[str, np.ndarray]) -> np.ndarray:
    """A derived variable's canonical values (its inputs are already generated)."""
    n = c.node(name)
    d = n.derive
    if d.op == "ratio":
        num, den = (np.asarray(view.col(x), dtype=float) for x in (d.numerator, d.denominator))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den != 0, num / np.where(den != 0, den, 1.0) * d.scale, np.nan)
    if d.op == "balance":
        size = sk[n.entity].n
        inflow = sum((np.asarray(view.col(x), dtype=float) for x in d.inflows), np.zeros(size))
        outflow = sum((np.asarray(view.col(x), dtype=float) for x in d.outflows), np.zeros(size))
        return balance(inflow, outflow, sk[n.entity].n_periods, d.initial)
    source = c.node(d.of).entity
    return aggregate(values[d.of], row_map(c, sk, source, n.entity), sk[n.entity].n, d.how)
