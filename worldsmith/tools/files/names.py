"""Where the names a request writes as code live in a profiled workspace.

A request over several files names columns (`opex`, `size_class`) and values (`region` is 'north') as the business
knows them; the files may hold them under other names or codes, and the workspace's notes may say how. For each
name written in backticks this finds the tables that hold it (or says none does, with the closest column), flags a
quoted value a fully profiled column does not hold (with the values it does), and quotes the documents' lines on
those names and on the files that hold them. With one table and no documents there is nothing to locate, so it
says nothing. The line wordings are model-facing: `prompts/profile_notes.md`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path, PurePosixPath

from worldsmith.prompts import template
from worldsmith.tools.files.formats import DOCUMENT_SUFFIXES
from worldsmith.tools.files.models import TableProfile, WorkspaceProfile
from worldsmith.tools.files.parts import table_parts

_CODE = re.compile(r"`([^`\n]{1,64})`")
_NAME = re.compile(r"[A-Za-z_][\w .%-]*")
_FILE_LIKE = re.compile(r"\.[A-Za-z][\w]{0,6}$")  # data/crm.csv, ledger.xlsx: a file, not a column
_VALUE = re.compile(r"`([^`\n]{1,64})`\s+(?:is|equals|==?)\s+'([^'\n]{1,64})'")
#: a name for a kind of row, not a column: "the `meter_months` records", "`visits` rows"
_ROWS = re.compile(r"`([^`\n]{1,64})`\s+(?:records|rows|entries)\b")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
#: a list item naming a document is a pointer ("`memos/crm.md`: notes from the owners"), not a note
_POINTER = re.compile(r"[\w./-]+(?:" + "|".join(map(re.escape, sorted(DOCUMENT_SUFFIXES))) + r")(?![\w])")
MAX_TABLES = 4  # tables listed per name
MAX_VALUES = 8  # values listed for a value a column does not hold
MAX_DOC_LINES = 12
MAX_NOTE_LINES = 60  # lines of a document read for its notes on a file
MAX_NAMES = 12  # names placed per request (a long list of names would cost more prompt than it saves)


def names_file(text: str, name: str) -> bool:
    """Whether `text` names the file `name` by itself ("orders_2024.csv", never inside "big_orders_2024.csv")."""
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text) is not None


def file_notes(paths: list[Path], files: Collection[str], max_lines: int = MAX_NOTE_LINES) -> list[str]:
    """The list items of the documents under `paths` (files or folders, as the sandbox mounts them) that name one
    of `files` (base names): a data room's notes on an export — a unit that changed, repeated records, how its ids
    are written. Only a document's first `max_lines` lines are read."""
    notes = template("profile_notes.md")
    return [notes.section("document line", file=label, line=item)
            for label, item in file_items(paths, files, max_lines)][:MAX_DOC_LINES]


def file_items(paths: list[Path], files: Collection[str], max_lines: int = MAX_NOTE_LINES) -> list[tuple[str, str]]:
    """(document, list item) for the notes `file_notes` quotes, every one of them."""
    docs: list[tuple[Path, str]] = []
    others: set[str] = set()  # the other files' names: the tables a document may list
    for p in paths:
        for f in sorted(p.rglob("*")) if p.is_dir() else [p]:
            if not f.is_file():
                continue
            if f.suffix.lower() in DOCUMENT_SUFFIXES:
                docs.append((f, f"{p.name}/{f.relative_to(p).as_posix()}" if p.is_dir() else f.name))
            else:
                others.add(f.name)
    out: list[tuple[str, str]] = []
    for path, label in docs:
        try:
            with path.open(encoding="utf-8", errors="replace") as fh:
                lines = [line.rstrip("\n") for _, line in zip(range(max_lines), fh)]
        except OSError:
            continue
        if not any(names_file(line, f) for line in lines for f in files):
            continue
        if len(others) >= 3 and all(any(names_file(line, f) for line in lines) for f in others):
            continue  # an index of the data room (a README listing every file) is no note on one of them
        out += [(label, item) for item in list_items(lines) if not _POINTER.search(item)]
    return out


def request_names(request: str) -> list[str]:
    """Names the request writes as code (`name`), in order, without file paths."""
    out: dict[str, None] = {}
    for raw in _CODE.findall(request):
        name = raw.strip()
        if _NAME.fullmatch(name) and not _FILE_LIKE.search(name) and "/" not in name:
            out[name] = None
    return list(out)


def _holders(ws: WorkspaceProfile, name: str) -> list[TableProfile]:
    return [t for t in ws.tables if any(c.name == name for c in t.columns)]


def _listed(labels: list[str]) -> str:
    more = f" and {len(labels) - MAX_TABLES} more" if len(labels) > MAX_TABLES else ""
    return ", ".join(labels[:MAX_TABLES]) + more


def _closest(ws: WorkspaceProfile, name: str) -> str:
    """`; closest: `X` in T` for a column spelled nearly the same way (case, separators), else ''."""
    columns = {c.name: t.label for t in ws.tables for c in t.columns}
    folded = {re.sub(r"[\s_-]+", "", c.lower()): c for c in columns}
    hit = folded.get(re.sub(r"[\s_-]+", "", name.lower()))
    if hit is None:
        near = difflib.get_close_matches(name, list(columns), n=1, cutoff=0.75)
        hit = near[0] if near else None
    return template("profile_notes.md").section("closest column", column=hit, table=columns[hit]) if hit else ""


def complete_values(t: TableProfile, column: str) -> list[str] | None:
    """Every value of a column the profile read on every row and listed in full (None when it did not: a sampled
    table, more values than it lists, a clipped value)."""
    c = next((c for c in t.columns if c.name == column), None)
    if c is None:
        return None
    values = [v.value for v in getattr(c, "top_values", [])] or list(getattr(c, "examples", []))  # no value repeats
    complete = (not t.sampled and values and len(set(values)) >= getattr(c, "n_unique", len(values) + 1)
                and not any(v.endswith("…") for v in values))  # a clipped value is not the value
    return values if complete else None


_Q = r"""["'`‘’“”]?"""
_STANDS_FOR = r"(?:means|stands for|denotes|is short for|is used for|=|:|→|->)"
_WRITTEN_AS = r"(?:is (?:written|coded|recorded|labell?ed|spelled|stored)(?: as)?|becomes|→|->)"


def documented_spelling(value: str, values: Collection[str], items: Mapping[str, Sequence[str]]
                        ) -> tuple[str, str] | None:
    """(the data's value, the document) when a document item says which of a column's `values` stands for a label
    the column does not hold: `"independent" means "private"`, `XL = xl`, `'private' is coded as 'independent'`
    (`items`: each document → its list items). None when no item says so, or when it names two of them."""
    label = re.escape(value)
    found: dict[str, str] = {}
    for code in values:
        c = re.escape(code)
        said = re.compile(rf"(?<![\w]){_Q}{c}{_Q}\s*{_STANDS_FOR}\s*{_Q}{label}{_Q}(?![\w])"
                          rf"|(?<![\w]){_Q}{label}{_Q}\s*{_WRITTEN_AS}\s*{_Q}{c}{_Q}(?![\w])", re.IGNORECASE)
        for file, lines in items.items():
            if any(said.search(line) for line in lines):
                found.setdefault(code, file)
    return next(iter(found.items())) if len(found) == 1 else None


def _missing_values(ws: WorkspaceProfile, request: str) -> list[str]:
    """A quoted value (`col` is 'v') that a column profiled on every row, with all its values known, does not hold,
    and the value that stands for it when a document says which (the 1.5B model was told the column's values and
    the memo's line apart, and compared with 'private' four times more)."""
    notes = template("profile_notes.md")
    items = {d.file: list_items(d.first_lines) for d in ws.documents}
    out: list[str] = []
    for column, value in dict.fromkeys(_VALUE.findall(request)):
        for t in _holders(ws, column):
            values = complete_values(t, column)
            if values is None or value in values:
                continue
            if said := documented_spelling(value, values, items):
                out.append(notes.section("value spelled", value=value, column=column, table=t.label, code=said[0],
                                         file=said[1]))
                continue
            shown = ", ".join(repr(v) for v in values[:MAX_VALUES]) + (", …" if len(values) > MAX_VALUES else "")
            out.append(notes.section("value not held", value=value, column=column, table=t.label, values=shown))
    return out


_SINCE = re.compile(r"\b(?:from|since|as of|starting|beginning)\s+(\d{4}-\d{2}-\d{2})\b", re.IGNORECASE)
_INSTEAD = re.compile(r"`([^`\n]{1,64})`[^`]*?\b(?:in|as)\s+([^`()]+?)\s+instead of\s+([^`()]+?)\s*(?=[(.,;]|$)",
                      re.IGNORECASE)
_FACTOR = re.compile(r"\(\s*1\s+([^=()]+?)\s*=\s*(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s+([^()]+?)\s*\)")


def unit_change(item: str) -> tuple[str, str, str, str, str | None] | None:
    """(column, date, unit now, unit before, the divisor that brings the new unit back) when a document item says
    a column changed unit from a date: "From 2024-07-01, `amount` is recorded in USD cents instead of USD
    (1 USD = 100.0 USD cents)" → ('amount', '2024-07-01', 'USD cents', 'USD', '100.0'). The divisor is None when the
    item gives no conversion, or one that names neither unit ("1/k" when the item writes 1 new unit = k old ones).
    The validator reads it (agents/validator.py `unconverted_units`). Shown to the 1.5B analyst as code that brings
    the rows back, it made 0 of 6 generated questions right where it had made 1: it wrote `df = df.loc[…] /= k`,
    or divided the whole column, so the task turn does not carry it."""
    since, instead = _SINCE.search(item), _INSTEAD.search(item)
    if since is None or instead is None:
        return None
    column, new, old = instead.group(1), instead.group(2).strip(), instead.group(3).strip()
    divisor = None
    if (m := _FACTOR.search(item)) is not None:
        one, k, other = (g.strip().lower() for g in m.groups())
        if (one, other) == (old.lower(), new.lower()):
            divisor = k  # 1 old = k new: new / k is old
        elif (one, other) == (new.lower(), old.lower()):
            divisor = f"1/{k}"  # 1 new = k old: new × k is old
    return column, since.group(1), new, old, divisor


def list_items(lines: list[str]) -> list[str]:
    """A document's list items ("- text", "* text", "1. text"), without their markers: the lines its rules are
    written as."""
    return [_BULLET.sub("", line).strip() for line in lines if _BULLET.match(line)]


def _document_lines(ws: WorkspaceProfile, holders: dict[str, list[TableProfile]]) -> list[str]:
    """Lines of the documents that mention a named column (`holders`: each name → the tables holding it), or that
    sit in a note about a file holding one that few tables hold (a key every table carries says nothing about
    which notes matter)."""
    names = list(holders)
    files = {PurePosixPath(t.file).name for held in holders.values() if len({t.file for t in held}) <= 2
             for t in held}
    words = [re.compile(rf"(?<![\w]){re.escape(n)}(?![\w])") for n in names]
    notes = template("profile_notes.md")
    out: list[str] = []
    for doc in ws.documents:
        about = any(f in line for line in doc.first_lines for f in files)
        for item in list_items(doc.first_lines):
            if about or any(w.search(item) for w in words):
                out.append(notes.section("document line", file=doc.file, line=item))
    return out[:MAX_DOC_LINES]


def request_notes(request: str, ws: WorkspaceProfile) -> list[str]:
    """Lines placing the request's names in the workspace (empty for one table and no documents, or no names)."""
    names = request_names(request)[:MAX_NAMES]
    if not names or (len(ws.tables) < 2 and not ws.documents):
        return []
    notes = template("profile_notes.md")
    out = []
    holders = {name: _holders(ws, name) for name in names}
    rows = set(_ROWS.findall(request))
    quoted: set[str] = set()  # document items a name's line quotes already
    for name, held in holders.items():
        if held:
            out.append(notes.section("name held", name=name, tables=_listed([t.label for t in held])))
        elif name in rows:  # it names what a row is; a small model made it a column and looped on the error
            out.append(notes.section("rows named", name=name))
        elif said := documented_column(ws, name):
            file, column, item = said
            quoted.add(item)
            out.append(notes.section("name documented", name=name, file=file, column=column,
                                     tables=_listed([t.label for t in _holders(ws, column)])))
        else:
            out.append(notes.section("name not held", name=name, closest=_closest(ws, name)))
    if (first := table_holding_all(request, ws)) is not None:
        out.append(notes.section("one table holds all", table=first))
    lines = [line for line in _document_lines(ws, holders) if not any(line.endswith(q) for q in quoted)]
    return out + _missing_values(ws, request) + lines


def documented_column(ws: WorkspaceProfile, name: str) -> tuple[str, str, str] | None:
    """(document, column, its item) for the first document item that writes `name` in backticks beside a column
    some table holds — a memo naming the column that holds a quantity ("The column `hosp_adm` holds
    `hospitalisations`.") — or None. Said as "no table has a column by this name" with the memo lines apart, the
    1.5B model correlated the wrong column (generated-v1: 6 of 43 questions write such a name)."""
    held = {c.name for t in ws.tables for c in t.columns} - {name}
    mark = f"`{name}`"
    for doc in ws.documents:
        for item in list_items(doc.first_lines):
            if mark in item and (columns := [c for c in re.findall(r"`([^`\n]+)`", item) if c in held]):
                return doc.file, columns[0], item
    return None


def table_holding_all(request: str, ws: WorkspaceProfile) -> str | None:
    """The table (its parts' labels, comma-separated, for a table in parts) that holds every column of two or more
    the request writes, or None: that table alone answers, and a merge only adds rows that can fail to match.
    None too when the request writes a name no table holds (other than a kind of row, "the `students` records"):
    that column may be another table's under another name (generated-v1's `exam_score` is exam_board.xlsx's
    `score`, a memo says), and "compute from sis.csv alone" sent the model away from it."""
    whole = {label: ", ".join(g.labels) for g in table_parts(ws.tables) for label in g.labels}
    rows = set(_ROWS.findall(request))
    wholes = []
    for name in request_names(request)[:MAX_NAMES]:
        if held := _holders(ws, name):
            wholes.append({whole.get(t.label, t.label) for t in held})
        elif name not in rows:
            return None
    common = set.intersection(*wholes) if len(wholes) >= 2 else set()
    if not common:
        return None
    return next(whole.get(t.label, t.label) for t in ws.tables if whole.get(t.label, t.label) in common)
