"""Render a WorkspaceProfile as text for LLM prompts, shedding detail until it fits a character budget.

Two styles: `full` (statistics of every column) and `compact` (what the analyst reads on every question: the
exact load call, then the schema — names, dtypes, null counts, a range or the values — and a few rows; means,
spreads and top counts stay out, a `profile()` helper in the sandbox prints them on demand). Prompt tokens are
the analyst's main cost on CPU, so the compact one is kept short.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from worldsmith.prompts import template
from worldsmith.tools.files.models import CandidateJoin, ColumnProfile, TableProfile, WorkspaceProfile
from worldsmith.tools.files.parts import TableParts, table_parts


@dataclass(frozen=True)
class Detail:
    """One level of detail; levels are tried from richest to leanest."""

    sample_rows: int
    columns: Literal["full", "short", "names", "none", "schema"]
    max_columns: int
    doc_lines: int
    max_joins: int
    max_top: int = 5
    sample_columns: int = 1000  # columns shown in the sample rows
    compact: bool = False  # the compact style (see the module docstring)


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

#: The compact style: schema lines (with ranges / values while `max_top`) and a few rows of the first columns.
COMPACT_LEVELS: tuple[Detail, ...] = (
    Detail(3, "schema", 60, 4, 10, 8, sample_columns=12, compact=True),
    Detail(2, "schema", 40, 2, 8, 5, sample_columns=8, compact=True),
    Detail(0, "schema", 30, 2, 6, 5, compact=True),
    Detail(0, "schema", 40, 1, 5, 0, compact=True),
    Detail(0, "names", 30, 1, 5, compact=True),
    Detail(0, "none", 0, 0, 3, compact=True),
)
_DECIMAL = re.compile(r"-?\d+\.\d+")
# notes a schema line can show itself: a quoted name shows its spaces, `values x` a constant
_SHOWN_NOTES = ("column name has surrounding whitespace", "constant column")


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


def _sig(x: float | str | None) -> str:
    """A number for the compact style: integers as they are, others to ~4 significant digits, no exponent
    unless the magnitude needs one."""
    if x is None:
        return "NA"
    if isinstance(x, str):
        return x
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    mag = math.floor(math.log10(abs(x)))
    if mag >= 15 or mag < -4:
        return f"{x:.4g}"
    text = f"{x:.{max(0, 3 - mag)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _cell(text: str) -> str:
    """A sample-row cell with a long decimal rounded to ~4 significant digits (never made longer)."""
    if not _DECIMAL.fullmatch(text) or float(text).is_integer():  # 22.0 stays: it says the column is float
        return text
    short = _sig(float(text))
    return short if len(short) < len(text) else text


def _table_header(t: TableProfile, compact: bool = False) -> str:
    rows = f"{t.n_rows:,}" + ("" if t.n_rows_exact else " (estimated)")
    where = f"{t.file}, table {t.table!r}" if t.table is not None else t.file
    head = f"## {where} — {rows} rows × {t.n_cols} columns" if compact else \
        f"## {where} — {t.format}, {rows} rows × {t.n_cols} columns"
    if t.load:
        head += "\nload: " + t.load
    if t.alias_load:
        head += f"\n  or: {t.alias_load}  (the same file under a plain name)"
    if t.sampled and t.sampling_note:
        head += f"\n[sampled: {t.sampling_note}]"
    return head


def _column_schema(c: ColumnProfile, n_rows: int, exact: bool, max_top: int) -> str:
    """`- name: dtype; N nulls; range or values` — the schema line of the compact style."""
    name = repr(c.name) if c.name != c.name.strip() else c.name  # 'total ' : the quotes show the space
    parts = [f"- {name}: {c.dtype}"]
    if c.null_rate > 0:
        parts.append(f"{'' if exact else '~'}{round(c.null_rate * n_rows):,} nulls")
    if max_top:
        shown = [v.value for v in c.top_values[:max_top]]
        if c.top_values and c.n_unique <= len(shown):
            parts.append("values " + ", ".join(shown))
        elif c.semantic_type in ("numeric", "id") and isinstance(c.min, (int, float)) and c.min is not None:
            parts.append(f"{_sig(c.min)}..{_sig(c.max)}")
        elif c.semantic_type == "datetime" and c.min is not None:
            parts.append(f"{c.min}..{c.max}")
        elif c.top_values:
            parts.append(f"{c.n_unique:,} distinct, most common " + ", ".join(shown))
        else:
            parts.append(f"{c.n_unique:,} distinct")
    shown_notes = _SHOWN_NOTES if any(p.startswith("values ") for p in parts) else _SHOWN_NOTES[:1]
    notes = [n for n in c.notes if not n.startswith(shown_notes)]
    return "; ".join(parts) + "".join(f"  ! {note}" for note in notes)


def _table(t: TableProfile, d: Detail) -> str:
    compact = d.compact
    lines = [_table_header(t, compact)]
    if d.columns == "none":  # the compact style keeps the load call even here
        return lines[0] if compact else lines[0].split("\n")[0]
    if t.candidate_keys and not compact:
        lines.append("candidate keys: " + "; ".join("(" + ", ".join(k) + ")" for k in t.candidate_keys[:3]))
    shown = t.columns[: d.max_columns]
    rest = t.columns[d.max_columns :]
    if d.columns == "full":
        lines.append("columns:")
        lines.extend(_column_full(c, d.max_top) for c in shown)
    elif d.columns == "schema":
        lines.append("columns (dtype; nulls; range or values):" if d.max_top else "columns (dtype; nulls):")
        lines.extend(_column_schema(c, t.n_rows, t.n_rows_exact and not t.sampled, d.max_top) for c in shown)
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
        cols = [c.name for c in shown][: d.sample_columns]
        more = f" (first {len(cols)} of {t.n_cols} columns)" if len(cols) < t.n_cols else ""
        lines.append(f"first {len(rows)} rows{more}:")
        lines.append(" | ".join(cols))
        cell = _cell if compact else (lambda v: v)
        lines.extend(" | ".join(cell(r.get(c, "")) for c in cols) for r in rows)
    return "\n".join(lines)


def _respelled(joins: list[CandidateJoin]) -> list[str]:
    """One line per group of columns that spell the same ids differently (joins chained through shared columns),
    with how to merge them (prompts/profile_notes.md)."""
    # {label: (column, example, table)}, overlaps
    groups: list[tuple[dict[str, tuple[str, str, str]], list[float]]] = []
    for j in joins:
        sides = {j.left.label: (j.left.column, (j.spellings or ("", ""))[0], j.left.table_label),
                 j.right.label: (j.right.column, (j.spellings or ("", ""))[1], j.right.table_label)}
        hit = [g for g in groups if sides.keys() & g[0].keys()]
        merged: tuple[dict[str, tuple[str, str, str]], list[float]] = ({}, [])
        for g in hit:
            groups.remove(g)
            merged[0].update(g[0])
            merged[1].extend(g[1])
        merged[0].update(sides)
        merged[1].append(j.overlap_ratio or 0.0)
        groups.append(merged)
    out = []
    notes = template("profile_notes.md")
    for cols, overlaps in groups:
        named = ", ".join(f"{label} ({example!r})" for label, (_, example, _) in cols.items())
        # one column name for all: one call; else each table's own call (a small model given `df[col]` and the
        # columns in a list used one table's column for both and failed on a KeyError)
        by_column: dict[str, list[str]] = {}
        for column, _, table in cols.values():
            by_column.setdefault(column, []).append(table)
        calls = [notes.section("respelled call", column=column) for column in by_column]
        if len(calls) > 1:
            calls = [notes.section("respelled call in", call=call, tables=", ".join(tables))
                     for call, tables in zip(calls, by_column.values())]
        out.append(notes.section("respelled ids", columns=named, overlap=f"{min(overlaps):.0%}",
                                 calls="; ".join(calls)))
    return out


def _parts(g: TableParts) -> str:
    notes = template("profile_notes.md")
    renamed = "".join(notes.section("renamed in parts", new=new, old=old, table=label)
                      for label, mapping in g.renames.items() for new, old in mapping.items())
    call = g.concat()
    return notes.section("parts of one table", tables=", ".join(g.labels), renamed=renamed,
                         stack=notes.section("stack call", call=call) if call else notes.section("stack words"))


def _render(ws: WorkspaceProfile, d: Detail) -> str:
    summary = (
        f"# Workspace: {len(ws.tables)} tables, {len(ws.documents)} documents, "
        f"{len(ws.failures)} unreadable, {len(ws.other_files)} other files"
    )
    blocks = [] if d.compact else [summary]  # compact: each section below says what it lists
    blocks.extend(_table(t, d) for t in ws.tables)
    groups = table_parts(ws.tables)
    if groups:
        blocks.append("\n".join(["## Parts of one table"] + [_parts(g) for g in groups]))
    part_of = {label: i for i, g in enumerate(groups) for label in g.labels}
    # compact: a same-named column pair that shares no value is no join worth the tokens; parts of one table are
    # stacked, not joined
    joins = [j for j in ws.joins if not (d.compact and j.overlap_ratio == 0)
             and not (part_of.get(j.left.table_label, -1) == part_of.get(j.right.table_label, -2))]
    if joins and d.max_joins:
        plain = [j for j in joins if j.spellings is None]
        lines = ["## Candidate joins"] + _respelled([j for j in joins if j.spellings is not None])
        for j in plain[: d.max_joins]:
            extra = [j.reason]
            if j.overlap_ratio is not None:
                extra.append(f"overlap {j.overlap_ratio:.0%}")
            uniq = [side for side, u in (("left", j.left_unique), ("right", j.right_unique)) if u]
            if uniq:
                extra.append("unique: " + "+".join(uniq))
            lines.append(f"- {j.left.label} ↔ {j.right.label} ({'; '.join(extra)})")
        if len(plain) > d.max_joins:
            lines.append(f"… {len(plain) - d.max_joins} more")
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


def render_workspace(ws: WorkspaceProfile, max_chars: int, compact: bool = False) -> str:
    """The richest rendering that fits `max_chars`; if even the leanest does not, it is cut with a marker."""
    text = ""
    for level in COMPACT_LEVELS if compact else LEVELS:
        text = _render(ws, level)
        if len(text) <= max_chars:
            return text
    marker = f"\n[… truncated: {len(text):,} chars did not fit max_chars={max_chars:,}]"
    if max_chars <= len(marker):
        return text[:max_chars]
    return text[: max_chars - len(marker)] + marker
