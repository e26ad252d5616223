"""Profile data files into compact pydantic summaries: `profile_table` and `profile_workspace`.

Large tables are profiled from a sample (random rows of a loaded table, or the leading rows of a file too big to
load) and the profile says so. The rendered `WorkspaceProfile.to_prompt()` is what LLM agents read.
"""

from __future__ import annotations

import re
import sqlite3
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from worldsmith.core.inputs import input_aliases
from worldsmith.tools.files.columns import clip, profile_column
from worldsmith.tools.files.delimited import DECIMAL_ATTR, ENCODING_ATTR, sniff_csv
from worldsmith.tools.files.errors import DEFAULT_LIMITS, FileLimits, FileReadError
from worldsmith.tools.files.formats import DOCUMENT_SUFFIXES, UNSUPPORTED_HINTS, detect_format
from worldsmith.tools.files.joins import JoinColumn, candidate_keys, find_joins, join_columns
from worldsmith.tools.files.loadcall import load_call
from worldsmith.tools.files.models import (
    CandidateJoin,
    ColumnProfile,
    ColumnRef,
    DocumentNote,
    FileFailure,
    OtherFile,
    TableProfile,
    ValueCount,
    WorkspaceProfile,
)
from worldsmith.tools.files.readers import SAMPLE_ATTR, TableRef, count_rows, list_tables, read_table

__all__ = [
    "ColumnProfile",
    "TableProfile",
    "WorkspaceProfile",
    "CandidateJoin",
    "ValueCount",
    "profile_table",
    "profile_workspace",
]

_SKIP_DIRS = {"__pycache__", "node_modules", ".git", ".venv"}
# Library errors that mean "this input is bad" and were not already turned into a FileReadError by the readers.
_BAD_INPUT = (ValueError, OSError, UnicodeError, pd.errors.ParserError, sqlite3.Error, zipfile.BadZipFile, KeyError)


def profile_table(
    ref: TableRef,
    *,
    label: str | None = None,
    alias: str | None = None,
    max_rows_exact: int = 200_000,
    max_rows_read: int = 2_000_000,
    sample_rows: int = 5,
    limits: FileLimits | None = None,
) -> tuple[TableProfile, pd.DataFrame]:
    """Profile one table. Returns the profile and the frame the statistics were computed on.

    Tables over `max_rows_read` rows (cheap count) or over `limits.max_full_read_bytes` bytes are read as their
    first `max_rows_exact` rows; loaded tables over `max_rows_exact` rows get statistics from a seeded random
    sample of that many rows. Either way `sampled` is set and `sampling_note` says what was done.
    `label` is the file's name as code sees it (the load call uses it), `alias` a second name the sandbox
    mounts it under.
    """
    limits = (limits or DEFAULT_LIMITS).model_copy(update={"sample_read_rows": max_rows_exact})
    path = Path(ref.path)
    fmt = detect_format(path)
    nrows: int | None = None
    counted: tuple[int, bool] | None = None
    if fmt.kind != "json":
        counted = count_rows(ref, limits=limits)
        if counted[0] > max_rows_read:
            nrows = max_rows_exact
    df = read_table(path, table=ref.table, nrows=nrows, limits=limits)
    note = df.attrs.get(SAMPLE_ATTR)
    if nrows is not None and len(df) >= nrows:
        total = counted[0] if counted is not None else len(df)
        note = f"first {len(df):,} rows read (table has ~{total:,} rows, over max_rows_read={max_rows_read:,})"
    if note is not None:
        n_rows, exact = counted if counted is not None else (len(df), False)
        stats = df
    else:
        n_rows, exact = len(df), True
        stats = df
        if len(df) > max_rows_exact:
            rows = np.sort(np.random.default_rng(0).choice(len(df), size=max_rows_exact, replace=False))
            stats = df.take(rows)
            note = f"statistics from a random sample of {max_rows_exact:,} of {len(df):,} rows; n_rows is exact"
    columns = [profile_column(name, stats[name]) for name in stats.columns]
    _note_renamed_duplicates(columns)
    _note_number_format(columns, df.attrs.get(DECIMAL_ATTR))
    keys = candidate_keys(stats, columns)
    if note is not None and keys:
        note += "; keys checked on the sample only"
    head = df.head(sample_rows)
    samples = [{str(c): clip(v) for c, v in zip(head.columns, row)} for row in head.itertuples(index=False)]
    dialect = None
    if fmt.kind in ("csv", "tsv"):
        dialect = sniff_csv(path, fmt, limits)
        if df.attrs.get(ENCODING_ATTR):  # the read fell back to another encoding than the sniffed one
            dialect = replace(dialect, encoding=df.attrs[ENCODING_ATTR])
    profile = TableProfile(
        load=load_call(label or ref.path, ref.format, ref.table, dialect),
        alias=alias,
        alias_load=load_call(alias, ref.format, ref.table, dialect) if alias else None,
        file=label or ref.path,
        table=ref.table,
        format=ref.format,
        n_rows=int(n_rows),
        n_rows_exact=exact,
        n_cols=df.shape[1],
        columns=columns,
        sample_rows=samples,
        candidate_keys=keys,
        sampled=note is not None,
        sampling_note=note,
    )
    return profile, stats


def _note_renamed_duplicates(columns: list[ColumnProfile]) -> None:
    """pandas renames a repeated header `a` to `a.1`; say so, since the file itself says `a` twice."""
    names = {c.name for c in columns}
    for c in columns:
        m = re.fullmatch(r"(.+)\.(\d+)", c.name)
        if m and m.group(1) in names:
            c.notes.append(f"duplicate header {m.group(1)!r} in the file (renamed on read)")


def _note_number_format(columns: list[ColumnProfile], note: str | None) -> None:
    """Say on each numeric column when its numbers were read with a decimal comma (the file says 3,5, not 3.5)."""
    if note is None:
        return
    for c in columns:
        if c.dtype.lower().startswith("float"):
            c.notes.append(note)


def _walk(paths: list[Path], max_files: int, as_mounted: bool = False) -> tuple[list[tuple[Path, str]], Path | None]:
    """Expand folders (sorted, hidden and cache folders skipped) into (file, label relative to its root).

    as_mounted: label every file as the sandbox shows it (inputs by base name, folders keep their name)."""
    out: list[tuple[Path, str]] = []
    root = paths[0] if len(paths) == 1 and paths[0].is_dir() and not as_mounted else None
    for p in paths:
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                rel = f.relative_to(p)
                if any(part.startswith(".") or part in _SKIP_DIRS for part in rel.parts) or not f.is_file():
                    continue
                out.append((f, rel.as_posix() if root is not None else (Path(p.name) / rel).as_posix()))
        else:
            out.append((p, p.name))
    return out[:max_files], root


def _alias(label: str, aliases: dict[str, str]) -> str | None:
    """The label under the input's alias (a folder input's alias keeps the path inside it)."""
    top, sep, rest = label.partition("/")
    return aliases[top] + sep + rest if top in aliases else None


def _document(path: Path, label: str, n_lines: int = 8) -> DocumentNote:
    with open(path, "rb") as fh:
        head = fh.read(8192)
    text = head.decode("utf-8", errors="replace")
    lines = [clip(ln.rstrip(), 200) for ln in text.splitlines() if ln.strip()][:n_lines]
    return DocumentNote(file=label, size_bytes=path.stat().st_size, first_lines=lines)


def _relabel(err: Exception, path: Path, label: str) -> str:
    """The error message with the workspace-relative label instead of the absolute path (prompts stay portable)."""
    return str(err).replace(str(path), label)


def _sqlite_fk_joins(path: Path, label: str) -> list[CandidateJoin]:
    from worldsmith.tools.sql import describe_sqlite  # tools.sql imports tools.files: import late

    joins = []
    schema = describe_sqlite(path)
    pks = {t.name: [c.name for c in t.columns if c.pk] for t in schema.tables}
    for t in schema.tables:
        for fk in t.foreign_keys:
            targets = fk.ref_columns or pks.get(fk.ref_table, [])
            for src, dst in zip(fk.columns, targets):
                joins.append(
                    CandidateJoin(
                        left=ColumnRef(file=label, table=t.name, column=src),
                        right=ColumnRef(file=label, table=fk.ref_table, column=dst),
                        reason="foreign_key",
                        right_unique=True,
                    )
                )
    return joins


def profile_workspace(
    paths: list[Path] | Path,
    max_rows_exact: int = 200_000,
    sample_rows: int = 5,
    *,
    max_rows_read: int = 2_000_000,
    max_files: int = 500,
    limits: FileLimits | None = None,
    as_mounted: bool = False,
) -> WorkspaceProfile:
    """Profile every data file under `paths` (files or folders), find keys and joins, list memos and failures.

    A file that cannot be read becomes a `FileFailure` with its error; the rest of the workspace is still profiled.
    """
    from worldsmith.tools.sql import SqlError  # tools.sql imports tools.files: import late

    paths = [Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    files, root = _walk(paths, max_files, as_mounted)
    aliases = input_aliases([p.name for p in paths]) if as_mounted else {}
    ws = WorkspaceProfile(root=str(root) if root is not None else None)
    join_inputs: list[list[JoinColumn]] = []
    for path, label in files:
        try:
            detect_format(path)
        except FileReadError as err:
            suffix = path.suffix.lower()
            if suffix in DOCUMENT_SUFFIXES:
                ws.documents.append(_document(path, label))
            elif suffix in UNSUPPORTED_HINTS:
                ws.failures.append(FileFailure(file=label, reason=err.reason.value, message=_relabel(err, path, label)))
            else:
                ws.other_files.append(
                    OtherFile(
                        file=label,
                        size_bytes=path.stat().st_size,
                        note=f"not a table or document ({suffix or 'no extension'})",
                    )
                )
            continue
        try:
            refs = list_tables(path, limits=limits)
        except FileReadError as err:
            ws.failures.append(FileFailure(file=label, reason=err.reason.value, message=_relabel(err, path, label)))
            continue
        for ref in refs:
            try:
                prof, stats = profile_table(
                    ref,
                    label=label,
                    alias=_alias(label, aliases),
                    max_rows_exact=max_rows_exact,
                    max_rows_read=max_rows_read,
                    sample_rows=sample_rows,
                    limits=limits,
                )
            except FileReadError as err:
                msg = _relabel(err, path, label)
                ws.failures.append(FileFailure(file=label, table=ref.table, reason=err.reason.value, message=msg))
                continue
            except _BAD_INPUT as exc:  # an input no reader anticipated: record it, keep profiling the rest
                msg = f"cannot read {label}: {type(exc).__name__}: {exc}"
                ws.failures.append(FileFailure(file=label, table=ref.table, reason="unreadable", message=msg))
                continue
            ws.tables.append(prof)
            join_inputs.append(join_columns(prof, stats))
        if refs and refs[0].kind == "sqlite_table":
            try:
                ws.joins.extend(_sqlite_fk_joins(path, label))
            except SqlError as exc:
                ws.failures.append(FileFailure(file=label, reason="corrupt", message=_relabel(exc, path, label)))
    declared = {(j.left.label, j.right.label) for j in ws.joins}
    for j in find_joins(join_inputs):
        if (j.left.label, j.right.label) not in declared and (j.right.label, j.left.label) not in declared:
            ws.joins.append(j)
    return ws
