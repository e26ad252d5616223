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


def _table_ideas(t: Any, df: pd.DataFrame | None) -> list[tuple[float, str]]:
    cols = [c for c in t.columns if c.null_rate < 0.5 and not id_like_name(c.name)]
    nums = [c.name for c in cols if c.semantic_type == "numeric"][:MAX_MEASURES]
    cats = [c.name for c in cols if c.semantic_type in ("categorical", "bool") and 2 <= c.n_unique <= 12][:MAX_GROUPS]
    dates = [c.name for c in cols if c.semantic_type == "datetime"][:MAX_DATES]
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


def question_ideas(files: Any, limit: int = MAX_IDEAS, root: str | Path | None = None) -> list[str]:
    """Up to `limit` one-table questions, the strongest relations in the data first. `root` is the folder the
    profile's file paths are relative to (default: the profile's own root); without readable data the ideas keep
    the column-type order, round robin over the tables, the big ones first."""
    base = Path(root) if root is not None else Path(files.root) if getattr(files, "root", None) else None
    per_table: list[list[tuple[float, str]]] = []
    for t in sorted(files.tables, key=lambda t: -t.n_rows):  # the big tables first; a stub of a few rows says little
        if t.n_rows < MIN_IDEA_ROWS:
            continue
        per_table.append(_table_ideas(t, _sample(base, t)))
    ordered: list[tuple[float, str]] = []
    while any(per_table):  # round robin keeps every table represented among ties
        for ideas in per_table:
            if ideas:
                ordered.append(ideas.pop(0))
    ranked = sorted(enumerate(ordered), key=lambda p: (-round(p[1][0], 3), p[0]))
    return list(dict.fromkeys(q for _, (_, q) in ranked))[:limit]
