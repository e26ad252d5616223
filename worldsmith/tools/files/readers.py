"""One entry point to load any supported data file as a DataFrame: `read_table` and `list_tables`.

Formats: csv, tsv, xlsx (every sheet), json, jsonl, parquet, sqlite (every table) and gzip-wrapped text formats.
Bad input raises `FileReadError` with the reason, the location when known, and a hint.
"""

from __future__ import annotations

import re
import sqlite3
import urllib.parse
import zipfile
import zlib
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import BaseModel

from worldsmith.tools.files.errors import DEFAULT_LIMITS, FileLimits, FileReadError, ReadErrorReason
from worldsmith.tools.files.formats import (
    FileFormat,
    check_container,
    decode_sample,
    detect_encoding,
    detect_format,
    guess_legacy_encoding,
    open_binary,
    read_head,
    sniff_delimiter,
)
from worldsmith.tools.files.jsonio import json_frame, json_table_names, load_json_document, read_jsonl

SAMPLE_ATTR = "worldsmith_sampling"  # DataFrame.attrs key set when a read returned only part of a file


class TableRef(BaseModel):
    """One table inside a file: the file itself, a sheet, a SQLite table or a JSON key holding records."""

    path: str
    table: str | None = None
    kind: Literal["file", "sheet", "sqlite_table", "json_key"] = "file"
    format: str

    @property
    def label(self) -> str:
        name = Path(self.path).name
        return f"{name}[{self.table}]" if self.table is not None else name


def _check_path(path: Path) -> FileFormat:
    if not path.exists():
        raise FileReadError(path, ReadErrorReason.NOT_FOUND, "check the path", detail="no such file")
    if not path.is_file():
        raise FileReadError(path, ReadErrorReason.NOT_FOUND, "pass a file, not a directory", detail="not a file")
    fmt = detect_format(path)
    check_container(path, fmt)
    return fmt


def _format_name(fmt: FileFormat) -> str:
    return fmt.kind + (".gz" if fmt.gzip else "")


def list_tables(path: str | Path) -> list[TableRef]:
    """Every table a file holds (sheets, SQLite tables, JSON record lists; one ref for single-table files)."""
    path = Path(path)
    fmt = _check_path(path)
    name = _format_name(fmt)
    if fmt.kind == "xlsx":
        return [TableRef(path=str(path), table=s, kind="sheet", format=name) for s in _sheet_names(path)]
    if fmt.kind == "sqlite":
        tables = _sqlite_tables(path)
        return [TableRef(path=str(path), table=t, kind="sqlite_table", format=name) for t in tables]
    if fmt.kind == "json":
        keys = json_table_names(path, load_json_document(path, fmt, DEFAULT_LIMITS))
        return [TableRef(path=str(path), table=k, kind="json_key" if k else "file", format=name) for k in keys]
    return [TableRef(path=str(path), format=name)]


def read_table(
    path: str | Path,
    sheet: str | None = None,
    table: str | None = None,
    nrows: int | None = None,
    *,
    encoding: str | None = None,
    limits: FileLimits | None = None,
) -> pd.DataFrame:
    """Load one table as a DataFrame.

    `sheet` (xlsx) and `table` (sqlite, JSON key) name the table in multi-table files; either is accepted.
    `nrows` reads only the leading rows. A file over `limits.max_full_read_bytes` read without `nrows` returns
    its first `limits.sample_read_rows` rows, and `df.attrs["worldsmith_sampling"]` says so.
    `encoding` overrides detection for text formats.
    """
    path = Path(path)
    limits = limits or DEFAULT_LIMITS
    fmt = _check_path(path)
    name = sheet if sheet is not None else table
    note = None
    if nrows is None and fmt.kind != "json":
        approx = path.stat().st_size * (5 if fmt.gzip else 1)
        if approx > limits.max_full_read_bytes:
            nrows = limits.sample_read_rows
            note = (
                f"first {nrows:,} rows of a {path.stat().st_size / 2**20:,.0f} MiB file "
                f"(over max_full_read_bytes={limits.max_full_read_bytes:,})"
            )
    if name is not None and fmt.kind not in ("xlsx", "sqlite", "json"):
        raise FileReadError(
            path, ReadErrorReason.NO_SUCH_TABLE, "omit sheet=/table= for this format",
            detail=f"a {fmt.kind} file holds a single table, not {name!r}",
        )
    if fmt.kind in ("csv", "tsv"):
        df = _read_delimited(path, fmt, limits, nrows, encoding)
    elif fmt.kind == "jsonl":
        df = read_jsonl(path, fmt, limits, nrows, encoding)
    elif fmt.kind == "json":
        df = json_frame(path, load_json_document(path, fmt, limits, encoding), name)
        df = df.head(nrows) if nrows is not None else df
    elif fmt.kind == "parquet":
        df = _read_parquet(path, nrows)
    elif fmt.kind == "xlsx":
        df = _read_sheet(path, _pick(path, _sheet_names(path), name, "sheet"), nrows)
    else:
        df = _read_sqlite(path, _pick(path, _sqlite_tables(path), name, "table"), nrows)
    if note is not None and len(df) >= nrows:  # type: ignore[operator]
        df.attrs[SAMPLE_ATTR] = note
    return df


def _pick(path: Path, names: list[str], wanted: str | None, what: str) -> str:
    if wanted is None:
        if len(names) == 1:
            return names[0]
        raise FileReadError(
            path,
            ReadErrorReason.AMBIGUOUS,
            f"pass {what}= one of: " + ", ".join(names),
            detail=f"the file holds {len(names)} {what}s",
        )
    if wanted in names:
        return wanted
    folded = {n.casefold(): n for n in names}
    if wanted.casefold() in folded:
        return folded[wanted.casefold()]
    raise FileReadError(
        path, ReadErrorReason.NO_SUCH_TABLE, "available: " + ", ".join(names), detail=f"no {what} named {wanted!r}"
    )


# --- delimited text -------------------------------------------------------------------------------------------

_LINE_RE = re.compile(r"(line|row) (\d+)")  # pandas: "in line N" is 1-based, "starting at row N" is 0-based


def sniff_delimited(
    path: Path, fmt: FileFormat, limits: FileLimits | None = None, encoding: str | None = None
) -> tuple[str, str, bool]:
    """(encoding, delimiter, head_is_ascii) of a csv/tsv file, from its first bytes."""
    limits = limits or DEFAULT_LIMITS
    head = read_head(path, fmt, limits.encoding_sniff_bytes)
    if not head.strip(b" \t\r\n\x00\xef\xbb\xbf\xff\xfe"):
        raise FileReadError(path, ReadErrorReason.EMPTY, "the file holds only whitespace", detail="empty file")
    enc = encoding or detect_encoding(path, head)
    text = decode_sample(head[: limits.delimiter_sniff_bytes * 4], enc)
    if text.lstrip()[:15].lower().startswith(("<!doctype html", "<html")):
        raise FileReadError(
            path,
            ReadErrorReason.CORRUPT,
            "download the data itself, not the web page",
            detail="content is an HTML page",
        )
    delim = sniff_delimiter(text[: limits.delimiter_sniff_bytes], "\t" if fmt.kind == "tsv" else ",")
    return enc, delim, head.isascii()


def _read_delimited(
    path: Path, fmt: FileFormat, limits: FileLimits, nrows: int | None, encoding: str | None
) -> pd.DataFrame:
    enc, delim, ascii_head = sniff_delimited(path, fmt, limits, encoding)
    try:
        return _csv_call(path, fmt, delim, enc, nrows)
    except UnicodeDecodeError as exc:
        # A UTF-8 head with non-ASCII text proves UTF-8; a later failure means mixed encodings, not a wrong guess.
        if encoding is None and (ascii_head or enc != "utf-8"):
            retry = _redetect_encoding(path, fmt, enc)
            if retry is not None:
                try:
                    df = _csv_call(path, fmt, delim, retry, nrows)
                    df.attrs["worldsmith_encoding"] = retry
                    return df
                except UnicodeDecodeError:
                    pass
        raise FileReadError(
            path,
            ReadErrorReason.ENCODING,
            "re-save the file as UTF-8 or pass encoding=",
            detail=f"bytes are not valid {enc} ({exc.reason}); the file may mix encodings",
        ) from exc
    except pd.errors.EmptyDataError as exc:
        raise FileReadError(path, ReadErrorReason.EMPTY, "the file has no header or rows", detail=str(exc)) from exc
    except pd.errors.ParserError as exc:
        msg = str(exc).strip()
        m = _LINE_RE.search(msg)
        raise FileReadError(
            path,
            ReadErrorReason.CORRUPT,
            f"fix the malformed row (delimiter detected: {delim!r}, encoding: {enc})",
            detail=msg.replace("Error tokenizing data. ", ""),
            where=f"line {int(m.group(2)) + (m.group(1) == 'row')}" if m else None,
        ) from exc
    except (OSError, EOFError, zlib.error, ValueError) as exc:
        raise FileReadError(path, ReadErrorReason.CORRUPT, "re-export the file", detail=str(exc)) from exc


def _csv_call(path: Path, fmt: FileFormat, delim: str, enc: str, nrows: int | None) -> pd.DataFrame:
    return pd.read_csv(
        path,
        sep=delim,
        encoding=enc,
        compression="gzip" if fmt.gzip else None,
        nrows=nrows,
        low_memory=False,
    )


def _redetect_encoding(path: Path, fmt: FileFormat, failed: str) -> str | None:
    """Second opinion from charset-normalizer over (up to 64 MiB of) the whole file after a decode failure."""
    with open_binary(path, fmt) as fh:
        guess = guess_legacy_encoding(fh.read(64 * 2**20))
    if guess is None or guess.replace("_", "-") == failed.replace("_", "-"):
        return None
    return guess


# --- binary formats -------------------------------------------------------------------------------------------


def _read_parquet(path: Path, nrows: int | None) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
        if nrows is None:
            return pf.read().to_pandas()
        batches, got = [], 0
        for batch in pf.iter_batches(batch_size=min(nrows, 65_536)):
            batches.append(batch)
            got += batch.num_rows
            if got >= nrows:
                break
        tbl = pa.Table.from_batches(batches, schema=pf.schema_arrow) if batches else pf.schema_arrow.empty_table()
        return tbl.slice(0, nrows).to_pandas()
    except (pa.ArrowException, OSError) as exc:
        raise FileReadError(path, ReadErrorReason.CORRUPT, "re-export the Parquet file", detail=str(exc)) from exc


def _sheet_names(path: Path) -> list[str]:
    from openpyxl import load_workbook
    from openpyxl.utils.exceptions import InvalidFileException

    try:
        wb = load_workbook(path, read_only=True, data_only=True)
    except (zipfile.BadZipFile, InvalidFileException, KeyError, OSError, ValueError) as exc:
        raise FileReadError(
            path, ReadErrorReason.CORRUPT, "open and re-save the workbook", detail=f"not a readable xlsx: {exc}"
        ) from exc
    try:
        return list(wb.sheetnames)
    finally:
        wb.close()


def _read_sheet(path: Path, sheet: str, nrows: int | None) -> pd.DataFrame:
    try:
        df = pd.read_excel(path, sheet_name=sheet, engine="openpyxl", nrows=nrows)
    except (zipfile.BadZipFile, KeyError, OSError, ValueError) as exc:
        raise FileReadError(path, ReadErrorReason.CORRUPT, "open and re-save the workbook", detail=str(exc)) from exc
    if df.shape[1] == 0:
        raise FileReadError(
            path, ReadErrorReason.EMPTY_SHEET, "the sheet has no cells", detail="empty sheet", where=f"sheet {sheet!r}"
        )
    return df


def sqlite_connect_ro(path: Path) -> sqlite3.Connection:
    """Open a SQLite file read-only (URI mode=ro) with query_only on."""
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    conn.execute("PRAGMA query_only=ON")
    return conn


def _sqlite_tables(path: Path) -> list[str]:
    try:
        conn = sqlite_connect_ro(path)
        try:
            rows = conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise FileReadError(path, ReadErrorReason.CORRUPT, "check the database file", detail=str(exc)) from exc
    if not rows:
        raise FileReadError(path, ReadErrorReason.EMPTY, "the database holds no tables", detail="no tables")
    return [r[0] for r in rows]


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _read_sqlite(path: Path, table: str, nrows: int | None) -> pd.DataFrame:
    sql = f"SELECT * FROM {quote_ident(table)}" + (f" LIMIT {int(nrows)}" if nrows is not None else "")
    try:
        conn = sqlite_connect_ro(path)
        try:
            return pd.read_sql_query(sql, conn)
        finally:
            conn.close()
    except (sqlite3.DatabaseError, pd.errors.DatabaseError) as exc:
        raise FileReadError(
            path, ReadErrorReason.CORRUPT, "check the database file", detail=str(exc), where=f"table {table!r}"
        ) from exc


def count_rows(ref: TableRef) -> tuple[int, bool]:
    """Number of data rows of a table without loading it: (count, exact). Line counts are marked inexact."""
    path = Path(ref.path)
    fmt = detect_format(path)
    try:
        return _count_rows(path, fmt, ref.table)
    except (OSError, EOFError, zlib.error, sqlite3.Error, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise FileReadError(path, ReadErrorReason.CORRUPT, "re-export the file", detail=f"counting rows: {exc}") from exc


def _count_rows(path: Path, fmt: FileFormat, table: str | None) -> tuple[int, bool]:
    if fmt.kind == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows, True
    if fmt.kind == "sqlite":
        conn = sqlite_connect_ro(path)
        try:
            return conn.execute(f"SELECT COUNT(*) FROM {quote_ident(table or '')}").fetchone()[0], True
        finally:
            conn.close()
    if fmt.kind == "xlsx":
        from openpyxl import load_workbook

        wb = load_workbook(path, read_only=True)
        try:
            return max((wb[table].max_row or 1) - 1, 0), False
        finally:
            wb.close()
    lines, last = 0, b"\n"
    with open_binary(path, fmt) as fh:
        while chunk := fh.read(8 * 2**20):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    lines += last != b"\n"
    return max(lines - (1 if fmt.kind in ("csv", "tsv") else 0), 0), False
