"""Observation defects: each is a concrete, seeded process on a system's table, recorded in the ledger.

A defect function takes the table being projected and returns the damaged table plus a
`LedgerEntry` (what was done, to how many rows, one example before/after). The ledger is truth:
it goes to `.truth/ledger.json`, never into the data room; memos are written from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from worldsmith.core.world_contract import ObservationSystem, WorldContract


class LedgerEntry(BaseModel):
    system: str
    defect: str
    params: dict[str, Any] = Field(default_factory=dict)
    columns: list[str] = Field(default_factory=list)
    rows_affected: int = 0
    example_before: str | None = None
    example_after: str | None = None
    documented: bool = False  # a memo tells the analyst about it
    note: str = ""


class Sabotage(BaseModel):
    """Test hook (negative control): destroy a variable in every system that records it."""

    variable: str
    kind: Literal["shuffle", "blank"] = "shuffle"
    rate: float = 0.95


@dataclass
class Ctx:
    contract: WorldContract
    system: ObservationSystem
    rng: np.random.Generator
    time_column: str | None
    keys: list[str]  # columns identifying a row (own id, or parent id + period for panels)
    id_columns: dict[str, tuple[str, str]]  # column -> (prefix, alias)


def _show(v: Any) -> str | None:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "<blank>"
    if isinstance(v, pd.Timestamp):
        return v.date().isoformat()
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _entry(ctx: Ctx, defect: str, params: dict[str, Any], columns: list[str], rows: np.ndarray,
           before: pd.Series | None, after: pd.Series | None, documented: bool, note: str = "") -> LedgerEntry:
    i = int(np.flatnonzero(rows)[0]) if rows.any() else None
    return LedgerEntry(system=ctx.system.name, defect=defect, params=params, columns=columns,
                       rows_affected=int(rows.sum()),
                       example_before=_show(before.iloc[i]) if i is not None and before is not None else None,
                       example_after=_show(after.iloc[i]) if i is not None and after is not None else None,
                       documented=documented, note=note)


def _decimals(ctx: Ctx, column: str) -> int | None:
    return ctx.contract.node(column).decimals


def sabotage(df: pd.DataFrame, s: Sabotage, ctx: Ctx) -> tuple[pd.DataFrame, LedgerEntry]:
    df = df.copy()
    before = df[s.variable].copy()
    if s.kind == "shuffle":
        df[s.variable] = df[s.variable].to_numpy()[ctx.rng.permutation(len(df))]
        rows = np.ones(len(df), dtype=bool)
    else:  # blank all but the smallest values: missing-not-at-random, destroys means and slopes
        ranks = pd.Series(pd.to_numeric(before, errors="coerce")).rank(pct=True, method="first").to_numpy()
        rows = ranks > (1 - s.rate)
        df[s.variable] = df[s.variable].astype(object).where(~rows, np.nan)
    return df, _entry(ctx, "sabotage", s.model_dump(), [s.variable], rows, before, df[s.variable], False,
                      "negative control: this phenomenon is meant to be unrecoverable")


def delay(df: pd.DataFrame, d: Any, ctx: Ctx) -> tuple[pd.DataFrame, LedgerEntry]:
    col = ctx.time_column
    df = df.copy()
    before = df[col].copy()
    rows = ctx.rng.random(len(df)) < d.rate
    extra = d.days + (ctx.rng.integers(0, d.jitter_days + 1, len(df)) if d.jitter_days else 0)
    shift = np.where(rows, extra, 0)
    df[col] = df[col] + pd.to_timedelta(shift, unit="D")
    return df, _entry(ctx, "delay", d.model_dump(mode="json"), [col], shift > 0, before, df[col], d.days > 0 and d.memo,
                      "recorded dates are posting dates, later than the real event")


def unit_drift(df: pd.DataFrame, d: Any, ctx: Ctx) -> tuple[pd.DataFrame, LedgerEntry]:
    df = df.copy()
    before = df[d.variable].copy()
    rows = (df[ctx.time_column] >= pd.Timestamp(d.since)).to_numpy()
    vals = df[d.variable].astype(float) * np.where(rows, d.factor, 1.0)
    dec = _decimals(ctx, d.variable)
    df[d.variable] = vals.round(dec) if dec is not None else vals
    return df, _entry(ctx, "unit_drift", d.model_dump(mode="json"), [d.variable], rows, before, df[d.variable], d.memo)


def recode(df: pd.DataFrame, d: Any, ctx: Ctx) -> tuple[pd.DataFrame, LedgerEntry]:
    df = df.copy()
    before = df[d.variable].copy()
    col = df[d.variable].astype(object)
    rows = col.isin(list(d.mapping)).to_numpy()
    if d.since is not None:
        rows = rows & (df[ctx.time_column] >= pd.Timestamp(d.since)).to_numpy()
    col[rows] = col[rows].map(d.mapping)
    df[d.variable] = col
    return df, _entry(ctx, "recode", d.model_dump(mode="json"), [d.variable], rows, before, col, d.memo)


def _chosen(df: pd.DataFrame, rate: float, depends_on: str | None, rng: np.random.Generator) -> np.ndarray:
    """Rows hit by a defect: each with probability `rate`, or (depends_on) 2 * rate * its rank in that column."""
    u = rng.random(len(df))
    if depends_on is None:
        return u < rate
    dep = df[depends_on]
    key = dep if pd.api.types.is_numeric_dtype(dep) else pd.Series(pd.factorize(dep, sort=True)[0])
    p = 2 * rate * pd.Series(np.asarray(key)).rank(pct=True, method="first").to_numpy()
    return u < np.clip(p, 0, 1)


def missing(df: pd.DataFrame, d: Any, ctx: Ctx) -> tuple[pd.DataFrame, LedgerEntry]:
    df = df.copy()
    before = df[d.variable].copy()
    rows = _chosen(df, d.rate, d.depends_on if d.mechanism == "mar" else None, ctx.rng)
    kind = ctx.contract.node(d.variable).kind if d.variable in ctx.contract.nodes() else "text"
    col = df[d.variable]
    if kind in ("binary", "count"):
        col = col.astype("Int64")
    elif kind in ("categorical", "text"):
        col = col.astype(object)
    df[d.variable] = col.where(~rows, None if kind in ("binary", "count") else np.nan)
    return df, _entry(ctx, "missing", d.model_dump(mode="json"), [d.variable], rows, before, df[d.variable], False)


def cancellations(df: pd.DataFrame, d: Any, ctx: Ctx) -> tuple[pd.DataFrame, LedgerEntry, np.ndarray]:
    """Drop cancelled rows; also returns the kept-row mask over the input (the truth's population)."""
    rows = _chosen(df, d.rate, d.depends_on, ctx.rng)
    key = ctx.keys[0]
    entry = _entry(ctx, "cancellations", d.model_dump(mode="json"), ctx.keys, rows, df[key], None, d.memo,
                   "cancelled records are not in the export; truth and expected values use the kept records")
    return df[~rows].reset_index(drop=True), entry, ~rows


def duplicates(df: pd.DataFrame, d: Any, ctx: Ctx) -> tuple[pd.DataFrame, LedgerEntry]:
    n = len(df)
    k = int(round(d.rate * n))
    chosen = np.sort(ctx.rng.choice(n, size=k, replace=False)) if k else np.zeros(0, dtype=int)
    order = np.argsort(np.concatenate([np.arange(n) * 2, chosen * 2 + 1]), kind="stable")
    src = np.concatenate([np.arange(n), chosen])[order]
    is_dup = np.concatenate([np.zeros(n, dtype=bool), np.ones(k, dtype=bool)])[order]
    out = df.iloc[src].reset_index(drop=True)
    changed = []
    if d.near and k:
        for c in out.columns:
            if c in ctx.keys or c == ctx.time_column or c not in ctx.contract.nodes():
                continue
            if ctx.contract.node(c).kind == "numeric":
                dec = _decimals(ctx, c)
                bump = 10.0 ** (-(dec if dec is not None else 2))
                out.loc[is_dup, c] = out.loc[is_dup, c].astype(float) + bump
                changed.append(c)
                break
    rows = is_dup
    prev = pd.Series(np.roll(out[changed[0]].to_numpy(), 1)) if changed else None
    return out, _entry(ctx, "duplicates", {**d.model_dump(mode="json"), "changed_columns": changed}, ctx.keys, rows,
                       prev, out[changed[0]] if changed else None, d.memo)


def spell_ids(values: pd.Series, style: str, prefix: str, alias: str) -> pd.Series:
    """Rewrite canonical ids (C-00012) in another system's convention."""
    if style == "canonical":
        return values
    k = len(prefix) + 1
    low, word = prefix.lower(), alias.upper()
    fmt = {"nodash": lambda v: prefix + v[k:], "lower_nopad": lambda v: low + str(int(v[k:])),
           "alias_underscore": lambda v: f"{word}_{int(v[k:])}"}[style]
    out = np.empty(len(values), dtype=object)
    out[:] = [fmt(v) if isinstance(v, str) else np.nan for v in values.tolist()]
    return pd.Series(out, index=values.index, dtype=object)


def id_spelling(df: pd.DataFrame, ctx: Ctx) -> tuple[pd.DataFrame, LedgerEntry]:
    df = df.copy()
    cols = [c for c in ctx.id_columns if c in df.columns]
    first = cols[0]
    before = df[first].copy()
    for c in cols:
        prefix, alias = ctx.id_columns[c]
        df[c] = spell_ids(df[c], ctx.system.id_style, prefix, alias)
    rows = np.ones(len(df), dtype=bool)
    return df, _entry(ctx, "id_spelling", {"style": ctx.system.id_style}, cols, rows, before, df[first], True)


def split_column(df: pd.DataFrame, d: Any, ctx: Ctx) -> tuple[pd.DataFrame, LedgerEntry]:
    before = df[d.column]
    parts = before.astype("string").str.split(" ", n=1, expand=True)
    pos = list(df.columns).index(d.column)
    df = df.drop(columns=[d.column])
    df.insert(pos, d.into[1], parts[1].astype(object))
    df.insert(pos, d.into[0], parts[0].astype(object))
    rows = before.notna().to_numpy()
    return df, _entry(ctx, "split_column", d.model_dump(mode="json"), [d.column, *d.into], rows, before,
                      df[d.into[0]], d.memo)
