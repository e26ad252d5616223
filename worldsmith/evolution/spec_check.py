"""Does an answer spec written for an evolution number compute that number from the task's files?

The task writer's spec passes the lint when no facet is left open, but an open-ended model can close a facet
wrongly: a per-group mean specified without its group filter, a "time window" on a column that holds no dates.
For the quantities a spec pins down with plain table operations (mean, count, a difference of means over two
sides, and the Pearson correlation or least-squares slope of two columns of one file) this module computes the
spec's value from the files with pandas and says when it is not the number the evolution script printed. Other
quantities (shares, lagged correlations, ...) are left to the lint.
"""

from __future__ import annotations

import datetime as dt
import math
import operator
import re
import warnings
from pathlib import Path

import pandas as pd

from worldsmith.core.answer_spec import AnswerFacets, Filter, Measure, Window, is_data_file
from worldsmith.core.code_text import without_comments
from worldsmith.tools.files.errors import FileReadError
from worldsmith.tools.files.readers import read_table

#: quantities computed here; anything else is not checked
CHECKED = ("mean", "count", "difference", "correlation", "slope")
_ORDER = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


def _table(root: Path, file: str) -> pd.DataFrame:
    label = file.split("[", 1)
    sheet = label[1].rstrip("]") if len(label) == 2 else None
    return read_table(root / label[0], sheet=sheet)


def _filtered(df: pd.DataFrame, filters: list[Filter], window: Window | None) -> tuple[pd.DataFrame, list[str]]:
    problems = []
    for f in filters:
        if f.column not in df.columns:
            problems.append(f"filter column `{f.column}` is not a column of the measure's file")
            continue
        col, value = df[f.column], f.value
        if isinstance(value, list):
            keep = col.isin(value) | col.astype(str).isin([str(v) for v in value])
        elif f.op in ("==", "!="):
            same = (col.astype(str) == str(value)) | (col == value)
            keep = same if f.op == "==" else ~same
        else:  # an order: against a date as dates, a number as numbers, else as text
            if isinstance(value, dt.date):
                lhs, rhs = pd.to_datetime(col, errors="coerce", format="mixed"), pd.Timestamp(value)
            elif isinstance(value, (int, float)):
                lhs, rhs = pd.to_numeric(col, errors="coerce"), value
            else:
                lhs, rhs = col.astype(str), str(value)
            keep = _ORDER[f.op](lhs, rhs)
        df = df[keep]
    if window is not None and not window.all_dates and window.column:
        if window.column not in df.columns:
            problems.append(f"time window column `{window.column}` is not a column of the measure's file")
            return df, problems
        with warnings.catch_warnings():  # a column of mixed or no date formats: unparsed cells become NaT
            warnings.simplefilter("ignore", UserWarning)
            dates = pd.to_datetime(df[window.column], errors="coerce", format="mixed")
        if dates.notna().sum() == 0 and len(df):
            problems.append(f"time window column `{window.column}` holds no dates")
            return df, problems
        keep = dates.notna()
        if window.start is not None:
            keep &= dates >= pd.Timestamp(window.start)
        if window.end is not None:
            keep &= dates < pd.Timestamp(window.end)
        df = df[keep]
    return df, problems


def _value(df: pd.DataFrame, facets: AnswerFacets) -> float | None:
    if facets.quantity == "count":
        return float(len(df))
    if facets.quantity in ("correlation", "slope"):
        return _pair(df, facets.measure.variable, facets.x.variable, facets.quantity) if facets.x else None
    col = pd.to_numeric(df[facets.measure.variable], errors="coerce").dropna()
    return float(col.mean()) if len(col) else None


def _pair(df: pd.DataFrame, y: str, x: str, quantity: str) -> float | None:
    """Pearson r of y and x, or the least-squares slope of y on x, over the rows where both are numbers."""
    both = pd.DataFrame({"y": pd.to_numeric(df[y], errors="coerce"), "x": pd.to_numeric(df[x], errors="coerce")}
                        ).dropna()
    if len(both) < 3 or both["x"].nunique() < 2:
        return None
    if quantity == "correlation":
        r = both["y"].corr(both["x"])
        return None if math.isnan(r) else float(r)
    return float(both["x"].cov(both["y"]) / both["x"].var())


def spec_value(facets: AnswerFacets, root: Path) -> tuple[float | None, list[str]]:
    """(the value the spec computes from the files under `root`, problems); (None, []) when the spec's quantity is
    not one this module computes or its file cannot be read as one table."""
    if facets.quantity not in CHECKED or len(facets.measure.files) != 1:
        return None, []
    if any(f.column in facets.other_columns and facets.measure.files[0] not in facets.other_columns[f.column]
           for f in facets.filters):  # a filter on another table's column: that needs the join, not computed here
        return None, []
    if not is_data_file(facets.measure.files[0].split("[", 1)[0]):  # v17's writer named a memo the measure's file
        return None, [f"{facets.measure.files[0]} is not a data file: name the table that records "
                      f"`{facets.measure.variable}`"]
    try:
        df = _table(root, facets.measure.files[0])
    except (OSError, ValueError, KeyError, FileReadError):
        return None, []
    if facets.quantity != "count" and facets.measure.variable not in df.columns:
        return None, [f"measure `{facets.measure.variable}` is not a column of {facets.measure.files[0]}"]
    if facets.quantity in ("correlation", "slope"):
        x = facets.x
        if x is None or x.files != facets.measure.files:  # no x (the lint says so) or x in another file: unchecked
            return None, []
        if x.variable not in df.columns:
            return None, [f"x `{x.variable}` is not a column of {facets.measure.files[0]}"]
    base, problems = _filtered(df, facets.filters, facets.window)
    if problems:
        return None, problems
    if facets.quantity == "difference":
        c = facets.comparison
        if c is None:
            return None, []
        a, pa = _filtered(base, c.a.filters, c.a.window)
        b, pb = _filtered(base, c.b.filters, c.b.window)
        if pa or pb:
            return None, pa + pb
        va, vb = _value(a, facets), _value(b, facets)
        return (None if va is None or vb is None else va - vb), []
    return _value(base, facets), []


def spec_mismatch(facets: AnswerFacets, root: Path, printed: float) -> list[str]:
    """Why the spec does not describe the printed number (empty when it does, or cannot be checked here)."""
    value, problems = spec_value(facets, root)
    if problems:
        return problems
    if value is None:
        return []
    places = facets.decimals if facets.decimals is not None else 6
    if math.isclose(value, printed, rel_tol=1e-3, abs_tol=0.5 * 10 ** -places):
        return []
    return [f"read as written, the spec gives {value:.6g} from the files, not the printed {printed:.6g}: a filter "
            "(e.g. the group a per-group value belongs to), the population or the time window is missing or wrong"]


def _data_tables(root: Path, files: list[str]) -> dict[str, pd.DataFrame]:
    """The task's data files that read as one table each, by name (documents and unreadable files left out)."""
    tables: dict[str, pd.DataFrame] = {}
    for f in files:
        if not is_data_file(f.split("[", 1)[0]):
            continue
        try:
            tables[f] = _table(root, f)
        except (OSError, ValueError, KeyError, FileReadError):
            continue
    return tables


def _said(facets: AnswerFacets) -> set[str]:
    """Every value the spec's filters (and comparison sides) keep rows by, lower-cased."""
    filters = list(facets.filters)
    if facets.comparison is not None:
        filters += facets.comparison.a.filters + facets.comparison.b.filters
    return {str(v).lower() for f in filters for v in (f.value if isinstance(f.value, list) else [f.value])}


def named_group(facets: AnswerFacets, root: Path, name: str, files: list[str]) -> tuple[str, str, str] | None:
    """(label, file, column) when the number's name ends in a value of exactly one text column of the task's data
    `files` (`mean_business` → 'business', a `segment` of crm.xlsx) and no filter or comparison side of the spec
    keeps rows by it; else None. v11's writer specified `mean_business` with "Filters: none": read as written,
    it is every order's mean."""
    said = _said(facets)
    tables = _data_tables(root, files)
    parts = name.split("_")
    for k in range(1, len(parts)):  # the shortest suffix first, as in `repaired`
        label = "_".join(parts[-k:])
        if label.lower() in said:
            return None
        homes = [(f, str(c)) for f, df in tables.items() for c in df.columns
                 if not pd.api.types.is_numeric_dtype(df[c]) and (df[c].astype(str) == label).any()]
        if len(homes) == 1:
            return label, homes[0][0], homes[0][1]
        if homes:
            return None
    return None


def group_problems(facets: AnswerFacets, root: Path, name: str, files: list[str]) -> list[str]:
    found = named_group(facets, root, name, files)
    if found is None:
        return []
    label, file, column = found
    return [f"the name {name!r} is the value for {label!r} (a value of `{column}` in {file}), but no filter keeps "
            f"those rows: add the filter `{column}` == {label!r}"
            + ("" if file in facets.measure.files[:1] else f" and list `{column}` under other_columns as recorded "
               f"in {file}")]


def with_group(facets: AnswerFacets, root: Path, name: str, files: list[str]) -> AnswerFacets:
    """The spec with the filter its name's group label calls for (`named_group`), when one is missing."""
    found = named_group(facets, root, name, files)
    if found is None:
        return facets
    label, file, column = found
    update: dict[str, object] = {"filters": [*facets.filters, Filter(column=column, op="==", value=label)]}
    if file not in facets.measure.files[:1]:
        update["other_columns"] = {**facets.other_columns, column: [file]}
    return facets.model_copy(update=update)


def repaired(facets: AnswerFacets, root: Path, name: str, printed: float) -> AnswerFacets | None:
    """The spec with the two slips a small model makes most, fixed from the data — or None when that does not make
    it compute the printed number: a time window on a column that holds no dates becomes "all dates" (the lint
    already required one), and a per-group value named after its group (`mean_E`) gets the filter on the one column
    of the measure's file that holds that group label; a correlation or slope without its x gets the one column
    that gives the printed number, and an open window becomes "all dates" when the spec then computes the
    number; a "difference" without its comparison named as a plain mean or count (`mean_x`) becomes that; a window
    whose end date was meant inside it ends a day later. Accepted only when the result reproduces the number."""
    fixed = _plain(facets, name, root, printed) or facets
    w = facets.window
    if w is not None and not w.all_dates and any("time window column" in p for p in spec_value(facets, root)[1]):
        fixed = fixed.model_copy(update={"window": Window(all_dates=True)})
    if fixed.quantity in ("correlation", "slope") and fixed.x is None:
        fixed = _with_x(fixed, root, printed) or fixed
    if w is not None and not w.all_dates and not (w.column and (w.start or w.end)):
        # an open window (the lint refuses it): all dates, when the spec then computes the printed number
        open_filled = fixed.model_copy(update={"window": Window(all_dates=True)})
        if spec_value(open_filled, root)[0] is not None and not spec_mismatch(open_filled, root, printed):
            return open_filled
    if not spec_mismatch(fixed, root, printed):
        return fixed if fixed is not facets else None
    if (through := _through_end(fixed, root, printed)) is not None:
        return through
    if fixed.filters or fixed.quantity not in ("mean", "count") or len(fixed.measure.files) != 1:
        return None
    try:
        df = _table(root, fixed.measure.files[0])
    except (OSError, ValueError, KeyError):
        return None
    parts = name.split("_")
    for k in range(1, len(parts)):  # the shortest suffix first: mean_E → "E"; mean_north_east → "east", "north_east"
        label = "_".join(parts[-k:])
        homes = [c for c in df.columns
                 if not pd.api.types.is_numeric_dtype(df[c]) and (df[c].astype(str) == label).any()]
        if len(homes) != 1:
            continue
        candidate = fixed.model_copy(update={"filters": [Filter(column=homes[0], op="==", value=label)]})
        if not spec_mismatch(candidate, root, printed):
            return candidate
    return None


#: a number named like this is that plain quantity (mean_discount_pct, monthly_mean_2023-01_web, avg_amount,
#: n_orders), unless its name also says it is a change or a gap
_PLAIN_NAMES = (("mean", re.compile(r"(?:^|_)(mean|avg|average)(?:_|$)", re.IGNORECASE)),
                ("count", re.compile(r"^(count|n|num|number)(_|$)", re.IGNORECASE)))
_CHANGE_NAME = re.compile(r"(?:^|_)(diff|difference|change|gap|delta|minus|vs|growth|increase|decrease)(?:_|$)",
                          re.IGNORECASE)


def _through_end(facets: AnswerFacets, root: Path, printed: float) -> AnswerFacets | None:
    """A window whose end the writer meant as the last day inside it (v14's July 2024 mean: end 2024-07-31, which
    leaves July 31 out, since a window ends before its end date): the end a day later, when that computes the
    printed number; else None."""
    w = facets.window
    if w is None or w.all_dates or w.end is None:
        return None
    through = facets.model_copy(update={"window": w.model_copy(update={"end": w.end + dt.timedelta(days=1)})})
    if spec_value(through, root)[0] is None or spec_mismatch(through, root, printed):
        return None
    return through


def _plain(facets: AnswerFacets, name: str, root: Path, printed: float) -> AnswerFacets | None:
    """A "difference" with no comparison whose name says it is a plain mean or count (v10's writer filed
    `mean_discount_pct` as a difference three times, v14's `monthly_mean_2023-01_web`), as that quantity, when it
    then computes the printed number or cannot be computed here (a filter on a linked table's column: v11's `mean_discount_pct_E`, the
    region a column of crm.xlsx, was filed as a difference three times and its task lost); else None."""
    if facets.quantity != "difference" or facets.comparison is not None or _CHANGE_NAME.search(name):
        return None
    for quantity, pattern in _PLAIN_NAMES:
        if pattern.search(name):
            candidate = facets.model_copy(update={"quantity": quantity})
            value, problems = spec_value(candidate, root)
            if not problems and (value is None or not spec_mismatch(candidate, root, printed)):
                return candidate
    return None


#: `a["y"].corr(b["x"])` / `a.y.corr(b.x)`: the two columns a script correlates
_CORR = re.compile(r"""(?:\[\s*['"](?P<y1>[^'"]+)['"]\s*\]|\.(?P<y2>\w+))\s*\.corr\(\s*\w+\s*"""
                   r"""(?:\[\s*['"](?P<x1>[^'"]+)['"]\s*\]|\.(?P<x2>\w+))""")


def x_from_script(facets: AnswerFacets, script: str, root: Path, files: list[str]) -> AnswerFacets | None:
    """A correlation written without its other variable, when the script correlates the measure with one other
    column (`df["amount"].corr(df["income"])`) that exactly one of the task's data files holds: that column, in
    that file. r is symmetric, so which is y does not matter. v11's amount-income correlation over the orders
    joined to crm lost its task: income is crm's, and the repair from the data looks in the measure's file only."""
    if facets.quantity != "correlation" or facets.x is not None:
        return None
    y = facets.measure.variable
    others = {(m["x1"] or m["x2"]) if (m["y1"] or m["y2"]) == y else (m["y1"] or m["y2"])
              for m in _CORR.finditer(script) if y in ((m["y1"] or m["y2"]), (m["x1"] or m["x2"]))}
    if len(others) != 1:
        return None
    x = others.pop()
    homes = [f for f, df in _data_tables(root, files).items() if x in df.columns]
    if len(homes) != 1:
        return None
    return facets.model_copy(update={"x": Measure(variable=x, files=homes)})


def _with_x(facets: AnswerFacets, root: Path, printed: float) -> AnswerFacets | None:
    """A correlation or slope written without its other variable: the one numeric column of the measure's file
    whose value with the measure is the printed number (None when no column, or more than one, gives it). When
    none does within the spec's dated window, the same over all dates (the script read the whole file: v8's writer
    put a calendar-year window on a file whose posting dates run a day past it)."""
    found = _x_within(facets, root, printed)
    if found is None and facets.window is not None and not facets.window.all_dates:
        found = _x_within(facets.model_copy(update={"window": Window(all_dates=True)}), root, printed)
    return found


def _x_within(facets: AnswerFacets, root: Path, printed: float) -> AnswerFacets | None:
    if len(facets.measure.files) != 1:
        return None
    try:
        df = _table(root, facets.measure.files[0])
    except (OSError, ValueError, KeyError):
        return None
    if facets.measure.variable not in df.columns:
        return None
    hits = []
    for c in df.columns:
        if c == facets.measure.variable:
            continue
        candidate = facets.model_copy(update={"x": Measure(variable=str(c), files=list(facets.measure.files))})
        value, problems = spec_value(candidate, root)
        if any("time window column" in p for p in problems):  # a window on no date column: all dates, as above
            candidate = candidate.model_copy(update={"window": Window(all_dates=True)})
            value, problems = spec_value(candidate, root)
        if value is not None and not problems and math.isclose(value, printed, rel_tol=1e-3, abs_tol=1e-6):
            hits.append(candidate)
    return hits[0] if len(hits) == 1 else None


#: words of a computation, not of what one row records: a measure's description with them is dropped
_AGGREGATE_WORDS = re.compile(r"\b(?:each|per|every)\s+(?:month|year|day|week|quarter|group|segment|region|channel)\b"
                              r"|\b(?:monthly|yearly|annual|daily|weekly|average|mean|median|sum|totals?)\b",
                              re.IGNORECASE)
_METHOD = re.compile(r"pearson|spearman|kendall|rank|least[- ]squares|ols|regression", re.IGNORECASE)
#: how the rows are read when the spec computed the printed number from the files as they are
AS_RECORDED = "every row of the file as recorded (repeated records are kept, no value is converted)"


def pinned(facets: AnswerFacets, root: Path, printed: float) -> AnswerFacets:
    """The second readings a blind solve of an evolution task found, closed: a correlation's scale is a
    coefficient (a 'fraction between 0 and 1' cannot be negative), the method is named (Pearson's r, the least-
    squares slope: a Spearman reading gave 0.795 for an expected 0.829), and when the spec computes the printed
    number from the files as they are, the population says so (the memo's "the first row counts" reading moved a
    mean from 2.119 to 2.137, outside its tolerance) — these two only when the spec's value is computed here; and a
    measure described by an aggregate loses the description (v15: "The total amount of orders in each month" for
    one month's mean)."""
    update: dict[str, object] = {}
    if facets.quantity in ("correlation", "lagged_correlation", "partial_correlation") and facets.scale != "coefficient":
        update["scale"] = "coefficient"
    # a measure described by an aggregate ("The total amount of orders in each month" for a mean of amount over
    # January's rows: v15) reads as another quantity; a column's description says what one row records
    measures = {k: m for k in ("measure", "x") if (m := getattr(facets, k)) is not None
                and _AGGREGATE_WORDS.search(m.description or "")}
    update.update({k: m.model_copy(update={"description": ""}) for k, m in measures.items()})
    value, problems = spec_value(facets, root)
    if value is None or problems or not math.isclose(value, printed, rel_tol=1e-3, abs_tol=1e-9):
        return facets.model_copy(update=update)
    if facets.quantity in ("correlation", "slope") and not _METHOD.search(facets.aggregation):
        update["aggregation"] = _method_named(facets)
    if AS_RECORDED not in facets.population:
        update["population"] = recorded_population(facets.population)
    return facets.model_copy(update=update)


def script_method(facets: AnswerFacets, script: str) -> AnswerFacets:
    """A correlation not recomputed here (its x in another table) named as Pearson's r when every `.corr(` call of
    the script takes pandas' default method: v11's amount-income task named no method, and a Spearman reading gives
    0.3945 against 0.4672."""
    if facets.quantity != "correlation" or _METHOD.search(facets.aggregation) or ".corr(" not in script \
            or re.search(r"\.corr\([^)]*method\s*=", script):
        return facets
    return facets.model_copy(update={"aggregation": _method_named(facets)})


#: what a model writes for the aggregation of a correlation or slope, which has none of its own
_NO_AGGREGATION = {"", "none", "n/a", "na", "-", "null", "not applicable"}


def _method_named(facets: AnswerFacets) -> str:
    """The aggregation with its method said: Pearson's r for a correlation, the least-squares slope for a slope."""
    x, y = facets.x.variable if facets.x else "x", facets.measure.variable
    method = (f"Pearson's r of `{y}` and `{x}`" if facets.quantity == "correlation" else
              f"the least-squares slope of `{y}` on `{x}`")
    said = facets.aggregation.strip().rstrip(".")
    if said.lower() in _NO_AGGREGATION:  # v12's "Computation: none (Pearson's r of …)"
        return f"{method} over the rows where both are recorded"
    return f"{said} ({method} over the rows where both are recorded)"


def _window_dates(tables: dict[str, pd.DataFrame], column: str) -> pd.Series:
    """The parsed dates of `column` over `tables` (empty when none holds it)."""
    dates = []
    for df in tables.values():
        if column in df.columns:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                dates.append(pd.to_datetime(df[column], errors="coerce", format="mixed").dropna())
    return pd.concat(dates) if dates else pd.Series(dtype="datetime64[ns]")


def unwindowed(facets: AnswerFacets, script: str, root: Path) -> AnswerFacets:
    """A time window read as its writer meant it. Its end is exclusive, and an end on a month's last day on which
    rows are dated means that day included: v11's `mean_business` spec read "rows whose `date` is on or after
    2023-01-01 and before 2023-12-31" for a script that kept every 2023 order, and the 3 orders of 31 December
    moved the mean from 3.20 to 3.19. A window the script never applies (it never names the column) is widened to
    every row of the measure's files it leaves out; one on a column of no dates (v11's `mean_discount_pct_E`:
    "rows whose `region` is on or after 2024-01-01") is moved to the measure's one date column. Unchanged when
    none applies."""
    w = facets.window
    if w is None or w.all_dates or not w.column or not (w.start or w.end):
        return facets
    tables = _data_tables(root, facets.measure.files)
    seen = _window_dates(tables, w.column)
    if seen.empty:  # a window on a column of no dates (v11's `region`): the measure's one date column, if it has one
        dated = sorted({c for df in tables.values() for c in df.columns if _dated(df[c])})
        if len(dated) != 1:
            return facets
        w = w.model_copy(update={"column": dated[0]})
        seen = _window_dates(tables, w.column)
    start, end = w.start, w.end
    if end is not None and (end + dt.timedelta(days=1)).day == 1 and (seen.dt.date == end).any():
        end = end + dt.timedelta(days=1)
    if not re.search(rf"(?<![\w.]){re.escape(w.column)}(?!\w)", without_comments(script)):
        first, last = seen.min().date(), seen.max().date()
        start = first if start is not None and first < start else start
        end = last + dt.timedelta(days=1) if end is not None and last >= end else end
    if (start, end, w.column) == (facets.window.start, facets.window.end, facets.window.column):
        return facets
    return facets.model_copy(update={"window": w.model_copy(update={"start": start, "end": end})})


def _dated(col: pd.Series) -> bool:
    """Whether a text column's values read as dates (nine in ten of a sample of its non-blank values)."""
    if pd.api.types.is_datetime64_any_dtype(col):
        return True
    if pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
        return False
    sample = col.dropna().astype(str).head(50)
    if sample.empty or not sample.str.contains(r"\d{4}|\d{1,2}[/.-]\d{1,2}[/.-]\d{2}", regex=True).all():
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        parsed = pd.to_datetime(sample, errors="coerce", format="mixed")
    return parsed.notna().mean() >= 0.9


def holders(facets: AnswerFacets, root: Path) -> AnswerFacets:
    """The measure's files cut to the ones whose table holds its variable, when one does: v11's `mean_business`
    listed orders_2023.csv and crm.xlsx as where `basket_size` is recorded, and crm.xlsx has no such column (the
    segment it filters by is crm's, and `other_columns` says so)."""
    files = facets.measure.files
    tables = _data_tables(root, files)
    have = [f for f in files if f in tables and facets.measure.variable in tables[f].columns]
    if not have or len(have) == len(files):
        return facets
    return facets.model_copy(update={"measure": facets.measure.model_copy(update={"files": have})})


def recorded_population(population: str) -> str:
    """The population with "every row as recorded" said (once)."""
    if AS_RECORDED in population:
        return population
    pop = population.strip().rstrip(".")
    return AS_RECORDED if not pop or pop.replace("_", " ") in ("all dates", "all rows", "all") \
        else f"{pop}; {AS_RECORDED}"
