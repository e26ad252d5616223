"""Standalone pandas kernels shared by the auditor and the reference solutions.

This module imports only the standard library, numpy and pandas, on purpose: `solution.py` copies
the source of the functions a reference solution needs into a self-contained script, so the script
and the auditor run literally the same reconciliation and recipe code.
Every reconciliation kernel takes a DataFrame first and returns a new one.
"""

import operator
import posixpath
import re
import sqlite3
import xml.etree.ElementTree as ET
import zipfile

import numpy as np
import pandas as pd


# ----------------------------------------------------------------------------- reading
def read_table(path, fmt, part=None):
    """Read one observed table. part = sheet name (xlsx) or table name (sqlite)."""
    if fmt in ("csv", "csv.gz"):
        return pd.read_csv(path, keep_default_na=False, na_values=[""])
    if fmt == "parquet":
        return pd.read_parquet(path)
    if fmt == "txt":
        return read_log(path)
    if fmt == "jsonl":
        return pd.read_json(path, lines=True, dtype=False)
    if fmt == "json":
        return pd.read_json(path, orient="records", dtype=False)
    if fmt == "xlsx":
        return read_sheets(path, [part])[part]
    if fmt == "sqlite":
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            return pd.read_sql_query(f'SELECT * FROM "{part}"', con)
    raise ValueError(f"{path}: unsupported format {fmt!r}")


def read_log(path):
    """A free-text log, one record a line: `[date 2024-01-03] shop: order_id=O-00012 amount=40.5 note="a b"`.

    The optional bracket names the time column and holds its value; `key=value` pairs follow the source name (text
    in double quotes may hold spaces; a blank value is left out of its line). Values come back as text."""
    line_re = re.compile(r"^(?:\[(?P<tcol>[^\s\]]+) (?P<time>[^\]]*)\] )?(?P<source>[^\s:]+):(?P<pairs>.*)$")
    pair_re = re.compile(r'([^\s=]+)=("(?:[^"\\]|\\.)*"|\S*)')
    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            m = line_re.match(line)
            if m is None:
                raise ValueError(f"{path}: line {number} is not a log record: {line[:80]!r}")
            row = {m.group("tcol"): m.group("time")} if m.group("tcol") else {}
            for key, value in pair_re.findall(m.group("pairs")):
                row[key] = re.sub(r"\\(.)", r"\1", value[1:-1]) if value.startswith('"') else value
            rows.append(row)
    return pd.DataFrame(rows, dtype=object)


def xlsx_column_index(ref):
    """Zero-based column of a cell reference: A1 -> 0, AB12 -> 27."""
    n = 0
    for ch in ref:
        if ch.isdigit():
            break
        n = n * 26 + ord(ch.upper()) - 64
    return n - 1


def xlsx_cell_text(cell, ns, shared):
    """A cell's value as the workbook stores it, as text (None when the cell holds nothing)."""
    kind = cell.get("t")
    if kind == "inlineStr":
        return "".join(t.text or "" for t in cell.iter(ns + "t"))
    v = cell.find(ns + "v")
    if v is None or v.text is None:
        return None
    return shared[int(v.text)] if kind == "s" else v.text


def read_sheets(path, sheets=None):
    """Several sheets of a workbook in one pass: {sheet name: DataFrame of text} (all sheets when None).

    A streaming reader of the sheet XML (standard library only), about 3x faster than pandas' openpyxl engine on a
    10^5-row workbook. Cells come back as the text the workbook stores (numbers as written, dates as their text or
    serial number, booleans as 0/1); the first row is the header; blank cells are NaN, as read_csv reads them."""
    ns = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
    rel_id = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
    with zipfile.ZipFile(path) as z:
        workbook = ET.fromstring(z.read("xl/workbook.xml"))
        targets = {r.get("Id"): r.get("Target") for r in ET.fromstring(z.read("xl/_rels/workbook.xml.rels"))}
        where = {}
        for s in workbook.iter(ns + "sheet"):
            t = targets[s.get(rel_id)]
            where[s.get("name")] = t.lstrip("/") if t.startswith("/") else posixpath.normpath(posixpath.join("xl", t))
        shared = []
        if "xl/sharedStrings.xml" in z.namelist():
            for si in ET.fromstring(z.read("xl/sharedStrings.xml")).iter(ns + "si"):
                shared.append("".join(t.text or "" for t in si.iter(ns + "t")))
        out = {}
        for name in list(where) if sheets is None else sheets:
            if name not in where:
                raise ValueError(f"{path}: no sheet {name!r}; sheets: {list(where)}")
            rows = []
            with z.open(where[name]) as f:
                for _, el in ET.iterparse(f):
                    if el.tag != ns + "row":
                        continue
                    row = {}
                    for k, c in enumerate(el.iter(ns + "c")):  # `r` is optional: then cells are consecutive
                        v = xlsx_cell_text(c, ns, shared)
                        if v not in (None, ""):
                            row[xlsx_column_index(c.get("r")) if c.get("r") else k] = v
                    rows.append(row)
                    el.clear()  # keeps memory flat on large sheets
            width = max((max(r) + 1 for r in rows if r), default=0)
            header = [rows[0].get(i, f"column_{i + 1}") for i in range(width)] if rows else []
            grid = [[r.get(i, np.nan) for i in range(width)] for r in rows[1:]]
            out[name] = pd.DataFrame(grid, columns=header, dtype=object)
        return out


def rename_columns(df, mapping):
    """Rename observed columns to canonical names (only those present)."""
    return df.rename(columns={k: v for k, v in mapping.items() if k in df.columns})


def join_name(df, first, last, into):
    """Re-assemble a 'First Last' column that an export split in two."""
    df = df.copy()
    df[into] = df[first].astype("string").str.strip() + " " + df[last].astype("string").str.strip()
    return df.drop(columns=[first, last])


# ----------------------------------------------------------------------------- identifiers
def id_pattern(prefix, alias):
    """Regex matching every spelling of one entity's ids: C-00012, c12, CUST_12, C00012."""
    words = "|".join(sorted({re.escape(prefix), re.escape(alias)}, key=len, reverse=True))
    return rf"^\s*(?i:{words})[-_]?0*(\d+)\s*$"


def _canonical_ids(values, prefix, alias):
    """PREFIX-<number> for every value that is an id of the entity (leading zeros dropped), else NaN."""
    pattern = id_pattern(prefix, alias).replace("(\\d+)", "(?P<n>\\d+)")
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:  # pandas' own regex engine: same result, slower
        digits = pd.Series(values, dtype=object).astype("string").str.extract(pattern, expand=False)
        return np.array([np.nan if pd.isna(d) else f"{prefix}-{d}" for d in digits], dtype=object)
    arr = pa.array(np.asarray(values, dtype=object).astype(str), type=pa.string())  # values: no blanks
    found = pc.extract_regex(arr, pattern)
    digits = pc.if_else(found.is_valid(), pc.struct_field(found, "n"), pa.scalar(None, pa.string()))
    out = pc.binary_join_element_wise(pa.scalar(prefix + "-"), digits, "").to_numpy(zero_copy_only=False)
    out = np.asarray(out, dtype=object)
    out[pd.isna(out)] = np.nan
    return out


def normalise_ids(df, column, prefix, alias):
    """Rewrite any id spelling as PREFIX-<number> (no padding) so systems join."""
    df = df.copy()
    codes, uniques = pd.factorize(df[column])  # parse each distinct spelling once
    canon = _canonical_ids(uniques, prefix, alias)
    out = np.full(len(codes), np.nan, dtype=object)
    out[codes >= 0] = canon[codes[codes >= 0]]
    df[column] = pd.Series(out, index=df.index, dtype=object)
    return df


def id_match_rate(series, prefix, alias):
    """Share of non-blank values that look like ids of the entity (used to find unlabeled keys)."""
    counts = series.dropna().value_counts()
    if len(counts) == 0:
        return 0.0
    hit = pd.Series(counts.index.astype(str), dtype="string").str.match(id_pattern(prefix, alias)).to_numpy(bool)
    return float(counts.to_numpy()[hit].sum() / counts.sum())


# ----------------------------------------------------------------------------- values
def parse_dates(df, column, fmt):
    df = df.copy()
    df[column] = pd.to_datetime(df[column].astype("string"), format=fmt, errors="coerce")
    return df


def to_numeric(df, columns):
    df = df.copy()
    for c in columns:
        if c in df.columns:
            df[c] = pd.to_numeric(df[c], errors="coerce")
    return df


def strip_labels(df, columns):
    df = df.copy()
    for c in columns:
        if c in df.columns:
            df[c] = df[c].astype("string").str.strip().astype(object).where(df[c].notna(), np.nan)
    return df


def undo_unit_change(df, column, date_column, since, factor):
    """Rows recorded on/after `since` were written as value * factor: divide them back."""
    df = df.copy()
    late = df[date_column] >= pd.Timestamp(since)
    values = pd.to_numeric(df[column], errors="coerce").astype(float)
    df[column] = values.where(~late, values / factor)
    return df


def undo_recode(df, column, new_to_old, date_column=None, since=None):
    """Map renamed category labels back (only rows recorded on/after `since` when given)."""
    df = df.copy()
    rows = df[column].notna()
    if since is not None:
        rows &= df[date_column] >= pd.Timestamp(since)
    df.loc[rows, column] = df.loc[rows, column].replace(new_to_old)
    return df


def shift_dates(df, column, days):
    df = df.copy()
    df[column] = df[column] - pd.Timedelta(days=days)
    return df


def dedupe(df, keys):
    """Keep the first record of each key (repeated records follow their original)."""
    return df.drop_duplicates(subset=keys, keep="first").reset_index(drop=True)


def combine_sources(frames, keys):
    """Outer-join several systems that record the same entity; first non-blank value wins."""
    out = frames[0]
    for other in frames[1:]:
        out = out.merge(other, on=keys, how="outer", suffixes=("", "__dup"))
        for col in [c for c in out.columns if c.endswith("__dup")]:
            base = col[: -len("__dup")]
            out[base] = out[base].combine_first(out[col])
            out = out.drop(columns=[col])
    return out


def attach_parent(child, parent, key):
    """Bring a parent entity's columns onto each child row through the foreign key."""
    parent = parent.drop(columns=[c for c in parent.columns if c in child.columns and c != key])
    return child.merge(parent, on=key, how="left")


def read_links(path, key, parent_key, key_spelling, parent_spelling):
    """A mapping table revised over time (key, parent_key, valid_from, valid_to; blank valid_to: still valid), with
    ids spelled as normalise_ids spells them. *_spelling: (prefix, alias)."""
    links = pd.read_csv(path, keep_default_na=False, na_values=[""])
    links = normalise_ids(links, key, *key_spelling)
    links = normalise_ids(links, parent_key, *parent_spelling)
    links["valid_from"] = pd.to_datetime(links["valid_from"])
    links["valid_to"] = pd.to_datetime(links["valid_to"])
    return links


def asof_parent(df, links, key, parent_key, date_column):
    """Each row's parent id as the mapping table has it on the row's date (rows the table does not cover keep
    theirs)."""
    df = df.reset_index(drop=True)
    rows = df[[key, date_column]].assign(_row=np.arange(len(df))).merge(
        links[[key, parent_key, "valid_from", "valid_to"]], on=key, how="inner")
    when = rows[date_column]
    rows = rows[(when >= rows["valid_from"]) & (rows["valid_to"].isna() | (when < rows["valid_to"]))]
    rows = rows.drop_duplicates("_row")
    out = df[parent_key].astype(object).to_numpy().copy()
    out[rows["_row"].to_numpy()] = rows[parent_key].to_numpy()
    df[parent_key] = pd.Series(out, index=df.index, dtype=object)
    return df


def replace_parent(child, parent, key):
    """Re-attach a parent's columns after the foreign key changed (drops the columns attached before)."""
    child = child.drop(columns=[c for c in parent.columns if c != key and c in child.columns])
    return attach_parent(child, parent, key)


# ----------------------------------------------------------------------------- recipes
def apply_where(df, conditions):
    """conditions: list of (column, op, value)."""
    for column, op, value in conditions:
        col = df[column]
        if isinstance(value, str) and pd.api.types.is_datetime64_any_dtype(col):
            value = pd.Timestamp(value)
        if op == "in":
            mask = col.isin(list(value))
        else:
            mask = {"==": operator.eq, "!=": operator.ne, ">": operator.gt, ">=": operator.ge,
                    "<": operator.lt, "<=": operator.le}[op](col, value)
        df = df[mask.fillna(False).astype(bool)]
    return df


def op_mean(df, variable):
    return float(df[variable].dropna().mean())


def op_group_mean(df, variable, by, group):
    return float(df.loc[df[by] == group, variable].dropna().mean())


def op_mean_diff(df, variable, by, group_a, group_b):
    return op_group_mean(df, variable, by, group_a) - op_group_mean(df, variable, by, group_b)


def op_share(df, variable, value):
    s = df[variable].dropna()
    if not isinstance(value, str):
        s = pd.to_numeric(s, errors="coerce").dropna()
    return float((s == value).mean())


def op_slope(df, x, y):
    d = df[[x, y]].dropna().astype(float)
    xc = d[x] - d[x].mean()
    return float((xc * (d[y] - d[y].mean())).sum() / (xc * xc).sum())


def op_corr(df, x, y):
    d = df[[x, y]].dropna().astype(float)
    return float(np.corrcoef(d[x], d[y])[0, 1])


def op_pre_post(df, variable, date_column, event_date, window_days=None):
    d = df[[variable, date_column]].dropna()
    when = pd.Timestamp(event_date)
    if window_days is not None:
        d = d[(d[date_column] >= when - pd.Timedelta(days=window_days))
              & (d[date_column] < when + pd.Timedelta(days=window_days))]
    after = d[date_column] >= when
    return float(d.loc[after, variable].mean() - d.loc[~after, variable].mean())


def op_lagged_corr(df, x, y, unit_column, time_column, lag):
    d = df[[unit_column, time_column, x, y]].dropna(subset=[unit_column, time_column])
    order = {t: i for i, t in enumerate(sorted(d[time_column].dropna().unique()))}
    d = d.assign(_t=d[time_column].map(order))
    prev = d[[unit_column, "_t", x]].assign(_t=d["_t"] + lag).rename(columns={x: "_lagged"})
    m = d[[unit_column, "_t", y]].merge(prev, on=[unit_column, "_t"], how="inner").dropna()
    return float(np.corrcoef(m["_lagged"].astype(float), m[y].astype(float))[0, 1])


def op_partial_corr(df, x, y, controls):
    """Correlation of x and y with the controls' linear effects removed from both (residuals of OLS with an
    intercept; a non-numeric control becomes 0/1 columns, first label dropped); rows missing any column left out."""
    d = df[[x, y, *controls]].dropna()
    design = [np.ones((len(d), 1))]
    for c in controls:
        col = d[c]
        if pd.api.types.is_numeric_dtype(col) and not isinstance(col.dtype, pd.CategoricalDtype):
            design.append(col.to_numpy(dtype=float)[:, None])
        else:
            design.append(pd.get_dummies(col.astype(str), drop_first=True).to_numpy(dtype=float))
    z = np.hstack(design)

    def residual(v):
        beta = np.linalg.lstsq(z, v, rcond=None)[0]
        return v - z @ beta

    rx, ry = residual(d[x].to_numpy(dtype=float)), residual(d[y].to_numpy(dtype=float))
    return float(np.corrcoef(rx, ry)[0, 1])


def op_distinct_count(df, key):
    return float(df[key].dropna().nunique())


def op_top_group(df, variable, by):
    return str(df.groupby(by)[variable].mean().idxmax())
