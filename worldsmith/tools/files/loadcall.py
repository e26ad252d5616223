"""The exact pandas call that loads one table, as a line of Python a model can copy verbatim.

File names may hold spaces, `=`, `+`, quotes, backslashes or unicode, so every name is written as a proper Python
string literal (`py_str`), table names inside SQL as quoted identifiers, and a CSV's sniffed separator, encoding
and decimal comma become keyword arguments: the call reads the file the way the profiler read it.
"""

from __future__ import annotations

from worldsmith.tools.files.delimited import CsvDialect
from worldsmith.tools.files.sqliteio import quote_ident

# Encodings pandas reads without being told (a UTF-8 byte-order mark is skipped by the utf-8 codec too).
_DEFAULT_ENCODINGS = {"utf-8", "utf8", "ascii", "utf-8-sig"}


def py_str(text: str) -> str:
    """`text` as a Python string literal, in double quotes unless the text itself holds a double quote."""
    literal = repr(text)
    if literal.startswith("'") and '"' not in text:  # no quote inside: repr escaped nothing quote-related
        literal = '"' + literal[1:-1] + '"'
    return literal


def _csv_options(kind: str, dialect: CsvDialect | None) -> str:
    opts: list[str] = []
    default_sep = "\t" if kind == "tsv" else ","
    sep = dialect.delimiter if dialect is not None else default_sep
    if sep != "," or kind == "tsv":
        opts.append(f"sep={py_str(sep)}")
    if dialect is not None:
        if dialect.encoding.lower() not in _DEFAULT_ENCODINGS:
            opts.append(f"encoding={py_str(dialect.encoding)}")
        if dialect.decimal != ".":
            opts.append(f"decimal={py_str(dialect.decimal)}")
        if dialect.thousands:
            opts.append(f"thousands={py_str(dialect.thousands)}")
    return "".join(", " + o for o in opts)


def load_call(name: str, fmt: str, table: str | None = None, dialect: CsvDialect | None = None) -> str:
    """`pd.read_…(…)` for the table `table` of the file `name` (as the sandbox shows it) in format `fmt`
    (a TableRef format: `csv`, `tsv`, `json`, `jsonl`, `xlsx`, `parquet`, `sqlite`, or a text one plus `.gz`).

    pandas infers `.gz` compression from the name, so only JSON documents split by key need `gzip.open`."""
    kind, gz = fmt.removesuffix(".gz"), fmt.endswith(".gz")
    f = py_str(name)
    if kind in ("csv", "tsv"):
        return f"pd.read_csv({f}{_csv_options(kind, dialect)})"
    if kind == "jsonl":
        return f"pd.read_json({f}, lines=True)"
    if kind == "json":
        if table is None:
            return f"pd.read_json({f})"
        opener = "gzip.open" if gz else "open"
        return f"pd.json_normalize(json.load({opener}({f}))[{py_str(table)}])"
    if kind == "parquet":
        return f"pd.read_parquet({f})"
    if kind == "xlsx":
        return f"pd.read_excel({f}, sheet_name={py_str(table or '')})" if table is not None else f"pd.read_excel({f})"
    if kind == "sqlite":
        sql = py_str(f"SELECT * FROM {quote_ident(table or '')}")
        return f"pd.read_sql({sql}, sqlite3.connect({f}))"
    raise ValueError(f"no load call for format {fmt!r} (file {name!r})")
