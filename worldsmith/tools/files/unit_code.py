"""Code that makes good a unit change a note on the files documents, before the model's first cell.

A data room's memo can say a column changed unit from a date ("From 2024-07-01 (by this export's dates), `amount` is
recorded in USD cents instead of USD (1 USD = 100.0 USD cents)"). A question asked in the old unit then needs the
rows from that date brought back to it. Told so in words (the task turn's notes), the 1.5B analyst computed over
the two units mixed; shown the conversion as a line to write, it wrote `df = df.loc[mask, col] /= k` or divided the
whole column (0 of 6 generated-v1 questions right against 1 of 6 without it). So, as for the join
(`join_code.py`), the session runs the code for it: `df` is the table (or the join) with the column in one unit,
and the task turn shows the code and says it has run.

The change is applied only where it is unambiguous: the note's item parses (`names.unit_change`) with a factor
between the two units it names, the request writes the column, the table holding it has one date column and a
numeric column by that name, some of its dates fall on or after the change, the request does not ask in the
new unit (it names the new unit and not the old one), nor for the values as recorded (an evolution task whose
finding was computed over the file as it is says "no value is converted"). The executor puts the same code after a join it writes
(agents/executor.py `prepare_join`), so an evolution node's script computes in one unit too.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from worldsmith.prompts import template
from worldsmith.tools.files.loadcall import py_str
from worldsmith.tools.files.models import TableProfile, WorkspaceProfile
from worldsmith.tools.files.names import file_items, names_file, table_holding_all, unit_change
from worldsmith.tools.files.parts import TableParts, table_parts

TEMPLATE = "unit_code.md"


@dataclass(frozen=True)
class UnitFix:
    """Rows of `df` dated on or after `since` (by its column `when`) hold `column` in `new`; `factor` (as the note
    writes it) brings them back to `old`: divided by it, or multiplied when the note writes 1 new = k old."""

    column: str
    when: str
    since: str
    new: str
    old: str
    factor: str
    multiply: bool
    doc: str
    item: str

    def code(self) -> str:
        t = template(TEMPLATE)
        return t.section("multiply" if self.multiply else "divide", column=py_str(self.column),
                         when=py_str(self.when), since=py_str(self.since), factor=self.factor, new=self.new,
                         old=self.old)

    def words(self) -> str:
        """What the task turn says was done (prompts/unit_code.md `said`)."""
        return template(TEMPLATE).section("said", column=self.column, old=self.old, since=self.since, doc=self.doc,
                                          new=self.new)


@dataclass(frozen=True)
class UnitPlan:
    """The unit changes `df` is brought back from, after `load` made it (None: the join made `df`)."""

    fixes: tuple[UnitFix, ...]
    load: str | None = None
    table: str = ""  # what `load` loads: a table's label, or its parts' labels

    def code(self) -> str:
        lines = [template(TEMPLATE).section("load", load=self.load)] if self.load else []
        return "\n".join(lines + [f.code() for f in self.fixes])

    def words(self) -> str:
        """The clause the task turn adds after saying what `df` holds."""
        return template(TEMPLATE).section("with", changes="; ".join(f.words() for f in self.fixes))


#: a parsed note item (`names.unit_change`): column, date, unit now, unit before, divisor ("k" or "1/k")
Change = tuple[str, str, str, str, str]


def documented_changes(paths: Sequence[Path], files: Collection[str]) -> list[tuple[str, str, Change]]:
    """(document, item, its parsed change) for every note item on `files` (under `paths`) that says a column
    changed unit from a date and gives the factor between the two units it names. The analyst's setup and the
    validator's mixed-units rule read the notes through it."""
    out = []
    for doc, item in file_items(list(paths), files):
        change = unit_change(item)
        if change is not None and change[4] is not None:
            out.append((doc, item, (change[0], change[1], change[2], change[3], change[4])))
    return out


def ends_before(table: TableProfile, since: str) -> bool:
    """Whether every date column of a table (as profiled) ends before the ISO date `since` (False without one)."""
    ends = [str(c.max)[:10] for c in table.columns if c.semantic_type == "datetime" and c.max is not None]
    return bool(ends) and all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", e) and e < since for e in ends)


#: a request that asks for the values as the files record them (an evolution task over a finding computed so:
#: `evolution/spec_check.AS_RECORDED`, "… as recorded (repeated records are kept, no value is converted)")
_AS_RECORDED = re.compile(r"\bno values? (?:is|are) converted\b|\bas (?:they are )?recorded\b", re.IGNORECASE)


def _word(text: str, name: str) -> bool:
    """Whether `text` writes `name`, in backticks or as a plain word (an evolution goal writes no backticks)."""
    return re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", text) is not None


def _asked_in(text: str, new: str, old: str) -> bool:
    """Whether `text` names the unit `new` and not `old` (outside the mentions of `new`: "USD cents" holds "USD")."""
    def mention(unit: str) -> re.Pattern[str]:
        return re.compile(rf"(?<![\w/]){re.escape(unit)}(?![\w/])", re.IGNORECASE)
    return mention(new).search(text) is not None and mention(old).search(mention(new).sub(" ", text)) is None


#: one side of the frame: its tables, each with its columns renamed to the frame's names ({} for none)
_Side = Sequence[tuple[TableProfile, Mapping[str, str]]]


def _frame_columns(sides: Sequence[_Side]) -> dict[str, list[tuple[TableProfile, str]]]:
    """`df`'s column name → the (table, its own column name) pairs it comes from. A later side's column that an
    earlier side also has is left out: the merge gives it a suffix."""
    out: dict[str, list[tuple[TableProfile, str]]] = {}
    for side in sides:
        names: dict[str, list[tuple[TableProfile, str]]] = {}
        for table, renames in side:
            for c in table.columns:
                names.setdefault(renames.get(c.name, c.name), []).append((table, c.name))
        for name, held in names.items():
            if name not in out:
                out[name] = held
    return out


def _fix(change: Change, doc: str, item: str, request: str,
         frame: Mapping[str, list[tuple[TableProfile, str]]], side: _Side,
         matched: Mapping[str, str]) -> UnitFix | None:
    """The fix `change` (a note's item, parsed) calls for in the frame, or None. `matched`: a date column of the
    lookup → the facts' date column the join matched it on (a join by id and date)."""
    column, since, new, old, divisor = change
    if column not in frame:
        return None
    if _asked_in(request, new, old):
        return None  # asked in the new unit
    held = frame[column]
    if not all(next((c.semantic_type for c in t.columns if c.name == own), None) == "numeric" for t, own in held):
        return None
    if all(ends_before(t, since) for t, _ in held):
        return None
    dates = {renames.get(c.name, c.name) for t, renames in side for c in t.columns if c.semantic_type == "datetime"}
    if len(dates) != 1:
        return None  # no date to split the rows by, or several
    when = dates.pop()
    if frame.get(when, [(None, "")])[0][0] not in [t for t, _ in side]:  # the frame's column by that name is another
        when = matched.get(when, "")  # side's: the same dates when the join matched the rows on them
        if not when:
            return None
    return UnitFix(column, when, since, new, old, divisor.removeprefix("1/"), divisor.startswith("1/"),
                   doc, item)


def plan_units(ws: WorkspaceProfile, paths: Sequence[Path], request: str, join: Any = None) -> UnitPlan | None:
    """The unit changes to make good in `df` before the model's first cell, or None. `join`: the join the session
    runs (`join_code.JoinPlan`); without one, `df` is loaded here from the one table the request asks about (the
    table holding every column it writes, or the only table it names by file)."""
    if _AS_RECORDED.search(request):
        return None
    load, table, matched = None, "", {}
    if join is not None:
        if join.dated:  # the facts' date column already carries the frame's name (a stack's first part's)
            matched = {join.lwhen: join.fwhen}
        renames = join.parts.renames if join.parts is not None else {}
        sides: list[_Side] = [[(t, renames.get(t.label, {})) for t in join.facts_tables], [(join.lookup, {})]]
    else:
        group = _asked_table(ws, request)
        if group is None:
            return None
        load = group.concat() if len(group.tables) > 1 else group.tables[0].load
        if not load:
            return None
        table = ", ".join(group.labels)
        sides = [[(t, group.renames.get(t.label, {})) for t in group.tables]]
    frame = _frame_columns(sides)
    side_of = {t.label: side for side in sides for t, _ in side}
    fixes: dict[str, UnitFix] = {}
    for side in sides:  # a note counts for the columns of the files it is about
        files = {PurePosixPath(t.file).name for t, _ in side}
        for doc, item, change in documented_changes(paths, files):
            if (not _word(request, change[0]) or change[0] in fixes
                    or change[0] not in frame
                    or side_of[frame[change[0]][0][0].label] is not side):
                continue
            if (fix := _fix(change, doc, item, request, frame, side, matched)) is not None:
                fixes[fix.column] = fix
    if not fixes:
        return None
    return UnitPlan(tuple(fixes.values()), load, table)


def _asked_table(ws: WorkspaceProfile, request: str) -> TableParts | None:
    """The one table (a table in parts counts as one) the request is about: the one holding every column it writes,
    else the only one it names by file; None when neither picks one."""
    groups = table_parts(ws.tables)
    group_of = {label: g for g in groups for label in g.labels}

    def unit(t: TableProfile) -> TableParts:
        return group_of.get(t.label) or TableParts((t,), {})

    if (held := table_holding_all(request, ws)) is not None:
        return next(unit(t) for t in ws.tables if held in (t.label, ", ".join(unit(t).labels)))
    named = {unit(t).labels: unit(t) for t in ws.tables if names_file(request, PurePosixPath(t.file).name)}
    return next(iter(named.values())) if len(named) == 1 else None
