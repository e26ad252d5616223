"""JSON and JSON Lines readers: records, dict-of-lists, keyed record lists and nested objects become DataFrames."""

from __future__ import annotations

import io
import json
import zlib
from pathlib import Path
from typing import Any

import pandas as pd

from worldsmith.tools.files.errors import FileLimits, FileReadError, ReadErrorReason, over_limit
from worldsmith.tools.files.formats import FileFormat, detect_encoding, read_head
from worldsmith.tools.files.guard import check_json_depth, open_guarded

# One parsed document is kept so list_tables() followed by read_table() parses a JSON file once.
_LAST_DOC: dict[tuple[str, int, int, FileLimits], Any] = {}


def load_json_document(
    path: Path, fmt: FileFormat, limits: FileLimits, encoding: str | None = None, *, deadline: float | None = None
) -> Any:
    """Parse a whole-document JSON file, with precise errors (line/column for syntax errors).

    The decompressed size is capped at `max_json_bytes` while reading, and nesting at `max_json_depth` before parsing.
    """
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size, limits)  # cached only under the limits it passed
    if key in _LAST_DOC and encoding is None:
        return _LAST_DOC[key]
    if stat.st_size > limits.max_json_bytes:
        raise _json_too_large(path, limits, f"{stat.st_size:,} bytes on disk")
    try:
        with open_guarded(path, fmt, limits, deadline=deadline, check_lines=False) as fh:
            raw = fh.read(limits.max_json_bytes + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise FileReadError(path, ReadErrorReason.CORRUPT, "re-export the file", detail=str(exc)) from exc
    if len(raw) > limits.max_json_bytes:
        raise _json_too_large(path, limits, "decompressed content")
    if not raw.strip():
        raise FileReadError(path, ReadErrorReason.EMPTY, "the file holds no JSON value", detail="empty document")
    enc = encoding or detect_encoding(path, raw[: limits.encoding_sniff_bytes])
    try:
        text = raw.decode(enc)
    except UnicodeDecodeError as exc:
        raise FileReadError(
            path, ReadErrorReason.ENCODING, "re-save as UTF-8", detail=f"not valid {enc} at byte {exc.start}"
        ) from exc
    check_json_depth(path, text, limits)
    try:
        doc = json.loads(text.lstrip("\ufeff"))
    except RecursionError as exc:  # nesting the depth scan let through but the parser cannot take
        raise _too_deep(path, limits) from exc
    except json.JSONDecodeError as exc:
        hint = "fix the JSON syntax"
        if exc.msg == "Extra data" and exc.lineno >= 2 and exc.colno == 1:
            hint = "this looks like JSON Lines (one value per line); rename it to .jsonl"
        raise FileReadError(
            path, ReadErrorReason.INVALID_JSON, hint, detail=exc.msg, where=f"line {exc.lineno}, column {exc.colno}"
        ) from exc
    _LAST_DOC.clear()
    if encoding is None:
        _LAST_DOC[key] = doc
    return doc


def _json_too_large(path: Path, limits: FileLimits, what: str) -> FileReadError:
    return over_limit(
        path, "max_json_bytes", limits, f"{what} over {limits.max_json_bytes:,} bytes",
        "a whole-document JSON file cannot be sampled; convert it to JSON Lines or Parquet",
    )


def _too_deep(path: Path, limits: FileLimits, where: str | None = None) -> FileReadError:
    return over_limit(
        path, "max_json_depth", limits, "JSON nested too deeply for the parser",
        "deeply nested JSON cannot be made into a table", where=where,
    )


def json_table_names(path: Path, doc: Any) -> list[str | None]:
    """Tables in a JSON document: the keys holding record lists, else one unnamed table."""
    keys = _record_list_keys(doc)
    return list(keys) if keys else [None]


def _record_list_keys(doc: Any) -> list[str]:
    if not isinstance(doc, dict):
        return []
    return [
        k
        for k, v in doc.items()
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v[:100])
    ]


def json_frame(path: Path, doc: Any, table: str | None) -> pd.DataFrame:
    """Turn a parsed JSON document (or one of its record-list keys) into a DataFrame."""
    keys = _record_list_keys(doc)
    if table is not None:
        if table not in keys:
            raise FileReadError(
                path,
                ReadErrorReason.NO_SUCH_TABLE,
                "available: " + (", ".join(keys) if keys else "(one unnamed table)"),
                detail=f"no record list under key {table!r}",
            )
        return _frame_from_value(path, doc[table])
    if len(keys) > 1:
        raise FileReadError(
            path,
            ReadErrorReason.AMBIGUOUS,
            "pass table= one of: " + ", ".join(keys),
            detail=f"the document holds {len(keys)} record lists",
        )
    if len(keys) == 1:
        return _frame_from_value(path, doc[keys[0]])
    return _frame_from_value(path, doc)


def _frame_from_value(path: Path, value: Any) -> pd.DataFrame:
    if isinstance(value, list):
        if not value:
            raise FileReadError(path, ReadErrorReason.EMPTY, "the JSON array has no elements", detail="empty array")
        if all(isinstance(x, dict) for x in value):
            return _records_frame(value)
        if all(isinstance(x, list) for x in value):
            return pd.DataFrame(value)
        return _records_frame([x if isinstance(x, dict) else {"value": x} for x in value])
    if isinstance(value, dict):
        if not value:
            raise FileReadError(path, ReadErrorReason.EMPTY, "the JSON object has no keys", detail="empty object")
        vals = list(value.values())
        if all(isinstance(v, list) for v in vals) and len({len(v) for v in vals}) == 1:
            return pd.DataFrame(value)  # dict of equal-length columns
        if all(isinstance(v, dict) for v in vals):
            inner = {k for v in vals for k in v}
            if inner and all(str(k).isdigit() for k in inner):
                return pd.DataFrame(value)  # pandas' orient="columns": {column: {row: value}}
            frame = pd.json_normalize(vals, sep=".")
            frame.insert(0, "key", list(value.keys()))
            return frame
        return pd.json_normalize([value], sep=".")
    return pd.DataFrame({"value": [value]})


def _records_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    probe = records[:1000]
    if any(isinstance(v, dict) for r in probe for v in r.values()):
        return pd.json_normalize(records, sep=".")
    return pd.DataFrame.from_records(records)


def read_jsonl(
    path: Path,
    fmt: FileFormat,
    limits: FileLimits,
    nrows: int | None,
    encoding: str | None = None,
    *,
    deadline: float | None = None,
    full_read_cap: int | None = None,
) -> pd.DataFrame:
    """Read JSON Lines; a bad line raises FileReadError(invalid_json) naming the line and column.

    Lines stream through the byte guard (line length, decompressed size, time); each line's nesting is checked.
    """
    head = read_head(path, fmt, limits.encoding_sniff_bytes)
    if not head.strip():
        raise FileReadError(path, ReadErrorReason.EMPTY, "the file holds no JSON lines", detail="empty file")
    enc = encoding or detect_encoding(path, head)
    records: list[Any] = []
    lineno = 0
    try:
        guarded = open_guarded(path, fmt, limits, deadline=deadline, full_read_cap=full_read_cap)
        with io.TextIOWrapper(guarded, encoding=enc, newline=None) as fh:
            for lineno, line in enumerate(fh, start=1):
                line = line.rstrip("\r\n").lstrip("\ufeff")
                if not line.strip():
                    continue
                check_json_depth(path, line, limits, where=f"line {lineno}")
                try:
                    records.append(json.loads(line))
                except RecursionError as exc:
                    raise _too_deep(path, limits, f"line {lineno}") from exc
                except json.JSONDecodeError as exc:
                    raise FileReadError(
                        path,
                        ReadErrorReason.INVALID_JSON,
                        "each line must be one complete JSON value",
                        detail=exc.msg,
                        where=f"line {lineno}, column {exc.colno}",
                    ) from exc
                if nrows is not None and len(records) >= nrows:
                    break
    except UnicodeDecodeError as exc:
        raise FileReadError(
            path, ReadErrorReason.ENCODING, "re-save as UTF-8", detail=f"not valid {enc}", where=f"line {lineno + 1}"
        ) from exc
    except (OSError, EOFError, zlib.error) as exc:
        raise FileReadError(path, ReadErrorReason.CORRUPT, "re-export the file", detail=str(exc)) from exc
    if not records:
        raise FileReadError(path, ReadErrorReason.EMPTY, "the file holds only blank lines", detail="no records")
    return _records_frame([r if isinstance(r, dict) else {"value": r} for r in records])
