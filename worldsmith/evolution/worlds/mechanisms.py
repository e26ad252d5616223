"""Mechanisms as basis functions.

Every mechanism is `contribution = basis(x) @ magnitudes`: the *shape* (threshold location,
half-saturation, lag, event date, seasonal period, category labels) fixes the basis columns and the
*magnitudes* (coef, jump, vmax, amplitude, per-label effects) multiply them. The engine sums
contributions with the contract's magnitudes; the auditor rebuilds the same basis from observed
data and re-estimates the magnitudes. Both go through `edge_basis`, so they agree on semantics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from worldsmith.core.world_contract import Edge, WorldContract

from .moderators import gate_open, group_labels
from .shapes import (
    binned_basis,
    calendar_basis,
    event_percent_basis,
    piecewise_basis,
    power_basis,
)


class RowView(Protocol):
    """Columns aligned with the target's rows (engine: canonical arrays; audit: reconciled frame)."""

    def col(self, name: str) -> np.ndarray: ...

    def days(self) -> np.ndarray: ...  # days since timeline start, float (NaN when unknown)

    def lagged(self, name: str, lag: int) -> np.ndarray: ...  # value lag periods earlier in the same unit


@dataclass
class Basis:
    matrix: np.ndarray  # (n, k) float, NaN where an input is missing
    magnitudes: np.ndarray  # (k,) the contract's values
    labels: list[str]
    multiplicative: bool  # enters the log-factor of a numeric/count target


def _num(x: np.ndarray) -> np.ndarray:
    return np.asarray(pd.to_numeric(pd.Series(x), errors="coerce"), dtype=float) if x.dtype == object else \
        x.astype(float, copy=False)


def _levels(x: np.ndarray, levels: dict[str, float]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    labels = sorted(levels)
    missing = pd.isna(x)
    cols = []
    for lab in labels:
        ind = (x == lab).astype(float)
        ind[missing] = np.nan
        cols.append(ind)
    return np.column_stack(cols), np.array([levels[k] for k in labels]), [f"level:{k}" for k in labels]


def edge_basis(contract: WorldContract, edge: Edge, view: RowView, target_kind: str) -> Basis:
    m = edge.mechanism
    mult = m.type in ("multiplicative", "event_percent") and target_kind != "binary"
    t = m.type
    if t in ("linear", "logistic", "multiplicative"):
        x = view.col(edge.sources[0])
        if m.levels:  # type: ignore[union-attr]
            mat, mags, labels = _levels(x, m.levels)  # type: ignore[union-attr]
            return Basis(mat, mags, labels, mult)
        return Basis((_num(x) - m.center)[:, None], np.array([m.coef]), ["coef"], mult)  # type: ignore[union-attr]
    if t == "threshold":
        x = _num(view.col(edge.sources[0]))
        hit = (x > m.threshold) if m.direction == "above" else (x < m.threshold)  # type: ignore[union-attr]
        b = hit.astype(float)
        b[np.isnan(x)] = np.nan
        return Basis(b[:, None], np.array([m.jump]), ["jump"], False)  # type: ignore[union-attr]
    if t == "saturating":
        x = np.clip(_num(view.col(edge.sources[0])), 0, None)
        return Basis((x / (x + m.half))[:, None], np.array([m.vmax]), ["vmax"], False)  # type: ignore[union-attr]
    if t == "lag":
        x = _num(view.lagged(edge.sources[0], m.lag))  # type: ignore[union-attr]
        return Basis((x - m.center)[:, None], np.array([m.coef]), ["coef"], False)  # type: ignore[union-attr]
    if t == "seasonal":
        d = view.days()
        b = np.sin(2 * np.pi * (d - m.phase_days) / m.period_days)  # type: ignore[union-attr]
        return Basis(b[:, None], np.array([m.amplitude]), ["amplitude"], False)  # type: ignore[union-attr]
    if t == "step_event":
        when = (contract.event(m.event).date - contract.timeline.start).days  # type: ignore[union-attr]
        d = view.days()
        b = (d >= when).astype(float)
        b[np.isnan(d)] = np.nan
        return Basis(b[:, None], np.array([m.jump]), ["jump"], False)  # type: ignore[union-attr]
    if t == "interaction":
        a, b = (_num(view.col(s)) for s in edge.sources)
        c1, c2 = m.centers  # type: ignore[union-attr]
        return Basis(((a - c1) * (b - c2))[:, None], np.array([m.coef]), ["coef"], False)  # type: ignore[union-attr]
    if t in ("power", "piecewise", "binned"):
        shape = {"power": power_basis, "piecewise": piecewise_basis, "binned": binned_basis}[t]
        return Basis(*shape(m, _num(view.col(edge.sources[0]))), False)
    if t == "event_percent":
        return Basis(*event_percent_basis(contract, m, view.days()), mult)
    if t == "calendar":
        panel = contract.entity(contract.node(edge.target).entity).kind == "panel"
        return Basis(*calendar_basis(contract, m, view.days(), panel), False)
    raise ValueError(f"edge {edge.id}: unknown mechanism {t!r}")


def group_multiplier(contract: WorldContract, edge: Edge, view: RowView) -> np.ndarray | None:
    """Per-row effect multiplier from heterogeneity (1 for unlisted groups, NaN for a missing group)."""
    if edge.heterogeneity is None:
        return None
    g = group_labels(contract, edge, view)
    out = np.ones(len(g))
    for label, mult in edge.heterogeneity.multipliers.items():
        out[g == label] = mult
    out[pd.isna(g)] = np.nan
    return out


def contribution(contract: WorldContract, edge: Edge, view: RowView, target_kind: str) -> tuple[np.ndarray, bool]:
    """(contribution per row, is_multiplicative) with the contract's magnitudes, heterogeneity and gate."""
    b = edge_basis(contract, edge, view, target_kind)
    out = b.matrix @ b.magnitudes
    mult = group_multiplier(contract, edge, view)
    if mult is not None:
        out = out * mult
    gate = gate_open(edge, view)
    if gate is not None:
        out = out * gate
    return out, b.multiplicative


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # overflow-free logistic
