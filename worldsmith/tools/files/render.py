"""Render a WorkspaceProfile as compact text for LLM prompts, shedding detail until it fits a character budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from worldsmith.tools.files.models import ColumnProfile, TableProfile, WorkspaceProfile


@dataclass(frozen=True)
class Detail:
    """One level of detail; levels are tried from richest to leanest."""

    sample_rows: int
    columns: Literal["full", "short", "names", "none"]
    max_columns: int
    doc_lines: int
    max_joins: int
    max_top: int = 5


LEVELS: tuple[Detail, ...] = (
    Detail(5, "full", 80, 8, 40),
    Detail(3, "full", 50, 4, 25),
    Detail(2, "full", 30, 2, 15, 3),
    Detail(0, "full", 20, 2, 12, 2),
    Detail(1, "short", 40, 2, 10),
    Detail(0, "short", 25, 1, 10),
    Detail(0, "names", 30, 1, 8),
    Detail(0, "names", 12, 0, 5),
    Detail(0, "none", 0, 0, 3),
)


def _num(x: float | str | None) -> str:
    if x is None:
        return "NA"
    if isinstance(x, str):
        return x
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}" if abs(x) >= 10_000 else str(int(x))
    return f"{x:.4g}"


def _column_full(c: ColumnProfile, max_top: int) -> str:
    parts = [f"- {c.name} ({c.dtype}, {c.semantic_type})"]
    if c.null_rate > 0:
        parts.append(f"nulls {c.null_rate:.1%}")
    parts.append(f"{c.n_unique:,} distinct")
    if c.semantic_type in ("numeric", "id") and c.min is not None:
        rng = f"range {_num(c.min)}..{_num(c.max)}"
        if c.semantic_type == "numeric" and c.mean is not None:
            rng += f", mean {_num(c.mean)}, std {_num(c.std)}"
        parts.append(rng)
    elif c.semantic_type == "datetime" and c.min is not None:
        parts.append(f"{c.min} .. {c.max}")
    if c.top_values and max_top:
        parts.append("top: " + ", ".join(f"{v.value}×{v.count}" for v in c.top_values[:max_top]))
    elif c.examples and c.semantic_type in ("id", "text", "categorical"):
        parts.append("e.g. " + ", ".join(repr(e) for e in c.examples[:2]))
    line = "; ".join(parts)
    for note in c.notes:
        line += f"\n    ! {note}"
    return line


#: How to load each format in pandas: models that see `db.sqlite[orders]` otherwise try to open that as a path.
_LOADERS = {
    "sqlite": "pd.read_sql('SELECT * FROM \"{table}\"', sqlite3.connect('{file}'))",
    "xlsx": 'pd.read_excel("{file}", sheet_name="{table}")',
    "parquet": 'pd.read_parquet("{file}")',
    "jsonl": 'pd.read_json("{file}", lines=True)',
}


def _table_header(t: TableProfile) -> str:
    rows = f"{t.n_rows:,}" + ("" if t.n_rows_exact else " (estimated)")
    where = f"{t.file}, table {t.table!r}" if t.table is not None else t.file
    head = f"## {where} — {t.format}, {rows} rows × {t.n_cols} columns"
    loader = _LOADERS.get(t.format)
    if loader and (t.table is not None or "{table}" not in loader):
        head += "\nload: " + loader.format(file=t.file, table=t.table or "")
    if t.sampled and t.sampling_note:
        head += f"\n[sampled: {t.sampling_note}]"
    return head


def _table(t: TableProfile, d: Detail) -> str:
    lines = [_table_header(t)]
    if d.columns == "none":
        return lines[0].split("\n")[0]
    if t.candidate_keys:
        lines.append("candidate keys: " + "; ".join("(" + ", ".join(k) + ")" for k in t.candidate_keys[:3]))
    shown = t.columns[: d.max_columns]
    rest = t.columns[d.max_columns :]
    if d.columns == "full":
        lines.append("columns:")
        lines.extend(_column_full(c, d.max_top) for c in shown)
    elif d.columns == "short":
        lines.append("columns: " + ", ".join(f"{c.name}:{c.semantic_type}" for c in shown))
    else:
        lines.append("columns: " + ", ".join(c.name for c in shown))
    if rest:
        names = ", ".join(c.name for c in rest[:20])
        more = f" (+{len(rest) - 20} more)" if len(rest) > 20 else ""
        lines.append(f"… {len(rest)} more columns: {names}{more}")
    if d.sample_rows and t.sample_rows:
        rows = t.sample_rows[: d.sample_rows]
        cols = [c.name for c in shown]
        lines.append(f"first {len(rows)} rows:")
        lines.append(" | ".join(cols))
        lines.extend(" | ".join(r.get(c, "") for c in cols) for r in rows)
    return "\n".join(lines)


def _render(ws: WorkspaceProfile, d: Detail) -> str:
    summary = (
        f"# Workspace: {len(ws.tables)} tables, {len(ws.documents)} documents, "
        f"{len(ws.failures)} unreadable, {len(ws.other_files)} other files"
    )
    blocks = [summary]
    blocks.extend(_table(t, d) for t in ws.tables)
    if ws.joins and d.max_joins:
        lines = ["## Candidate joins"]
        for j in ws.joins[: d.max_joins]:
            extra = [j.reason]
            if j.overlap_ratio is not None:
                extra.append(f"overlap {j.overlap_ratio:.0%}")
            uniq = [side for side, u in (("left", j.left_unique), ("right", j.right_unique)) if u]
            if uniq:
                extra.append("unique: " + "+".join(uniq))
            lines.append(f"- {j.left.label} ↔ {j.right.label} ({'; '.join(extra)})")
        if len(ws.joins) > d.max_joins:
            lines.append(f"… {len(ws.joins) - d.max_joins} more")
        blocks.append("\n".join(lines))
    cap = max(d.max_joins, 3)  # list lengths shrink with the level too
    if ws.failures:
        lines = ["## Unreadable"] + [f"- {f.message}" for f in ws.failures[:cap]] + _more(ws.failures, cap)
        blocks.append("\n".join(lines))
    if ws.documents:
        lines = ["## Documents"]
        for doc in ws.documents[:cap]:
            lines.append(f"- {doc.file} ({doc.size_bytes:,} bytes)")
            lines.extend(f"    {ln}" for ln in doc.first_lines[: d.doc_lines])
        blocks.append("\n".join(lines + _more(ws.documents, cap)))
    if ws.other_files:
        lines = ["## Other files"] + [f"- {o.file}: {o.note}" for o in ws.other_files[:cap]]
        blocks.append("\n".join(lines + _more(ws.other_files, cap)))
    return "\n\n".join(blocks)


def _more(items: list, cap: int) -> list[str]:
    return [f"… {len(items) - cap} more"] if len(items) > cap else []


def render_workspace(ws: WorkspaceProfile, max_chars: int) -> str:
    """The richest rendering that fits `max_chars`; if even the leanest does not, it is cut with a marker."""
    text = ""
    for level in LEVELS:
        text = _render(ws, level)
        if len(text) <= max_chars:
            return text
    marker = f"\n[… truncated: {len(text):,} chars did not fit max_chars={max_chars:,}]"
    if max_chars <= len(marker):
        return text[:max_chars]
    return text[: max_chars - len(marker)] + marker
