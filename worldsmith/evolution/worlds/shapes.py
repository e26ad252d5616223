"""Basis columns of the richer shapes: power, piecewise, binned, percent event steps and shared calendars.

Each function returns (matrix, magnitudes, labels) for `mechanisms.edge_basis`; like every basis, the shape's
location parameters (exponent, knots, cuts, event date, calendar days) fix the columns and the magnitudes multiply
them, so the engine and the auditor share one definition.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from worldsmith.core.world_contract import WorldContract

Shape = tuple[np.ndarray, np.ndarray, list[str]]


def _keep_nan(b: np.ndarray, x: np.ndarray) -> np.ndarray:
    b = b.astype(float)
    b[np.isnan(x)] = np.nan
    return b


def power_basis(m: Any, x: np.ndarray) -> Shape:
    return (np.abs(x - m.center) ** m.exponent)[:, None], np.array([m.coef]), ["coef"]


def piecewise_basis(m: Any, x: np.ndarray) -> Shape:
    """Column i is x clipped to segment i, measured from the segment's knot: the first segment's column is
    min(x, k0) - k0 (<= 0), later ones clip(x, k[i-1], k[i]) - k[i-1] (>= 0), so slopes[i] acts on segment i only
    and the sum is continuous and 0 at k0."""
    knots = [*m.knots]
    cols = [np.minimum(x, knots[0]) - knots[0]]
    for i, lo in enumerate(knots):
        hi = knots[i + 1] if i + 1 < len(knots) else math.inf
        cols.append(np.clip(x, lo, hi) - lo)
    return np.column_stack(cols), np.array(m.slopes, dtype=float), [f"slope{i}" for i in range(len(cols))]


def binned_basis(m: Any, x: np.ndarray) -> Shape:
    """One indicator per bin above the lowest (bins are [cut[i-1], cut[i]), the last one open)."""
    which = np.searchsorted(np.asarray(m.cuts, dtype=float), x, side="right")  # 0 = lowest bin
    cols = [_keep_nan(which == k, x) for k in range(1, len(m.cuts) + 1)]
    return np.column_stack(cols), np.array(m.effects, dtype=float), [f"bin{k}" for k in range(1, len(m.cuts) + 1)]


def event_percent_basis(c: WorldContract, m: Any, days: np.ndarray) -> Shape:
    """Indicator of rows on/after the event; the magnitude is the log-factor log(1 + percent / 100)."""
    when = (c.event(m.event).date - c.timeline.start).days
    return _keep_nan(days >= when, days)[:, None], np.array([math.log1p(m.percent / 100.0)]), ["log_factor"]


def calendar_days(c: WorldContract, name: str) -> np.ndarray:
    """Sorted day offsets (days since the timeline start) of a shared calendar within the timeline."""
    cal = c.calendar(name)
    span = pd.date_range(pd.Timestamp(c.timeline.start), pd.Timestamp(c.timeline.end), freq="D")
    hit = span.isin(pd.to_datetime(list(cal.dates))) | np.isin(span.day_of_week, list(cal.weekdays))
    return np.flatnonzero(hit).astype(float)


def calendar_basis(c: WorldContract, m: Any, days: np.ndarray, panel: bool) -> Shape:
    """Dated rows: 1 on a calendar day. Panel rows (days = period start): the number of calendar days in the period."""
    cal = calendar_days(c, m.calendar)
    if panel:
        starts = ((c.timeline.periods() - pd.Timestamp(c.timeline.start)).days).to_numpy(dtype=float)
        ends = np.append(starts[1:], float(c.timeline.days))
        per_period = np.searchsorted(cal, ends) - np.searchsorted(cal, starts)
        k = np.searchsorted(starts, days, side="right") - 1
        b = per_period[np.clip(k, 0, len(starts) - 1)].astype(float)
    else:
        b = np.isin(np.floor(days), cal).astype(float)
    return _keep_nan(b, days)[:, None], np.array([m.jump]), ["jump"]
