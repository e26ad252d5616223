"""What an edge's effect depends on besides its sources: groups over one or more moderators, and gates.

A heterogeneous edge multiplies its contribution by a factor per group, a group being the labels of every `by`
column joined by '|' ('north|Q4'); the calendar moderators '@quarter' and '@year' are read from the row's date.
A gated edge acts only on rows where its gate variable is below (or above) its threshold. Engine and auditor both
call these, so they agree on which rows an effect reaches.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from worldsmith.core.world_contract import Edge, WorldContract
from worldsmith.core.world_contract_types import CALENDAR_MODERATORS, MODERATOR_SEP


def calendar_labels(c: WorldContract, which: str, days: np.ndarray) -> np.ndarray:
    """'Q1'..'Q4' or the year, for days since the timeline start (NaN where the date is unknown)."""
    ok = np.isfinite(days)
    dates = pd.Timestamp(c.timeline.start) + pd.to_timedelta(np.where(ok, days, 0), unit="D")
    text = [f"Q{q}" for q in dates.quarter] if which == "@quarter" else [str(y) for y in dates.year]
    out = np.asarray(text, dtype=object)
    out[~ok] = np.nan
    return out


def group_labels(c: WorldContract, edge: Edge, view: Any) -> np.ndarray:
    """Each row's group under the edge's heterogeneity (object array; NaN when a moderator is missing)."""
    h = edge.heterogeneity
    assert h is not None
    parts = []
    for col in h.columns:
        parts.append(calendar_labels(c, col, view.days()) if col in CALENDAR_MODERATORS
                     else np.asarray(view.col(col), dtype=object))
    if len(parts) == 1:
        return parts[0]
    missing = np.zeros(len(parts[0]), dtype=bool)
    for p in parts:
        missing |= pd.isna(p)
    out = np.asarray([MODERATOR_SEP.join(str(v) for v in row) for row in zip(*parts)], dtype=object)
    out[missing] = np.nan
    return out


def moderator_columns(edge: Edge) -> list[str]:
    """Observed variables the edge's groups and gate read (calendar moderators come from the time column)."""
    cols = [x for x in edge.heterogeneity.columns if x not in CALENDAR_MODERATORS] if edge.heterogeneity else []
    return cols + ([edge.gate.variable] if edge.gate else [])


def gate_open(edge: Edge, view: Any) -> np.ndarray | None:
    """1.0 where the gate lets the effect act, 0.0 where it does not, NaN where the gate variable is missing."""
    if edge.gate is None:
        return None
    g = np.asarray(pd.to_numeric(pd.Series(view.col(edge.gate.variable)), errors="coerce"), dtype=float)
    hit = g < edge.gate.threshold if edge.gate.direction == "below" else g > edge.gate.threshold
    out = hit.astype(float)
    out[np.isnan(g)] = np.nan
    return out
