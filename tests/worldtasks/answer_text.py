"""An independent solver for the tests: reads ONLY a rendered instruction's facet lines and the data files, and
computes the answer with plain pandas (no worldsmith recipe, kernel or truth)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd


def _files(text: str) -> list[str]:
    return re.findall(r"`([^`]+\.\w+)`", text)


def _line(text: str, label: str) -> str | None:
    m = re.search(rf"^- {label}: (.*)$", text, re.MULTILINE)
    return m.group(1) if m else None


def _read(path: Path) -> pd.DataFrame:
    name = path.name.lower()
    if name.endswith((".csv", ".csv.gz")):
        frames = [pd.read_csv(path)]
    elif name.endswith(".parquet"):
        frames = [pd.read_parquet(path)]
    elif name.endswith(".jsonl"):
        frames = [pd.read_json(path, lines=True)]
    elif name.endswith(".json"):
        frames = [pd.read_json(path)]
    elif name.endswith(".xlsx"):
        frames = list(pd.read_excel(path, sheet_name=None).values())
    elif name.endswith((".sqlite", ".db")):
        with sqlite3.connect(path) as con:
            tables = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
            frames = [pd.read_sql_query(f'select * from "{t}"', con) for t in tables]
    else:
        raise ValueError(path)
    return pd.concat(frames, ignore_index=True)


def _keys(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    return [c for c in a.columns if c in b.columns and (c.endswith("_id") or c == "period")]


def _table(world: Path, files: list[str]) -> pd.DataFrame:
    """Every named file read; files with the same columns stacked, the rest joined on shared id columns."""
    groups: dict[tuple[str, ...], list[pd.DataFrame]] = {}
    for f in dict.fromkeys(files):
        df = _read(world / f)
        if "period" in df.columns:  # systems write periods differently ('2023-01-02', '2023-01-02 00:00:00')
            df["period"] = pd.to_datetime(df["period"])
        groups.setdefault(tuple(sorted(df.columns)), []).append(df)
    frames = sorted((pd.concat(g, ignore_index=True).drop_duplicates() for g in groups.values()),
                    key=len, reverse=True)  # the finest grain first
    out = frames[0]
    for other in frames[1:]:
        keys = _keys(out, other)
        other = other.drop(columns=[c for c in other.columns if c in out.columns and c not in keys])
        out = out.merge(other.drop_duplicates(subset=keys), on=keys, how="left")
    return out


def _condition(df: pd.DataFrame, text: str) -> pd.Series:
    text = re.sub(r" \(in [^)]*\)$", "", text.strip())  # the threshold's unit: values are in it already
    m = re.match(r"`(\w+)` (is not|is above|is at least|is below|is at most|is one of|is) (.*)$", text)
    assert m, text
    col, op, raw = m.groups()
    values = [eval(v) for v in re.findall(r"'[^']*'|-?[\d.]+", raw)]  # noqa: S307 - literals from our own text
    s = df[col]
    if op == "is one of":
        return s.isin(values)
    v = values[0]
    if isinstance(v, str) and s.dtype != object:
        s = s.astype(str)
    return {"is": s == v, "is not": s != v, "is above": s > v, "is at least": s >= v, "is below": s < v,
            "is at most": s <= v}[op]


def _window(df: pd.DataFrame, text: str) -> pd.Series:
    m = re.match(r"rows whose `(\w+)` is (.*)$", text.strip())
    assert m, text
    col, rest = m.groups()
    d = pd.to_datetime(df[col])
    mask = pd.Series(True, index=df.index)
    if lo := re.search(r"on or after (\d{4}-\d{2}-\d{2})", rest):
        mask &= d >= pd.Timestamp(lo.group(1))
    if hi := re.search(r"before (\d{4}-\d{2}-\d{2})", rest):
        mask &= d < pd.Timestamp(hi.group(1))
    return mask


def _side(df: pd.DataFrame, text: str) -> pd.DataFrame:
    inner = re.search(r"\((.*)\)$", text.strip()).group(1)
    mask = pd.Series(True, index=df.index)
    for part in inner.split("; "):
        mask &= _window(df, part) if part.startswith("rows whose") else _condition(df, part)
    return df[mask]


def solve(world: Path, text: str) -> float:
    """The answer the instruction asks for, in its unit, before rounding."""
    measure = _line(text, "Measure")
    against = _line(text, "Against")
    other = _line(text, "Other columns used") or ""
    y = re.match(r"`(\w+)`", measure).group(1)
    x = re.match(r"`(\w+)`", against).group(1) if against else None
    how = _line(text, "Computation")
    if how.startswith("number of distinct"):  # ids recorded in any of the files
        return float(pd.concat([_read(world / f)[y] for f in _files(measure)]).dropna().nunique())
    df = _table(world, _files(measure) + (_files(against) if against else []) + _files(other))
    filters = _line(text, "Filters")
    if not filters.startswith("none"):
        for part in filters.rstrip(".").split("; "):
            df = df[_condition(df, part.removeprefix("only rows where "))]
    window = _line(text, "Time window").rstrip(".")
    if not window.startswith("all records"):
        df = df[_window(df, window)]
    unit = _line(text, "Unit")
    scale = 100.0 if unit.startswith(("percent", "percentage points")) else 1.0
    comparison = _line(text, "Comparison and sign")
    if comparison:
        m = re.match(r"(\w+) minus (\w+), where \1 = (.*) and \2 = (.*); the value is positive", comparison)
        a, b = _side(df, m.group(3)), _side(df, m.group(4))
        return scale * (a[y].dropna().astype(float).mean() - b[y].dropna().astype(float).mean())
    if how.startswith("ordinary least-squares slope"):
        d = df[[x, y]].dropna().astype(float)
        return scale * float(np.polyfit(d[x], d[y], 1)[0])
    if how.startswith("Pearson correlation") and "lagged by" in how:
        lag = int(re.search(r"lagged by (\d+)", how).group(1))
        unit_col = re.search(r"within the same `(\w+)`", _line(text, "Lag")).group(1)
        rank = {p: i for i, p in enumerate(sorted(df["period"].dropna().unique()))}
        d = df.assign(t=df["period"].map(rank))
        prev = d[[unit_col, "t", x]].assign(t=d["t"] + lag).rename(columns={x: "x_prev"})
        m2 = d[[unit_col, "t", y]].merge(prev, on=[unit_col, "t"]).dropna()
        return float(m2["x_prev"].astype(float).corr(m2[y].astype(float)))
    if how.startswith("Pearson correlation"):
        d = df[[x, y]].dropna().astype(float)
        return float(d[x].corr(d[y]))
    if how.startswith("number of distinct"):
        return float(df[y].dropna().nunique())
    if how.startswith("share of the rows"):
        target = eval(re.search(r"equals (.*)$", how.rstrip(".")).group(1))  # noqa: S307
        s = df[y].dropna()
        return scale * float((s.astype(float) == float(target)).mean()) if not isinstance(target, str) else \
            scale * float((s == target).mean())
    return scale * float(df[y].dropna().astype(float).mean())  # arithmetic mean / share of rows with value 1
