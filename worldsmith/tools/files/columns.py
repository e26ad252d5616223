"""Per-column statistics and semantic-type inference for the profiler."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pandas as pd

from worldsmith.prompts import template
from worldsmith.tools.files.joins import id_like_name
from worldsmith.tools.files.models import ColumnProfile, ValueCount

CLIP = 40
_BOOL_WORDS = {"true", "false", "yes", "no", "y", "n", "t", "f", "0", "1"}
_TIME_ONLY = re.compile(r"\d{1,3}:\d{2}(?::\d{2}(?:\.\d+)?)?")
_DATE_HINT = re.compile(
    r"\d{1,4}[-/.:]\d{1,2}|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b", re.I
)


def clip(value: object, limit: int = CLIP) -> str:
    """Stringify a cell for prompts: missing → 'NA', long values cut with an ellipsis."""
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NaT:
        return "NA"
    try:
        if pd.isna(value):  # type: ignore[arg-type]
            return "NA"
    except (TypeError, ValueError):
        pass
    text = str(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _flatten_nested(s: pd.Series) -> tuple[pd.Series, bool]:
    """Lists/dicts (from JSON) are unhashable: compare them as their JSON text."""
    if s.dtype != object:
        return s, False
    probe = s.dropna().head(200)
    if not any(isinstance(v, (list, dict, set)) for v in probe):
        return s, False
    return s.map(lambda v: json.dumps(v, default=str, sort_keys=True) if isinstance(v, (list, dict, set)) else v), True


def profile_column(name: object, s: pd.Series) -> ColumnProfile:
    """Profile one column (`s` is already the stats sample when the table is sampled)."""
    col_name = str(name)
    notes: list[str] = []
    if col_name.startswith("Unnamed:"):
        notes.append("header cell is empty (often a saved row index)")
    if col_name != col_name.strip():
        notes.append(f"column name has surrounding whitespace: {col_name!r}")
    s, nested = _flatten_nested(s)
    if nested:
        notes.append("holds nested values (lists/objects), shown as JSON")
    n = len(s)
    nonnull = s.dropna()
    null_rate = 1.0 - len(nonnull) / n if n else 0.0
    n_unique = int(nonnull.nunique()) if len(nonnull) else 0
    prof = ColumnProfile(
        name=col_name,
        dtype=str(s.dtype),
        semantic_type="text",
        null_rate=round(null_rate, 4),
        n_unique=n_unique,
        examples=[clip(v) for v in pd.unique(nonnull.head(500))[:3]],
        notes=notes,
    )
    if len(nonnull) == 0:
        prof.notes.append("all values missing")
        return prof
    if n_unique == 1:
        prof.notes.append("constant column")
    if pd.api.types.is_bool_dtype(s):
        prof.semantic_type = "bool"
    elif pd.api.types.is_datetime64_any_dtype(s):
        _datetime_stats(prof, nonnull)
    elif pd.api.types.is_numeric_dtype(s):
        _numeric(prof, nonnull, col_name)
    else:
        _textual(prof, nonnull.astype(str), col_name)
    if prof.semantic_type in ("categorical", "bool") or (prof.semantic_type == "numeric" and n_unique <= 10):
        counts = nonnull.astype(str).value_counts().head(5) if nested else nonnull.value_counts().head(5)
        if len(counts) and int(counts.iloc[0]) > 1:  # all-distinct values have no "top"
            prof.top_values = [ValueCount(value=clip(k), count=int(v)) for k, v in counts.items()]
    return prof


def _numeric(prof: ColumnProfile, v: pd.Series, name: str) -> None:
    values = v.to_numpy(dtype=float, na_value=np.nan)
    finite = values[np.isfinite(values)]
    if len(finite) < len(values):
        prof.notes.append(f"{len(values) - len(finite)} infinite values")
    integral = len(finite) > 0 and bool(np.all(finite == np.round(finite)))
    unique = prof.n_unique == len(v)
    if integral and set(np.unique(finite[:10_000])) <= {0.0, 1.0} and prof.n_unique == 2:
        prof.semantic_type = "bool"
    elif integral and (id_like_name(name) and prof.n_unique > 1 and (unique or prof.n_unique >= 0.01 * len(v))):
        prof.semantic_type = "id"
    elif integral and unique and len(v) >= 10 and _is_row_index(finite):
        prof.semantic_type = "id"
        prof.notes.append("looks like a saved row index")
    else:
        prof.semantic_type = "numeric"
    if len(finite):
        prof.min, prof.max = float(finite.min()), float(finite.max())
        prof.mean = float(finite.mean())
        prof.std = float(finite.std(ddof=1)) if len(finite) > 1 else 0.0


def _is_row_index(values: np.ndarray) -> bool:
    return float(values[0]) in (0.0, 1.0) and bool(np.all(np.diff(values) == 1))


def _datetime_stats(prof: ColumnProfile, v: pd.Series) -> None:
    prof.semantic_type = "datetime"
    prof.min, prof.max = _stamp(v.min(), v), _stamp(v.max(), v)


def _stamp(value: pd.Timestamp, column: pd.Series) -> str:
    """ISO text; date only when every value in the column is at midnight."""
    try:
        dates_only = bool((column.dt.normalize() == column).all())
    except (AttributeError, TypeError):
        dates_only = False
    return value.date().isoformat() if dates_only else str(value)


def _time_only(prof: ColumnProfile, s: pd.Series) -> None:
    """HH:MM[:SS] without a date: a duration or time of day (parsing it as a date would invent today's date)."""
    prof.semantic_type = "datetime"
    prof.notes.append("times without dates (durations or times of day)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        td = pd.to_timedelta(s, errors="coerce").dropna()
    if len(td):
        prof.min, prof.max = _hms(td.min()), _hms(td.max())


def _hms(td: pd.Timedelta) -> str:
    total = int(td.total_seconds())
    return f"{total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}"


def _textual(prof: ColumnProfile, v: pd.Series, name: str) -> None:
    stripped = v.str.strip()
    blanks = int((stripped == "").sum())
    if blanks:
        prof.notes.append(f"{blanks} blank strings")
    probe = stripped[stripped != ""].head(2000)
    if probe.empty:
        prof.semantic_type = "text"
        return
    lowered = set(probe.str.lower().unique()[:10])
    if prof.n_unique <= 2 and lowered <= _BOOL_WORDS:
        prof.semantic_type = "bool"
        return
    if _compact_dates(prof, stripped[stripped != ""], probe):
        return
    as_num = pd.to_numeric(probe, errors="coerce")
    num_ratio = float(as_num.notna().mean())
    if num_ratio >= 0.9:
        bad = probe[as_num.isna()].unique()[:3]
        full = pd.to_numeric(stripped, errors="coerce").dropna()
        if id_like_name(name) or (probe.str.match(r"^0\d").mean() > 0.2):
            prof.semantic_type = "id"
        else:
            _numeric(prof, full, name)
        if len(bad):
            prof.notes.append(
                f"stored as text: {1 - num_ratio:.0%} of values are not numbers, e.g. " + ", ".join(map(repr, bad))
            )
        return
    if bool(probe.head(200).str.fullmatch(_TIME_ONLY).all()):
        _time_only(prof, stripped)
        return
    if _looks_datetime(probe):
        parsed = _to_datetime(stripped)
        ok = parsed.dropna()
        if len(ok) >= 0.9 * len(stripped[stripped != ""]):
            prof.semantic_type = "datetime"
            prof.min, prof.max = _stamp(ok.min(), ok), _stamp(ok.max(), ok)
            if len(ok) < len(stripped):
                prof.notes.append(f"{len(stripped) - len(ok)} values do not parse as dates")
            return
    avg_len = float(probe.str.len().mean())
    unique_ratio = prof.n_unique / len(v)
    has_space = float(probe.str.contains(" ", regex=False).mean())
    if id_like_name(name) and avg_len <= 40:
        prof.semantic_type = "id"
    elif avg_len > 50:
        prof.semantic_type = "text"
    elif unique_ratio >= 0.95 and len(v) >= 50:
        prof.semantic_type = "id" if has_space < 0.1 and avg_len <= 40 else "text"
    elif prof.n_unique <= max(50, int(0.05 * len(v))) or unique_ratio <= 0.5:
        prof.semantic_type = "categorical"
    else:
        prof.semantic_type = "text" if has_space >= 0.5 else "id"


def _looks_datetime(probe: pd.Series) -> bool:
    head = probe.head(200)
    if float(head.str.contains(_DATE_HINT).mean()) < 0.9:
        return False
    return float(_to_datetime(head).notna().mean()) >= 0.9


_COMPACT_DATE = re.compile(r"(?:19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])")


def _compact_dates(prof: ColumnProfile, values: pd.Series, probe: pd.Series) -> bool:
    """Dates written as YYYYMMDD text ("20230103"): a date column, not a number (a data room's export wrote them
    so, and the profile called the column numeric, so nothing that splits rows by date found it). Only text: the
    same digits read as integers may as well be ids."""
    if len(probe) < 3 or not bool(probe.str.fullmatch(_COMPACT_DATE).all()):
        return False
    parsed = pd.to_datetime(values, format="%Y%m%d", errors="coerce")
    ok = parsed.dropna()
    if len(ok) < 0.99 * len(values):
        return False
    _datetime_stats(prof, ok)
    prof.notes.append(template("profile_notes.md").section("compact dates"))
    return True


def _to_datetime(s: pd.Series) -> pd.Series:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return pd.to_datetime(s, errors="coerce")
        except (ValueError, TypeError, OverflowError):
            return pd.to_datetime(s, errors="coerce", format="mixed")
