"""Read-only SQL over data files: SQLite natively (authorizer-guarded) or DuckDB over csv/parquet/xlsx/json/sqlite.

`run_sql` refuses anything but a single SELECT (`SqlRefused`), stops at `timeout_s` (`SqlTimeout`) and returns at
most `max_rows` rows with a `truncated` flag. The SQLite engine's real defence is the authorizer callback plus a
`mode=ro` connection with `query_only`; the DuckDB engine checks the parsed statement type and disables external
file access after registering the sources.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import re
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from worldsmith.tools.files.errors import DEFAULT_LIMITS, FileLimits, FileReadError
from worldsmith.tools.files.formats import FileFormat, detect_format
from worldsmith.tools.files.readers import list_tables, quote_ident, read_table, sniff_delimited, sqlite_connect_ro
from worldsmith.tools.files.sqliteio import is_corrupt_error, sqlite_error


class SqlError(Exception):
    """The query failed (syntax, unknown table/column, unreadable source)."""


class SqlRefused(SqlError):
    """The query is not a read-only single SELECT."""


class SqlTimeout(SqlError):
    """The query ran past its time limit and was interrupted."""


class SqlResult(BaseModel):
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool
    duration_s: float
    engine: Literal["sqlite", "duckdb"]


class SqliteColumn(BaseModel):
    name: str
    type: str
    notnull: bool
    pk: bool
    default: str | None = None


class SqliteForeignKey(BaseModel):
    columns: list[str]
    ref_table: str
    ref_columns: list[str]  # empty when the FK references the parent's primary key implicitly


class SqliteTable(BaseModel):
    name: str
    columns: list[SqliteColumn]
    foreign_keys: list[SqliteForeignKey]
    row_count: int


class SqliteSchema(BaseModel):
    path: str
    tables: list[SqliteTable]
    views: list[str]


def describe_sqlite(path: str | Path) -> SqliteSchema:
    """Tables (columns, types, primary keys, declared foreign keys, row counts) and views of a SQLite file."""
    path = Path(path)
    try:
        conn = sqlite_connect_ro(path, time.monotonic() + DEFAULT_LIMITS.max_read_seconds)
    except sqlite3.Error as exc:
        raise SqlError(str(sqlite_error(path, exc, DEFAULT_LIMITS))) from exc
    try:
        master = conn.execute(
            "SELECT type, name FROM sqlite_master WHERE type IN ('table','view') AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name"
        ).fetchall()
        tables = []
        for kind, name in master:
            if kind != "table":
                continue
            q = quote_ident(name)
            cols = [
                SqliteColumn(name=r[1], type=r[2] or "", notnull=bool(r[3]), default=r[4], pk=bool(r[5]))
                for r in conn.execute(f"PRAGMA table_info({q})")
            ]
            fks: dict[int, SqliteForeignKey] = {}
            for r in conn.execute(f"PRAGMA foreign_key_list({q})"):  # id, seq, table, from, to, ...
                fk = fks.setdefault(r[0], SqliteForeignKey(columns=[], ref_table=r[2], ref_columns=[]))
                fk.columns.append(r[3])
                if r[4] is not None:
                    fk.ref_columns.append(r[4])
            count = conn.execute(f"SELECT COUNT(*) FROM {q}").fetchone()[0]
            tables.append(SqliteTable(name=name, columns=cols, foreign_keys=list(fks.values()), row_count=count))
        return SqliteSchema(path=str(path), tables=tables, views=[n for k, n in master if k == "view"])
    except sqlite3.DatabaseError as exc:
        raise SqlError(str(sqlite_error(path, exc, DEFAULT_LIMITS, where="schema"))) from exc
    finally:
        conn.close()


def _cell(v: Any) -> Any:
    """JSON-safe value for a result row."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if isinstance(v, (bytes, bytearray, memoryview)):
        b = bytes(v)
        return "0x" + b[:32].hex() + ("…" if len(b) > 32 else "")
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (_dt.datetime, _dt.date, _dt.time)):
        return v.isoformat()
    if isinstance(v, (list, tuple)):
        return [_cell(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _cell(x) for k, x in v.items()}
    if hasattr(v, "item"):  # numpy scalars
        return _cell(v.item())
    if isinstance(v, (uuid.UUID, _dt.timedelta)):
        return str(v)
    return str(v)


# --- SQLite engine --------------------------------------------------------------------------------------------

_READ_PRAGMAS = {
    "table_info", "table_xinfo", "index_list", "index_info", "index_xinfo", "foreign_key_list", "table_list"
}
_ALLOWED_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
_AUTH_ACTIONS = (
    "CREATE_INDEX CREATE_TABLE CREATE_TEMP_INDEX CREATE_TEMP_TABLE CREATE_TEMP_TRIGGER CREATE_TEMP_VIEW CREATE_TRIGGER "
    "CREATE_VIEW DELETE DROP_INDEX DROP_TABLE DROP_TEMP_INDEX DROP_TEMP_TABLE DROP_TEMP_TRIGGER DROP_TEMP_VIEW "
    "DROP_TRIGGER DROP_VIEW INSERT PRAGMA READ SELECT TRANSACTION UPDATE ATTACH DETACH ALTER_TABLE REINDEX ANALYZE "
    "CREATE_VTABLE DROP_VTABLE FUNCTION SAVEPOINT RECURSIVE"
).split()
# Authorizer action codes share integer values with unrelated sqlite3 constants, so name them explicitly.
_ACTION_NAMES = {getattr(sqlite3, "SQLITE_" + n): n for n in _AUTH_ACTIONS if hasattr(sqlite3, "SQLITE_" + n)}


def _run_sqlite(query: str, path: Path, max_rows: int, timeout_s: float) -> tuple[list[str], list[list[Any]], bool]:
    try:
        conn = sqlite_connect_ro(path)
    except sqlite3.Error as exc:
        raise SqlError(str(sqlite_error(path, exc, DEFAULT_LIMITS))) from exc
    denied: list[str] = []

    def authorizer(action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
        if action in _ALLOWED_ACTIONS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _READ_PRAGMAS:
            return sqlite3.SQLITE_OK
        what = _ACTION_NAMES.get(action, str(action))
        denied.append(" ".join(x for x in (what, arg1, arg2) if x))
        return sqlite3.SQLITE_DENY

    deadline = time.monotonic() + timeout_s
    conn.set_authorizer(authorizer)
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        cur = conn.execute(query)
        columns = [d[0] for d in cur.description or []]
        fetched = cur.fetchmany(max_rows + 1)
    except (sqlite3.Warning, sqlite3.ProgrammingError) as exc:
        if "one statement" in str(exc):
            raise SqlRefused("refused: send exactly one SQL statement") from exc
        raise SqlError(f"SQL error: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        if denied:
            blocked = ", ".join(dict.fromkeys(denied))
            raise SqlRefused(f"refused: only read-only SELECT queries are allowed (blocked: {blocked})") from exc
        if "interrupted" in str(exc):
            raise SqlTimeout(_timeout_message(timeout_s)) from exc
        if "readonly" in str(exc) or "read-only" in str(exc):
            raise SqlRefused(f"refused: the database is read-only ({exc})") from exc
        if is_corrupt_error(exc):
            raise SqlError(str(sqlite_error(path, exc, DEFAULT_LIMITS))) from exc
        raise SqlError(f"SQL error: {exc}{_sqlite_table_list(conn)}") from exc
    finally:
        conn.close()
    return columns, [[_cell(v) for v in row] for row in fetched[:max_rows]], len(fetched) > max_rows


def _sqlite_table_list(conn: sqlite3.Connection) -> str:
    """" (tables: a, b)" to help fix a query, or "" when even the schema cannot be read."""
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    except sqlite3.Error:
        return ""
    return f" (tables: {', '.join(names)})"


def _timeout_message(timeout_s: float) -> str:
    return f"query interrupted after {timeout_s:g} s time limit (simplify the query, or pass a larger timeout_s)"


# --- DuckDB engine --------------------------------------------------------------------------------------------

_FORBIDDEN = re.compile(
    r"\b(insert|update|delete|merge|drop|create|alter|attach|detach|copy|install|load|pragma|set|reset|call|export|"
    r"import|vacuum|checkpoint|begin|commit|rollback|grant|truncate|use|explain)\b",
    re.I,
)


def _strip_literals(query: str) -> str:
    """Remove string literals, quoted identifiers and comments before a keyword check."""
    query = re.sub(r"--[^\n]*|/\*.*?\*/", " ", query, flags=re.S)
    return re.sub(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"", " ", query)


def _check_duckdb_statement(con: Any, query: str) -> None:
    import duckdb

    try:
        statements = con.extract_statements(query)
    except AttributeError:
        statements = None
    except duckdb.Error as exc:
        raise SqlError(f"SQL error: {exc}") from exc
    if statements is None:  # old duckdb: conservative keyword check
        bare = _strip_literals(query).strip().rstrip(";")
        if ";" in bare:
            raise SqlRefused("refused: send exactly one SQL statement")
        if not re.match(r"^\s*(select|with|from|values|\()", bare, re.I) or _FORBIDDEN.search(bare):
            raise SqlRefused("refused: only read-only SELECT queries are allowed")
        return
    if len(statements) != 1:
        raise SqlRefused(f"refused: send exactly one SQL statement (got {len(statements)})")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise SqlRefused(f"refused: only read-only SELECT queries are allowed (got {kind.name})")


def _ident(name: str) -> str:
    name = re.sub(r"\W+", "_", name).strip("_") or "t"
    return "t_" + name if name[0].isdigit() else name


def sql_tables(sources: list[Path]) -> dict[str, tuple[Path, str | None]]:
    """Names under which `run_sql` (DuckDB engine) exposes each source table: name → (file, table in file)."""
    out: dict[str, tuple[Path, str | None]] = {}
    for src in map(Path, sources):
        base = _ident(src.name.split(".")[0])
        refs = list_tables(src)
        for ref in refs:
            # SQLite tables keep their names; sheets/JSON keys do when a file holds several; else the file stem.
            named = ref.table is not None and (ref.kind == "sqlite_table" or len(refs) > 1)
            name = _ident(ref.table) if named else base  # type: ignore[arg-type]
            final, k = name, 2
            while final.lower() in {n.lower() for n in out}:
                final, k = f"{name}_{k}", k + 1
            out[final] = (src, ref.table)
    return out


_NO_SAMPLING = FileLimits(max_full_read_bytes=2**62)
_LAZY_CSV_BYTES = DEFAULT_LIMITS.max_full_read_bytes  # plain csv/tsv over this are scanned lazily by pyarrow


def _csv_dataset(path: Path, fmt: FileFormat) -> Any:
    """A lazily scanned pyarrow dataset for a delimited file too big to load (types inferred from its first block)."""
    import pyarrow.csv as pcsv
    import pyarrow.dataset as pads

    encoding, delimiter, _ = sniff_delimited(path, fmt)
    csv_format = pads.CsvFileFormat(
        parse_options=pcsv.ParseOptions(delimiter=delimiter),
        read_options=pcsv.ReadOptions(encoding=encoding.removesuffix("-sig").replace("utf-8", "utf8")),
    )
    return pads.dataset(path, format=csv_format)


def _duckdb_connect(sources: list[Path]) -> Any:
    """In-memory DuckDB with every source registered, then external access disabled and the config locked."""
    import duckdb
    import pyarrow.dataset as pads

    con = duckdb.connect(":memory:")
    try:
        for name, (path, table) in sql_tables(sources).items():
            fmt = detect_format(path)
            if fmt.kind == "parquet":
                con.register(name, pads.dataset(path, format="parquet"))  # lazy scan through pyarrow
            elif fmt.kind in ("csv", "tsv") and not fmt.gzip and path.stat().st_size > _LAZY_CSV_BYTES:
                con.register(name, _csv_dataset(path, fmt))
            else:  # read in full through the guarded readers (a gzip bomb stops at its byte budget); never a sample
                con.register(name, read_table(path, table=table, limits=_NO_SAMPLING))
        # Registered objects stay queryable; read_csv('/etc/passwd'), COPY, ATTACH, INSTALL/LOAD do not.
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except duckdb.Error as exc:
        con.close()
        raise SqlError(f"cannot prepare a locked-down DuckDB connection: {exc}") from exc
    except FileReadError:
        con.close()
        raise
    return con


def _run_duckdb(
    query: str, sources: list[Path], max_rows: int, timeout_s: float
) -> tuple[list[str], list[list[Any]], bool]:
    import duckdb

    try:
        con = _duckdb_connect(sources)
    except FileReadError as exc:
        raise SqlError(f"cannot load a source: {exc}") from exc
    timer = threading.Timer(timeout_s, con.interrupt)
    try:
        _check_duckdb_statement(con, query)
        timer.start()
        con.execute(query)
        columns = [d[0] for d in con.description or []]
        fetched = con.fetchmany(max_rows + 1)
    except duckdb.InterruptException as exc:
        raise SqlTimeout(_timeout_message(timeout_s)) from exc
    except duckdb.Error as exc:
        if "INTERRUPT" in str(exc).upper():
            raise SqlTimeout(_timeout_message(timeout_s)) from exc
        names = ", ".join(sorted(sql_tables(sources)))
        raise SqlError(f"SQL error: {exc} (tables: {names})") from exc
    finally:
        timer.cancel()
        con.close()
    return columns, [[_cell(v) for v in row] for row in fetched[:max_rows]], len(fetched) > max_rows


def run_sql(
    query: str,
    sources: list[Path],
    max_rows: int = 200,
    timeout_s: float = 10,
    *,
    engine: Literal["auto", "sqlite", "duckdb"] = "auto",
) -> SqlResult:
    """Run one read-only SELECT over `sources` and return at most `max_rows` rows.

    engine="auto" uses SQLite directly when the only source is a SQLite file, DuckDB otherwise (tables named as
    `sql_tables(sources)` reports: file stem, or the table/sheet name inside multi-table files).
    Raises SqlRefused (not a single read-only SELECT), SqlTimeout, or SqlError.
    """
    sources = [Path(s) for s in sources]
    if not sources:
        raise SqlError("no sources given")
    for s in sources:
        if not s.is_file():
            raise SqlError(f"source not found: {s}")
    try:
        only_sqlite = len(sources) == 1 and detect_format(sources[0]).kind == "sqlite"
    except FileReadError as exc:
        raise SqlError(f"cannot query {sources[0]}: {exc}") from exc
    chosen = ("sqlite" if only_sqlite else "duckdb") if engine == "auto" else engine
    if chosen == "sqlite" and not only_sqlite:
        raise SqlError("the sqlite engine takes exactly one SQLite file; use engine='duckdb' for other sources")
    start = time.perf_counter()
    if chosen == "sqlite":
        columns, rows, truncated = _run_sqlite(query, sources[0], max_rows, timeout_s)
    else:
        columns, rows, truncated = _run_duckdb(query, sources, max_rows, timeout_s)
    return SqlResult(
        columns=columns, rows=rows, truncated=truncated, duration_s=time.perf_counter() - start, engine=chosen
    )
