"""Observation projection: canonical state -> what each system exports (tables + ledger).

Per system the canonical rows pass through a fixed sequence of stages: rounding, sabotage (test
hook), cancellations (rows dropped), posting delays, unit drift, relabelling, missing values, duplicates, id spelling, date
formatting, split columns, year or quarter partitions and column renames. Each stage that changes something
appends a LedgerEntry. Stage order matters and is part of the contract's meaning: unit changes and
relabelling apply by *recorded* date, as they would in a real system.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import defects as D
from worldsmith.core.world_contract import ObservationSystem, WorldContract
from .defects import Ctx, LedgerEntry, Sabotage
from .engine import CanonicalState, column, rng_for

ISO = "%Y-%m-%d"
_STAGE = {"delay": 0, "unit_drift": 1, "recode": 2, "missing": 3, "duplicates": 4}


@dataclass
class ObservedPart:
    label: str | None  # year ("2024") or quarter ("2024Q1") of a partition, None when the system is not partitioned
    frame: pd.DataFrame


@dataclass
class ObservedSystem:
    system: ObservationSystem
    parts: list[ObservedPart]
    entries: list[LedgerEntry] = field(default_factory=list)
    kept: np.ndarray | None = None  # canonical rows the export keeps (None: all; cancellations drop some)
    # variable -> canonical rows whose value this system's `missing` defects blanked (the answer key leaves out
    # values that no system recorded: nobody can recover them from the data room)
    blanked: dict[str, np.ndarray] = field(default_factory=dict)


def system_keys(c: WorldContract, s: ObservationSystem) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """(row key columns, id columns -> (prefix, alias)) of a system's table."""
    e = c.entity(s.entity)
    ids: dict[str, tuple[str, str]] = {}
    if e.kind != "panel":
        ids[e.key] = (e.id_prefix, str(e.alias))  # type: ignore[index]
    if e.parent is not None:
        p = c.entity(e.parent)
        ids[p.key] = (p.id_prefix, str(p.alias))  # type: ignore[index]
    keys = [e.key] if e.kind != "panel" else [c.entity(e.parent).key, "period"]  # type: ignore[arg-type, list-item]
    return keys, ids  # type: ignore[return-value]


def _format_dates(values: pd.Series, fmt: str) -> pd.Series:
    codes, uniques = pd.factorize(values)
    text = np.asarray(pd.DatetimeIndex(uniques).strftime(fmt), dtype=object)
    out = np.where(codes >= 0, text[np.maximum(codes, 0)], None)
    return pd.Series(out, index=values.index, dtype=object)


def _base_frame(state: CanonicalState, s: ObservationSystem, keys: list[str],
                ids: dict[str, tuple[str, str]]) -> pd.DataFrame:
    c = state.contract
    e = c.entity(s.entity)
    table = state.tables[e.name]
    lead = list(dict.fromkeys([*ids, *([e.time_column] if e.time_column else [])]))
    cols: dict[str, object] = {}
    for col in [*lead, *s.variables]:
        v = table[col]
        kind = c.node(col).kind if col in s.variables else None
        if kind == "numeric" and c.node(col).decimals is not None:
            cols[col] = v.to_numpy().round(c.node(col).decimals)
        elif isinstance(v.dtype, pd.CategoricalDtype) or v.dtype == object:
            cols[col] = column(np.asarray(v.to_numpy(dtype=object)))
        else:
            cols[col] = v.to_numpy()
    return pd.DataFrame(cols)


def project_system(state: CanonicalState, s: ObservationSystem,
                   sabotage: list[Sabotage] | None = None) -> ObservedSystem:
    c = state.contract
    e = c.entity(s.entity)
    keys, ids = system_keys(c, s)
    df = _base_frame(state, s, keys, ids)
    entries: list[LedgerEntry] = []

    def ctx(tag: str) -> Ctx:
        return Ctx(c, s, rng_for(state.seed, "observe", s.name, tag), e.time_column, keys, ids)

    for sb in sabotage or []:
        if sb.variable in df.columns:
            df, entry = D.sabotage(df, sb, ctx(f"sabotage:{sb.variable}"))
            entries.append(entry)
    kept = None
    for j, d in enumerate(s.defects):  # first: which records exist at all; every later stage sees only those
        if d.type == "cancellations":
            df, entry, keep = D.cancellations(df, d, ctx(f"{j}:cancellations"))
            kept = keep if kept is None else _compose(kept, keep)
            entries.append(entry)
    staged = sorted(((j, d) for j, d in enumerate(s.defects) if d.type in _STAGE),
                    key=lambda x: (_STAGE[x[1].type], x[0]))
    blanked: dict[str, np.ndarray] = {}
    for j, d in staged:
        was_blank = df[d.variable].isna().to_numpy() if d.type == "missing" else None
        df, entry = getattr(D, d.type)(df, d, ctx(f"{j}:{d.type}"))
        entries.append(entry)
        # stages before duplicates keep canonical row order, so positions are rows (a stage that drops rows would
        # break that: then the blanks are not traced and the key keeps those values)
        if was_blank is not None and len(df) == len(state.tables[e.name]):
            now = df[d.variable].isna().to_numpy() & ~was_blank
            blanked[d.variable] = blanked.get(d.variable, np.zeros(len(now), dtype=bool)) | now
    if s.id_style != "canonical":
        df, entry = D.id_spelling(df, ctx("id_spelling"))
        entries.append(entry)
    years = df[e.time_column].dt.year.to_numpy() if e.time_column else None
    quarters = df[e.time_column].dt.quarter.to_numpy() if e.time_column else None
    if e.time_column:
        before = df[e.time_column].copy()
        df[e.time_column] = _format_dates(df[e.time_column], s.date_format)
        if s.date_format != ISO:
            rows = np.ones(len(df), dtype=bool)
            entries.append(D._entry(ctx("date_format"), "date_format", {"format": s.date_format}, [e.time_column],
                                    rows, before, df[e.time_column], True))
    for j, d in enumerate(s.defects):
        if d.type == "split_column":
            df, entry = D.split_column(df, d, ctx(f"{j}:split"))
            entries.append(entry)
    parts = _partition(df, years, quarters, s)
    entries += _renames(parts, s, c)
    if not s.dictionary:
        entries.append(LedgerEntry(system=s.name, defect="no_dictionary",
                                   note="system left out of the data dictionary"))
    return ObservedSystem(system=s, parts=parts, entries=entries, kept=kept, blanked=blanked)


def _compose(kept: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """A second cancellation stage's mask (over the rows the first kept) as a mask over the canonical rows."""
    out = kept.copy()
    out[np.flatnonzero(kept)[~keep]] = False
    return out


def kept_rows(systems: list[ObservedSystem], c: WorldContract) -> dict[str, np.ndarray]:
    """Entity -> canonical rows present in at least one export (an entity only some systems cancel keeps its rows:
    the others still record them)."""
    out: dict[str, np.ndarray] = {}
    for e in c.entities:
        masks = [o.kept for o in systems if o.system.entity == e.name]
        if masks and all(m is not None for m in masks):
            out[e.name] = np.logical_or.reduce(masks)  # type: ignore[arg-type]
    return out


def _partition(df: pd.DataFrame, years: np.ndarray | None, quarters: np.ndarray | None,
               s: ObservationSystem) -> list[ObservedPart]:
    """Split by recorded year or quarter (partitions follow the dates the system wrote, delays included)."""
    if s.partition == "none" or years is None or quarters is None:
        return [ObservedPart(None, df.reset_index(drop=True))]
    if s.partition == "year":
        return [ObservedPart(str(y), df[years == y].reset_index(drop=True)) for y in sorted(set(years.tolist()))]
    keys = sorted(set(zip(years.tolist(), quarters.tolist())))
    return [ObservedPart(f"{y}Q{q}", df[(years == y) & (quarters == q)].reset_index(drop=True)) for y, q in keys]


def _renames(parts: list[ObservedPart], s: ObservationSystem, c: WorldContract) -> list[LedgerEntry]:
    entries = []
    for d in s.defects:
        if d.type not in ("rename", "unlabeled_fk"):
            continue
        first = c.timeline.start.year + (d.from_partition if d.type == "rename" else 0)
        touched = 0
        for part in parts:
            if part.label is None or int(part.label[:4]) >= first or d.type == "unlabeled_fk":
                part.frame = part.frame.rename(columns={d.column: d.new_name})
                touched += len(part.frame)
        entries.append(LedgerEntry(system=s.name, defect=d.type, params=d.model_dump(mode="json"),
                                   columns=[d.column, d.new_name], rows_affected=touched, example_before=d.column,
                                   example_after=d.new_name, documented=d.type == "rename" and d.memo))
    return entries


def unrecorded_cells(c: WorldContract, observed: list[ObservedSystem]) -> dict[str, np.ndarray]:
    """variable -> canonical rows whose value a declared `missing` defect blanked in every system recording it.

    A value some other system still records is recoverable and stays in the answer key."""
    out: dict[str, np.ndarray] = {}
    for var in {v for o in observed for v in o.blanked}:
        masks = [o.blanked.get(var) for o in observed if var in o.system.variables]
        if all(m is not None for m in masks):
            out[var] = np.logical_and.reduce(masks)  # type: ignore[arg-type]
    return out


def project(state: CanonicalState, sabotage: list[Sabotage] | None = None) -> list[ObservedSystem]:
    """Every system's observed tables, in contract order."""
    return [project_system(state, s, sabotage) for s in state.contract.systems]
