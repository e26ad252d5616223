"""Candidate keys inside a table and candidate joins across tables (name match, value overlap, declared FKs)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd

from worldsmith.tools.files.models import CandidateJoin, ColumnProfile, ColumnRef, TableProfile

MAX_VALUE_SET = 20_000  # distinct values kept per column for overlap tests
MIN_OVERLAP_UNNAMED = 0.8  # containment needed to propose a join between differently named columns
MAX_RAW_OVERLAP_RESPELLED = 0.5  # below this raw containment, ids matching by their number are "spelled differently"
MIN_SPELLED = 0.9  # share of a column's distinct values that must read as <letters><separator?><number>
#: An id spelled as letters, an optional separator and a number (C-00012, c12, CUST_12, 12); group 1: the number.
_SPELLED_ID = re.compile(r"^([a-z]*)[-_ .#/]?0*(\d+)$")
_JOINABLE = {"id", "categorical", "text"}


def _is_integral(s: pd.Series) -> bool:
    if pd.api.types.is_integer_dtype(s) or pd.api.types.is_bool_dtype(s):
        return True
    if pd.api.types.is_float_dtype(s):
        v = s.dropna().to_numpy()
        return bool(len(v)) and bool(np.all(np.isfinite(v))) and bool(np.all(v == np.round(v)))
    return True  # strings, datetimes, categoricals


def candidate_keys(df: pd.DataFrame, columns: list[ColumnProfile], max_pair_columns: int = 8) -> list[list[str]]:
    """Columns (or column pairs) that are non-null and unique over `df`. Pairs are tried only without a single key."""
    n = len(df)
    if n < 2:
        return []
    by_name = {c.name: c for c in columns}
    single: list[list[str]] = []
    eligible: list[str] = []
    for name in df.columns:
        col = df[name]
        prof = by_name.get(str(name))
        if prof is None or prof.null_rate > 0 or prof.semantic_type == "bool":
            continue
        if prof.semantic_type == "numeric":  # measurements can be unique by chance (volumes, amounts)
            if prof.n_unique <= 100 and _is_integral(col):
                eligible.append(str(name))  # but small integer ranges (years, levels) often complete a pair key
            continue
        if not _is_integral(col):
            continue
        if _hashable(col) and col.nunique(dropna=False) == n:
            single.append([str(name)])
        elif prof.n_unique >= 2:
            eligible.append(str(name))
    if single:
        single.sort(key=lambda k: (by_name[k[0]].semantic_type != "id", k[0]))
        return single[:5]
    eligible = [c for c in eligible if _hashable(df[c])]
    eligible.sort(key=lambda c: -by_name[c].n_unique)
    codes = {c: pd.factorize(df[c])[0].astype(np.int64) for c in eligible[:max_pair_columns]}
    pairs: list[list[str]] = []
    for a, b in combinations(codes, 2):
        combined = codes[a] * (int(codes[b].max()) + 1) + codes[b]
        if len(np.unique(combined)) == n:
            pairs.append([a, b])
    return pairs[:5]


def _hashable(s: pd.Series) -> bool:
    try:
        s.head(50).nunique()
        return True
    except TypeError:
        return False


_ID_NAME = re.compile(r"(?:^|[_\s.\-])(?:id|key|uuid|guid|code|no|num|number|nr)$", re.I)
_ID_CAMEL = re.compile(r"[a-z0-9](?:Id|ID|Key|Code|No|Num|Number|Nr)$")


def id_like_name(name: str) -> bool:
    return name.strip().lower() in {"id", "key", "uuid"} or bool(_ID_NAME.search(name.strip())) or bool(
        _ID_CAMEL.search(name.strip())
    )


def normalise_name(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def normalise_values(s: pd.Series) -> set[str]:
    """Distinct values as comparable strings (integral floats lose '.0', strings are stripped and case-folded)."""
    v = s.dropna()
    if v.empty:
        return set()
    if pd.api.types.is_float_dtype(v) and _is_integral(v):
        v = v.astype(np.int64)
    try:
        uniq = pd.unique(v)
    except TypeError:
        return set()
    text = pd.Series(uniq[:MAX_VALUE_SET]).astype(str).str.strip().str.casefold()  # vectorised: 20k values
    out = set(text.tolist())
    out.discard("")
    return out


@dataclass
class JoinColumn:
    """What the join finder needs about one column of one table."""

    ref: ColumnRef
    semantic_type: str
    unique: bool
    values: set[str] = field(default_factory=set)
    example: str | None = None  # one value as the file spells it
    numbers: set[str] = field(default_factory=set)  # the numbers in its values, when they read as spelled ids
    prefix: str = ""  # the letters most of those ids start with (case-folded; "" for bare numbers)


def id_numbers(values: set[str]) -> tuple[set[str], str]:
    """The numbers of `values` (case-folded strings) when nearly all read as an id spelled as letters, an
    optional separator and a number (C-00012, c12, CUST_12; leading zeros dropped), with the commonest letters;
    ({}, "") when they do not."""
    if len(values) < 2:
        return set(), ""
    found = [m.groups() for v in values if (m := _SPELLED_ID.match(v))]
    if len(found) < MIN_SPELLED * len(values):
        return set(), ""
    prefixes = Counter(p for p, _ in found)
    return {n.lstrip("0") or "0" for _, n in found}, prefixes.most_common(1)[0][0]


def join_columns(profile: TableProfile, df: pd.DataFrame) -> list[JoinColumn]:
    """Collect the columns of a profiled table that could take part in a join."""
    out: list[JoinColumn] = []
    for prof, name in zip(profile.columns, df.columns):
        if prof.semantic_type in ("bool", "datetime") or prof.n_unique < 2:
            continue
        if prof.semantic_type == "numeric" and not _is_integral(df[name]):
            continue  # continuous measurements never join (integer ones may, by name: years, levels)
        if prof.name.lower().startswith("unnamed:"):
            continue  # a saved row index joins with every other row index
        ref = ColumnRef(file=profile.file, table=profile.table, column=prof.name)
        unique = prof.null_rate == 0 and prof.n_unique == len(df)
        values = normalise_values(df[name])
        first = df[name].dropna()
        example = str(first.iloc[0]).strip() if len(first) else None
        numbers, prefix = id_numbers(values) if prof.semantic_type in _JOINABLE else (set(), "")
        out.append(JoinColumn(ref, prof.semantic_type, unique, values, example, numbers, prefix))
    return out[:60]


def _table_alias(table: ColumnRef) -> str:
    stem = (table.table or table.file.rsplit("/", 1)[-1].split(".")[0]).lower()
    stem = normalise_name(stem)
    return stem[:-1] if stem.endswith("s") else stem


def _names_match(a: JoinColumn, b: JoinColumn) -> bool:
    na, nb = normalise_name(a.ref.column), normalise_name(b.ref.column)
    if not na or not nb:
        return False
    if na == nb:
        return True
    # customers.id <-> orders.customer_id
    return (na == "id" and nb == _table_alias(a.ref) + "id") or (nb == "id" and na == _table_alias(b.ref) + "id")


def _overlap(a: set[str], b: set[str]) -> float:
    if not a or not b:
        return 0.0
    small, big = (a, b) if len(a) <= len(b) else (b, a)
    return len(small & big) / len(small)


def find_joins(tables: list[list[JoinColumn]], max_joins: int = 50) -> list[CandidateJoin]:
    """Column pairs across different tables whose names match after normalisation or whose values overlap."""
    found: list[tuple[tuple[int, float], CandidateJoin]] = []
    for i, j in combinations(range(len(tables)), 2):
        for a in tables[i]:
            for b in tables[j]:
                join = _judge(a, b)
                if join is not None:
                    rank = (0 if "name" in join.reason else 1, -(join.overlap_ratio or 0.0))
                    found.append((rank, join))
    found.sort(key=lambda t: t[0])
    return [j for _, j in found[:max_joins]]


def _same_entity(a: JoinColumn, b: JoinColumn, named: bool) -> bool:
    """Could two columns of spelled ids (the numbers differ in prefix) name the same entity? Numbers alone say
    little (order 12 and customer 12 share one), so a prefix must agree — P-1, PAT_1 and p1 start alike, C-1
    and O-1 do not — or, for bare numbers on one side, the column names must."""
    if min(len(a.numbers), len(b.numbers)) < 2 or (not a.prefix and not b.prefix):
        return False  # bare numbers on both sides already overlap as values
    if not a.prefix or not b.prefix:
        return named
    return a.prefix[0] == b.prefix[0] and (a.prefix.startswith(b.prefix) or b.prefix.startswith(a.prefix) or named)


def _judge(a: JoinColumn, b: JoinColumn) -> CandidateJoin | None:
    named = _names_match(a, b)
    ratio = _overlap(a.values, b.values) if (a.values and b.values) else None
    key_like = (a.unique or b.unique or "id" in (a.semantic_type, b.semantic_type)) and (
        a.semantic_type in _JOINABLE and b.semantic_type in _JOINABLE
    )
    spellings = None
    if (ratio or 0.0) < MAX_RAW_OVERLAP_RESPELLED and _same_entity(a, b, named) and key_like:
        by_number = _overlap(a.numbers, b.numbers)
        if by_number >= MIN_OVERLAP_UNNAMED:  # the same ids, spelled differently: P-00001 vs PAT_1
            ratio, spellings = by_number, (a.example or "", b.example or "")
    strong = (
        ratio is not None
        and ratio >= MIN_OVERLAP_UNNAMED
        and key_like
        and min(len(a.values), len(b.values)) >= 5
    )
    if named and not (a.unique or b.unique or "id" in (a.semantic_type, b.semantic_type)):
        named = False  # shared generic names ("Gender", "Age") in unrelated tables are not join keys
    if not named and not strong:
        return None
    reason = "name+overlap" if named and strong else ("name" if named else "overlap")
    return CandidateJoin(
        left=a.ref,
        right=b.ref,
        reason=reason,
        overlap_ratio=round(ratio, 3) if ratio is not None else None,
        left_unique=a.unique,
        right_unique=b.unique,
        spellings=spellings,
    )
