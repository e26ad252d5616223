"""Starting points for the director: one-table questions the data can answer, the strongest relations first.

A small model asked for new questions repeats the ones it has seen, so the director is offered ideas built from the
column types (a numeric measure compared across a category, two numeric columns correlated, a measure's monthly
trend). Which ideas come first matters: a greedy model takes the first. They are ranked by how strongly the data
itself shows the relation (on a sample of each table's rows):

- two numeric columns: |Spearman ρ|;
- a measure across a category: the correlation ratio η, adjusted for the number of groups (so a 12-level column
  does not look strong on noise);
- a measure over a date: |Spearman ρ| between the date and the measure.

The three are on one 0..1 scale, so a measure that really moves with a category or another measure is asked about
before one that does not. Ties (or a table that cannot be read) keep the column-type order.

Join ideas (:func:`join_ideas`) do the same across two tables the profile links by a key: a many-rows table (the
facts) joined to a table whose key is unique (the lookup), each idea pairing a column of one with a column of the
other, ranked on the joined sample. Ids spelled differently on the two sides (C-00012 vs c12) are matched by
their number, as the profile's join note tells the analysis to do, and the question says so.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from worldsmith.tools.files.errors import FileReadError
from worldsmith.tools.files.joins import id_like_name
from worldsmith.tools.files.readers import read_table

#: at most this many ideas in all
MAX_IDEAS = 24
#: a table with fewer rows offers nothing worth asking
MIN_IDEA_ROWS = 30
#: rows read per table to rank its ideas
SAMPLE_ROWS = 20_000
#: columns considered per table, by type
MAX_MEASURES, MAX_GROUPS, MAX_DATES = 6, 4, 1
_MIN_PAIRS = 20


def _numeric(s: pd.Series) -> pd.Series:
    return pd.to_numeric(s, errors="coerce") if not pd.api.types.is_numeric_dtype(s) else s.astype(float)


def spearman(x: pd.Series, y: pd.Series) -> float:
    """|ρ| over the rows where both are numbers (0 with fewer than 20 such rows or a constant column)."""
    ok = x.notna() & y.notna()
    if ok.sum() < _MIN_PAIRS or x[ok].nunique() < 2 or y[ok].nunique() < 2:
        return 0.0
    rho = x[ok].rank().corr(y[ok].rank())
    return 0.0 if rho is None or math.isnan(rho) else abs(float(rho))


def correlation_ratio(groups: pd.Series, values: pd.Series) -> float:
    """η of `values` across `groups`, adjusted for the number of groups: sqrt(max(0, 1 − (1 − η²)(n − 1)/(n − k)))."""
    ok = groups.notna() & values.notna()
    g, v = groups[ok].astype(str), values[ok]
    n, k = len(v), g.nunique()
    if n < _MIN_PAIRS or k < 2 or n <= k:
        return 0.0
    total = float(((v - v.mean()) ** 2).sum())
    if total == 0:
        return 0.0
    means = v.groupby(g).transform("mean")
    between = float(((means - v.mean()) ** 2).sum())
    adjusted = 1 - (1 - between / total) * (n - 1) / (n - k)
    return math.sqrt(max(0.0, adjusted))


def _dates(s: pd.Series) -> pd.Series:
    """Seconds since the epoch (NaN where a value is not a date)."""
    try:
        parsed = pd.to_datetime(s, errors="coerce", format="mixed", utc=True)
    except (TypeError, ValueError):
        return pd.Series(np.nan, index=s.index)
    return (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds()


def _sample(root: Path | None, t: Any) -> pd.DataFrame | None:
    if root is None:
        return None
    try:
        return read_table(root / t.file, table=t.table, nrows=SAMPLE_ROWS)
    except (FileReadError, OSError, ValueError):
        return None


def _kinds(t: Any) -> tuple[list[str], list[str], list[str]]:
    """The table's measures, groups (2..12 levels) and dates, ids and mostly-empty columns left out."""
    cols = [c for c in t.columns if c.null_rate < 0.5 and not id_like_name(c.name) and c.semantic_type != "id"]
    nums = [c.name for c in cols if c.semantic_type == "numeric"][:MAX_MEASURES]
    cats = [c.name for c in cols if c.semantic_type in ("categorical", "bool") and 2 <= c.n_unique <= 12][:MAX_GROUPS]
    dates = [c.name for c in cols if c.semantic_type == "datetime"][:MAX_DATES]
    return nums, cats, dates


def _table_ideas(t: Any, df: pd.DataFrame | None) -> list[tuple[float, str]]:
    nums, cats, dates = _kinds(t)
    have = set(df.columns) if df is not None else set()
    num = {n: _numeric(df[n]) for n in nums if n in have} if df is not None else {}

    def strength(kind: str, a: str, b: str) -> float:
        if df is None or a not in have or b not in have:
            return 0.0
        if kind == "groups":
            return correlation_ratio(df[b], num[a]) if a in num else 0.0
        if kind == "pair":
            return spearman(num[a], num[b]) if a in num and b in num else 0.0
        return spearman(_dates(df[b]), num[a]) if a in num else 0.0

    ideas = [(strength("groups", n, c), f"In {t.label}, how does the mean {n} differ across {c}?")
             for n in nums for c in cats]
    ideas += [(strength("pair", a, b), f"In {t.label}, how strongly are {a} and {b} correlated?")
              for i, a in enumerate(nums) for b in nums[i + 1:]]
    ideas += [(strength("trend", n, d), f"In {t.label}, how does the monthly mean of {n} change over {d}?")
              for n in nums for d in dates]
    return ideas


def _root(files: Any, root: str | Path | None) -> Path | None:
    return Path(root) if root is not None else Path(files.root) if getattr(files, "root", None) else None


def _ranked(groups: list[list[tuple[float, str]]], limit: int) -> list[str]:
    """The ideas of all groups, strongest first; ties keep a round robin over the groups (every table represented)."""
    ordered: list[tuple[float, str]] = []
    while any(groups):
        for ideas in groups:
            if ideas:
                ordered.append(ideas.pop(0))
    ranked = sorted(enumerate(ordered), key=lambda p: (-round(p[1][0], 3), p[0]))
    return list(dict.fromkeys(q for _, (_, q) in ranked))[:limit]


def question_ideas(files: Any, limit: int = MAX_IDEAS, root: str | Path | None = None) -> list[str]:
    """Up to `limit` one-table questions, the strongest relations in the data first. `root` is the folder the
    profile's file paths are relative to (default: the profile's own root); without readable data the ideas keep
    the column-type order, round robin over the tables, the big ones first."""
    base = _root(files, root)
    per_table = [_table_ideas(t, _sample(base, t)) for t in sorted(files.tables, key=lambda t: -t.n_rows)
                 if t.n_rows >= MIN_IDEA_ROWS]  # the big tables first; a stub of a few rows says little
    return _ranked(per_table, limit)


# --------------------------------------------------------------------------------------------- across two tables


def id_number(s: pd.Series) -> pd.Series:
    """The number in each id (C-00012 → 12, c12 → 12): the match the profile's respelled-ids note prints."""
    return pd.to_numeric(s.astype(str).str.extract(r"(\d+)", expand=False), errors="coerce")


def _joined(facts: pd.DataFrame, fkey: str, lookup: pd.DataFrame, lkey: str, spelled: bool) -> pd.DataFrame | None:
    """The facts with the lookup's columns beside them (many to one; the lookup's columns suffixed on a clash)."""
    if fkey not in facts.columns or lkey not in lookup.columns:
        return None
    left, right = facts.copy(), lookup.copy()
    left["__key"] = id_number(left[fkey]) if spelled else left[fkey].astype(str)
    right["__key"] = id_number(right[lkey]) if spelled else right[lkey].astype(str)
    right = right.dropna(subset=["__key"]).drop_duplicates("__key")
    merged = left.merge(right, on="__key", how="inner", suffixes=("", "__lookup"))
    return merged if len(merged) >= _MIN_PAIRS else None


def _pair_ideas(facts: Any, fkey: str, lookup: Any, lkey: str, spelled: bool,
                df: pd.DataFrame | None) -> list[tuple[float, str]]:
    """Ideas pairing a column of `facts` with a column of `lookup`, ranked on their joined sample `df`."""
    fn, fc, _ = _kinds(facts)
    ln, lc, _ = _kinds(lookup)
    fb = [c.name for c in facts.columns if c.semantic_type == "bool" and c.null_rate < 0.5]
    lb = [c.name for c in lookup.columns if c.semantic_type == "bool" and c.null_rate < 0.5]
    have = set(df.columns) if df is not None else set()
    fact_columns = {x.name for x in facts.columns}
    clash = {c for c in ln + lc + lb if c in fact_columns}

    def col(name: str, side: str) -> str:  # the joined frame's name for a lookup column that clashes
        return f"{name}__lookup" if side == "lookup" and name in clash else name

    def numbers(name: str) -> pd.Series:
        return _numeric(df[name]) if df is not None else pd.Series(dtype=float)

    match = (f"{facts.label} ({fkey}) to {lookup.label} ({lkey}), matching the ids by the number in them"
             if spelled else f"{facts.label} to {lookup.label} on {fkey} = {lkey}")
    ideas: list[tuple[float, str]] = []
    # a measure of one side (a yes/no column counts: its mean is a rate) across a group of the other
    for (measures, mside), (groups, gside) in (((fn + fb, "facts"), (lc, "lookup")), ((ln + lb, "lookup"), (fc, "facts"))):
        for m in measures:
            for g in groups:
                if m == g:
                    continue
                a, b = col(m, mside), col(g, gside)
                score = correlation_ratio(df[b], numbers(a)) if a in have and b in have else 0.0
                ideas.append((score, f"Joining {match}, how does the mean {m} differ across {g}?"))
    for a in fn:
        for b in ln:
            x, y = col(a, "facts"), col(b, "lookup")
            score = spearman(numbers(x), numbers(y)) if x in have and y in have else 0.0
            ideas.append((score, f"Joining {match}, how strongly are {a} and {b} correlated?"))
    return ideas


def join_ideas(files: Any, limit: int = MAX_IDEAS, root: str | Path | None = None) -> list[str]:
    """Up to `limit` questions across two tables the profile links by a key, one side's key unique (the lookup)
    and the other's not (the facts), the strongest relations on the joined sample first. Parts of one table (the
    same columns in several files) are stacked, never joined, so their links offer nothing here."""
    from worldsmith.tools.files.join_code import lookup_join
    from worldsmith.tools.files.parts import table_parts

    base = _root(files, root)
    tables = {t.label: t for t in files.tables if t.n_rows >= MIN_IDEA_ROWS}
    part_of = {label: i for i, g in enumerate(table_parts(files.tables)) for label in g.labels}
    samples: dict[str, pd.DataFrame | None] = {}

    def sample(t: Any) -> pd.DataFrame | None:
        if t.label not in samples:
            samples[t.label] = _sample(base, t)
        return samples[t.label]

    groups: list[list[tuple[float, str]]] = []
    seen: set[tuple[str, str]] = set()
    for j in files.joins:
        plan = lookup_join(j, tables, part_of)
        if plan is None or (plan.facts.label, plan.lookup.label) in seen:
            continue
        seen.add((plan.facts.label, plan.lookup.label))
        f, lk = sample(plan.facts), sample(plan.lookup)
        df = _joined(f, plan.fkey, lk, plan.lkey, plan.spelled) if f is not None and lk is not None else None
        groups.append(_pair_ideas(plan.facts, plan.fkey, plan.lookup, plan.lkey, plan.spelled, df))
    return _ranked(groups, limit)
