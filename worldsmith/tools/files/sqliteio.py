"""SQLite files: read-only connections with a time budget, and SQLite errors translated into FileReadError."""

from __future__ import annotations

import sqlite3
import time
import urllib.parse
from pathlib import Path

import pandas as pd

from worldsmith.tools.files.errors import FileLimits, FileReadError, ReadErrorReason, over_limit

# Messages SQLite gives for a damaged file (what `PRAGMA quick_check` would report as not "ok").
_CORRUPT_MARKERS = ("not a database", "malformed", "disk image", "encrypted", "file is truncated", "disk i/o error")


def sqlite_connect_ro(path: Path, deadline: float | None = None) -> sqlite3.Connection:
    """Open a SQLite file read-only (URI mode=ro) with query_only on.

    With `deadline` (a `time.monotonic()` value) a progress handler aborts any statement still running after it
    (a recursive view, a huge cross join); the statement then fails with "interrupted".
    """
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    try:
        conn.execute("PRAGMA query_only=ON")
    except sqlite3.Error:
        conn.close()
        raise
    if deadline is not None:
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    return conn


def is_corrupt_error(exc: BaseException) -> bool:
    """Whether a SQLite error means the file itself is damaged or not a database."""
    text = str(exc).lower()
    return any(marker in text for marker in _CORRUPT_MARKERS)


def sqlite_error(path: Path, exc: BaseException, limits: FileLimits, where: str | None = None) -> FileReadError:
    """A clear FileReadError for a SQLite failure: damaged file, time budget, or other."""
    if "interrupted" in str(exc).lower():
        return over_limit(
            path, "max_read_seconds", limits, "the SQLite read was interrupted",
            "a view or table too slow to read", where=where, reason=ReadErrorReason.TIMEOUT,
        )
    if is_corrupt_error(exc):
        return FileReadError(
            path,
            ReadErrorReason.CORRUPT,
            f"the database file is damaged or not SQLite; restore it, or try `sqlite3 {path.name} .recover`",
            detail=f"sqlite: {exc}",
            where=where,
        )
    return FileReadError(path, ReadErrorReason.CORRUPT, "check the database file", detail=str(exc), where=where)


def sqlite_tables(path: Path, limits: FileLimits, deadline: float | None = None) -> list[str]:
    """Names of the ordinary tables of a SQLite file (views are not read: they may not terminate)."""
    deadline = deadline if deadline is not None else time.monotonic() + limits.max_read_seconds
    try:
        conn = sqlite_connect_ro(path, deadline)
        try:
            rows = conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise sqlite_error(path, exc, limits) from exc
    if not rows:
        raise FileReadError(path, ReadErrorReason.EMPTY, "the database holds no tables", detail="no tables")
    return [r[0] for r in rows]


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def read_sqlite(path: Path, table: str, nrows: int | None, limits: FileLimits, deadline: float) -> pd.DataFrame:
    sql = f"SELECT * FROM {quote_ident(table)}" + (f" LIMIT {int(nrows)}" if nrows is not None else "")
    try:
        conn = sqlite_connect_ro(path, deadline)
        try:
            return pd.read_sql_query(sql, conn)
        finally:
            conn.close()
    except (sqlite3.Error, pd.errors.DatabaseError) as exc:
        raise sqlite_error(path, exc, limits, where=f"table {table!r}") from exc


def sqlite_count(path: Path, table: str, limits: FileLimits) -> int:
    try:
        conn = sqlite_connect_ro(path, time.monotonic() + limits.max_read_seconds)
        try:
            return int(conn.execute(f"SELECT COUNT(*) FROM {quote_ident(table)}").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise sqlite_error(path, exc, limits, where=f"table {table!r}") from exc
