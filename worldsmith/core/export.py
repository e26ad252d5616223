"""Export a pipeline step's rows: JSONL, parquet (pyarrow) or a Hugging Face `datasets.Dataset`.

Nested values (dicts, lists of mixed types) go to parquet and datasets as JSON text, so any row shape exports
and reads back the same; `datasets` is imported only when asked for, so core stays light.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from worldsmith.core.store import atomic_write_bytes, read_jsonl, write_jsonl

Row = dict[str, Any]


def _flat(rows: list[Row]) -> tuple[list[Row], list[str]]:
    """Rows with every dict/list value as JSON text, and the names of the columns that were encoded."""
    nested = sorted({k for r in rows for k, v in r.items() if isinstance(v, (dict, list, tuple))})
    return [{k: json.dumps(v, sort_keys=True) if k in nested and v is not None else v for k, v in r.items()}
            for r in rows], nested


def _unflat(rows: list[Row], nested: list[str]) -> list[Row]:
    return [{k: json.loads(v) if k in nested and isinstance(v, str) else v for k, v in r.items()} for r in rows]


def export_rows(rows: list[Row], path: str | os.PathLike[str]) -> Path:
    """Write rows to `path`, the format chosen by its suffix (.jsonl or .parquet), atomically."""
    path = Path(path)
    if path.suffix == ".jsonl":
        return write_jsonl(path, rows)
    if path.suffix == ".parquet":
        import io

        import pyarrow as pa
        import pyarrow.parquet as pq

        flat, nested = _flat(rows)
        table = pa.Table.from_pylist(flat)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                               b"worldsmith.json_columns": json.dumps(nested).encode()})
        buf = io.BytesIO()
        pq.write_table(table, buf)
        return atomic_write_bytes(path, buf.getvalue())
    raise ValueError(f"{path}: cannot export rows to {path.suffix or 'a file without suffix'!r}; use .jsonl or .parquet")


def import_rows(path: str | os.PathLike[str]) -> list[Row]:
    """Read rows written by `export_rows` (JSON-encoded nested columns decoded again)."""
    path = Path(path)
    if path.suffix == ".jsonl":
        return read_jsonl(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        nested = json.loads((table.schema.metadata or {}).get(b"worldsmith.json_columns", b"[]"))
        return _unflat(table.to_pylist(), nested)
    raise ValueError(f"{path}: cannot import rows from {path.suffix!r}; use .jsonl or .parquet")


def to_dataset(rows: list[Row]) -> Any:
    """A Hugging Face `datasets.Dataset` of the rows (nested values as JSON text, listed in `info.description`)."""
    try:
        import datasets
    except ImportError as exc:
        raise ImportError("exporting to a Hugging Face dataset needs `datasets` (pip install datasets)") from exc
    flat, nested = _flat(rows)
    return datasets.Dataset.from_list(flat, info=datasets.DatasetInfo(description=json.dumps({"json_columns": nested})))


def from_dataset(ds: Any) -> list[Row]:
    """Rows back from a dataset made by `to_dataset`."""
    nested = json.loads(ds.info.description or "{}").get("json_columns", [])
    return _unflat(ds.to_list(), nested)
