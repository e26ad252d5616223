"""One entry point to load any supported data file as a DataFrame: `read_table` and `list_tables`.

Formats: csv, tsv, xlsx (every sheet), json, jsonl, parquet, sqlite (every table) and gzip-wrapped text formats.
Bad input raises `FileReadError` with the reason, the location when known, and a hint.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import BaseModel

from worldsmith.tools.files.delimited import read_delimited, sniff_delimited
from worldsmith.tools.files.errors import DEFAULT_LIMITS, FileLimits, FileReadError, ReadErrorReason
from worldsmith.tools.files.formats import FileFormat, check_container, detect_format
from worldsmith.tools.files.guard import OverFullRead, check_xlsx_zip, open_guarded, read_deadline
from worldsmith.tools.files.jsonio import json_frame, json_table_names, load_json_document, read_jsonl
from worldsmith.tools.files.sqliteio import quote_ident, read_sqlite, sqlite_connect_ro, sqlite_count, sqlite_tables

__all__ = [
    "SAMPLE_ATTR",
    "TableRef",
    "count_rows",
    "list_tables",
    "quote_ident",
    "read_table",
    "sniff_delimited",
    "sqlite_connect_ro",
]

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


def list_tables(path: str | Path, *, limits: FileLimits | None = None) -> list[TableRef]:
    """Every table a file holds (sheets, SQLite tables, JSON record lists; one ref for single-table files)."""
    path = Path(path)
    limits = limits or DEFAULT_LIMITS
    fmt = _check_path(path)
    name = _format_name(fmt)
    if fmt.kind == "xlsx":
        return [TableRef(path=str(path), table=s, kind="sheet", format=name) for s in _sheet_names(path, limits)]
    if fmt.kind == "sqlite":
        tables = sqlite_tables(path, limits)
        return [TableRef(path=str(path), table=t, kind="sqlite_table", format=name) for t in tables]
    if fmt.kind == "json":
        keys = json_table_names(path, load_json_document(path, fmt, limits))
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
    deadline = read_deadline(limits)
    fmt = _check_path(path)
    name = sheet if sheet is not None else table
    if name is not None and fmt.kind not in ("xlsx", "sqlite", "json"):
        raise FileReadError(
            path, ReadErrorReason.NO_SUCH_TABLE, "omit sheet=/table= for this format",
            detail=f"a {fmt.kind} file holds a single table, not {name!r}",
        )
    note = None
    full_read_cap = None
    if nrows is None and fmt.kind != "json":
        if fmt.gzip:  # the decompressed size is known only while reading: stop at the cap, then sample
            full_read_cap = limits.max_full_read_bytes
        elif path.stat().st_size > limits.max_full_read_bytes:
            nrows = limits.sample_read_rows
            note = (
                f"first {nrows:,} rows of a {path.stat().st_size / 2**20:,.0f} MiB file "
                f"(over max_full_read_bytes={limits.max_full_read_bytes:,})"
            )
    try:
        df = _read_any(path, fmt, name, nrows, encoding, limits, deadline, full_read_cap)
    except OverFullRead:
        nrows = limits.sample_read_rows
        note = (
            f"first {nrows:,} rows of a compressed file that decompresses past "
            f"max_full_read_bytes={limits.max_full_read_bytes:,}"
        )
        df = _read_any(path, fmt, name, nrows, encoding, limits, deadline, None)
    if note is not None and len(df) >= nrows:  # type: ignore[operator]
        df.attrs[SAMPLE_ATTR] = note
    return df


def _read_any(
    path: Path,
    fmt: FileFormat,
    name: str | None,
    nrows: int | None,
    encoding: str | None,
    limits: FileLimits,
    deadline: float,
    full_read_cap: int | None,
) -> pd.DataFrame:
    if fmt.kind in ("csv", "tsv"):
        return read_delimited(path, fmt, limits, nrows, encoding, deadline=deadline, full_read_cap=full_read_cap)
    if fmt.kind == "jsonl":
        return read_jsonl(path, fmt, limits, nrows, encoding, deadline=deadline, full_read_cap=full_read_cap)
    if fmt.kind == "json":
        df = json_frame(path, load_json_document(path, fmt, limits, encoding, deadline=deadline), name)
        return df.head(nrows) if nrows is not None else df
    if fmt.kind == "parquet":
        return _read_parquet(path, nrows)
    if fmt.kind == "xlsx":
        return _read_sheet(path, _pick(path, _sheet_names(path, limits), name, "sheet"), nrows)
    return read_sqlite(path, _pick(path, sqlite_tables(path, limits, deadline), name, "table"), nrows, limits, deadline)


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


def _sheet_names(path: Path, limits: FileLimits) -> list[str]:
    from openpyxl import load_workbook
    from openpyxl.utils.exceptions import InvalidFileException

    check_xlsx_zip(path, limits)
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


def count_rows(ref: TableRef, *, limits: FileLimits | None = None) -> tuple[int, bool]:
    """Number of data rows of a table without loading it: (count, exact). Line counts are marked inexact."""
    path = Path(ref.path)
    limits = limits or DEFAULT_LIMITS
    fmt = detect_format(path)
    try:
        return _count_rows(path, fmt, ref.table, limits)
    except (OSError, EOFError, zlib.error, zipfile.BadZipFile, KeyError, ValueError) as exc:
        detail = f"counting rows: {exc}"
        raise FileReadError(path, ReadErrorReason.CORRUPT, "re-export the file", detail=detail) from exc


def _count_rows(path: Path, fmt: FileFormat, table: str | None, limits: FileLimits) -> tuple[int, bool]:
    if fmt.kind == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows, True
    if fmt.kind == "sqlite":
        return sqlite_count(path, table or "", limits), True
    if fmt.kind == "xlsx":
        from openpyxl import load_workbook

        check_xlsx_zip(path, limits)
        wb = load_workbook(path, read_only=True)
        try:
            return max((wb[table].max_row or 1) - 1, 0), False
        finally:
            wb.close()
    lines, last = 0, b"\n"
    with open_guarded(path, fmt, limits) as fh:  # a compression bomb or one endless line stops here
        while chunk := fh.read(2**20):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    lines += last != b"\n"
    return max(lines - (1 if fmt.kind in ("csv", "tsv") else 0), 0), False
