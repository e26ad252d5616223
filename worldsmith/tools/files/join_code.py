"""Code that joins two tables a text names, written from the profile: each table's exact load call, a key made the
same way on both sides (the number in the id when the tables spell the ids differently) and a many-to-one merge.
Two tables of one grain — a row per entity and period in each (a ledger and a headcount report by branch and
month) — link by the id and the date together: neither id is unique alone, so the key is the pair, the dates read
as dates (`2023/01/02` in one export is `2023-01-02` in the other).

A 1.5B model asked for a join across two tables wrote `merge(left_on=…, right_on=…)` with one table's column on both
sides, or the facts' key looked up in the lookup table (`KeyError: 'acct_ref'` in every join node of an embedded
evolution run), even with each table's own key call in the profile. The executor runs this code once and, when it
matches rows, puts it at the top of the model's script, so the model writes only the analysis of `df`.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from worldsmith.prompts import template
from worldsmith.tools.files.loadcall import py_str
from worldsmith.tools.files.models import CandidateJoin, TableProfile, WorkspaceProfile
from worldsmith.tools.files.names import names_file, table_holding_all
from worldsmith.tools.files.parts import TableParts, table_parts

TEMPLATE = "join_code.md"
#: names the joined code must not take for a table's frame
_TAKEN = {"df", "pd", "np", "json", "gzip", "sqlite3", "plt"}


@dataclass(frozen=True)
class JoinPlan:
    """Many rows of `facts` (its key `fkey` repeats) each matched to one row of `lookup` (its key `lkey` is unique)."""

    facts: TableProfile
    fkey: str
    lookup: TableProfile
    lkey: str
    spelled: bool  # the tables spell the ids differently: match them by the number in the id
    parts: TableParts | None = None  # the facts are parts of one table (yearly files): stacked, then joined
    fwhen: str | None = None  # with `lwhen`: the date columns that complete the key (rows match on id and date)
    lwhen: str | None = None

    @property
    def dated(self) -> bool:
        """The rows match on the id and a date together (`fwhen`, `lwhen`): one row per id and period each side."""
        return self.fwhen is not None and self.lwhen is not None

    @property
    def facts_tables(self) -> tuple[TableProfile, ...]:
        return self.parts.tables if self.parts is not None else (self.facts,)

    @property
    def facts_label(self) -> str:
        return " + ".join(t.label for t in self.facts_tables)

    def names(self) -> tuple[str, str]:
        """Python names for the two frames: the table's (sheet) name or the file's stem, made an identifier (the
        stem without its digits for stacked parts: orders_2023.csv + orders_2024.csv → `orders`)."""
        out = []
        for t in (self.facts, self.lookup):
            base = t.table or Path(t.file).name.split(".")[0]
            if t is self.facts and self.parts is not None:
                base = re.sub(r"[_\-\s]*\d+[_\-\s]*", "_", base).strip("_") or base
            name = re.sub(r"\W+", "_", base).strip("_").lower() or "table"
            if name[0].isdigit() or keyword.iskeyword(name) or name in _TAKEN or name in out:
                name = f"{'facts' if not out else 'lookup'}_{name}"
            out.append(name)
        return out[0], out[1]

    def code(self, *, cell: bool = False) -> str:
        """The whole join as a script: imports, a comment saying how rows match, both loads, the keys, `df` = the
        merge, one line printed. `cell`: the loads onwards only, for a session whose prelude imported the modules
        (the analyst's), where the comment would repeat what the task turn says around the cell."""
        t = template(TEMPLATE)
        facts, lookup = self.names()
        key = "number key" if self.spelled else "text key"
        keys = "\n".join(
            t.section(key, frame=frame, column=py_str(column))
            + (("\n" + t.section("date key", frame=frame, column=py_str(when))) if when is not None else "")
            for frame, column, when in ((facts, self.fkey, self.fwhen), (lookup, self.lkey, self.lwhen)))
        # a column written the same way on both sides: the facts' copy is enough (else `site` and `site_sites`);
        # a date column of one name is dropped from the lookup however its dates are written (they matched)
        same = [self.lkey] if not self.spelled and self.fkey == self.lkey else []
        same += [self.lwhen] if self.dated and self.fwhen == self.lwhen else []
        drop = t.section("drop key", columns=_py_list(same)) if same else ""
        on = _py_list(["_key", "_when"]) if self.dated else py_str("_key")
        subset = ["_key", "_when"] if self.dated else ["_key"]
        body = t.section("body", drop=drop, facts=facts, lookup=lookup, facts_load=self._facts_load(),
                         lookup_load=_load(self.lookup), keys=keys, suffix=py_str(f"_{lookup}"), on=on,
                         subset=_py_list(subset), helpers=_py_list([*subset, "_matched"]),
                         facts_label=py_str(self.facts_label), lookup_label=py_str(self.lookup.label))
        if cell:
            return body
        fkey, lkey = (f"{self.fkey}, {self.fwhen}", f"{self.lkey}, {self.lwhen}") if self.dated else (self.fkey,
                                                                                                      self.lkey)
        how = t.section("how number" if self.spelled else "how text", fkey=fkey, lkey=lkey,
                        facts_label=self.facts_label, lookup_label=self.lookup.label)
        if self.dated:
            how += t.section("how dated")
        return "\n\n".join([t.section("imports"), t.section("comment", how=how) + "\n" + body])

    def _facts_load(self) -> str:
        if self.parts is None:
            return _load(self.facts)
        stacked = self.parts.concat()
        if stacked is None:
            raise ValueError(f"a part of {self.facts_label} has no load call in its profile")
        return stacked


def _py_list(items: list[str]) -> str:
    return "[" + ", ".join(py_str(x) for x in items) + "]"


def _load(t: TableProfile) -> str:
    if not t.load:
        raise ValueError(f"table {t.label} has no load call in its profile")
    return t.load


def lookup_join(j: CandidateJoin, tables: Mapping[str, TableProfile], part_of: Mapping[str, int]) -> JoinPlan | None:
    """Link `j` as a many-to-one join (the facts' key repeats, the lookup's is unique), or None: one of its tables
    is not in `tables` (by label), both keys or neither are unique, or the two tables are parts of one table
    (`part_of`: label -> part group; parts are stacked, never joined)."""
    left, right = tables.get(j.left.table_label), tables.get(j.right.table_label)
    if left is None or right is None or j.left_unique == j.right_unique:
        return None
    if part_of.get(left.label, -1) == part_of.get(right.label, -2):
        return None
    spelled = j.spellings is not None
    if j.right_unique:
        return JoinPlan(left, j.left.column, right, j.right.column, spelled)
    return JoinPlan(right, j.right.column, left, j.left.column, spelled)


def _dates(t: TableProfile) -> list[str]:
    return [c.name for c in t.columns if c.semantic_type == "datetime"]


def dated_join(j: CandidateJoin, tables: Mapping[str, TableProfile], part_of: Mapping[str, int]) -> JoinPlan | None:
    """Link `j` as a join on the id and a date together, or None. Both ids repeat (else `lookup_join`), and the
    facts are unique on their id and one date column (a candidate key of the profile: one row per entity and
    period) while the lookup has a date column of that name, or only one. The lookup's repeated rows are dropped
    (the first counts), so each row of the facts gets at most one. Of two sides that both qualify, the larger is
    the facts."""
    left, right = tables.get(j.left.table_label), tables.get(j.right.table_label)
    if left is None or right is None or j.left_unique or j.right_unique:
        return None
    if part_of.get(left.label, -1) == part_of.get(right.label, -2):
        return None
    sides = sorted(((left, j.left.column, right, j.right.column), (right, j.right.column, left, j.left.column)),
                   key=lambda side: -side[0].n_rows)
    for facts, fkey, lookup, lkey in sides:
        fwhen = next((k[1 - k.index(fkey)] for k in facts.candidate_keys if len(k) == 2 and fkey in k
                      and k[1 - k.index(fkey)] in _dates(facts)), None)
        dates = _dates(lookup)
        lwhen = fwhen if fwhen in dates else (dates[0] if len(dates) == 1 else None)
        if fwhen is not None and lwhen is not None:
            return JoinPlan(facts, fkey, lookup, lkey, j.spellings is not None, fwhen=fwhen, lwhen=lwhen)
    return None


def plan_join(ws: WorkspaceProfile, text: str) -> JoinPlan | None:
    """The join `text` asks for: it names the files of exactly two of the profile's tables, which the profile links
    by a key unique on one side only, or by an id and a date together (`dated_join`), and not as parts of one
    table. Of several such links, a single key before an id and a date, then the one whose two column names the
    text writes, then the one with the largest overlap. None when there is no such join.

    Tables that are parts of one table (orders_2023.csv, orders_2024.csv) count as one: named with a table they
    link to, the parts are stacked (`pd.concat`, renamed columns renamed back) and the stack is joined. v11's
    composition named two yearly order files and, through the segment column, crm.xlsx: three tables, so no join
    was written, and the model's own merge failed in every attempt.

    No join either when one table holds every column the text writes (`names.table_holding_all`): the task turn
    then says to compute from that table alone. generated-v1's "Other columns used: `period` in
    data/surveillance.csv.gz, data/hospital.sqlite" named two tables for a mean of one of them."""
    named = [t for t in ws.tables if names_file(text, Path(t.file).name)]
    if len(named) < 2 or table_holding_all(text, ws) is not None:  # one table holds every column the text writes
        return None
    groups = table_parts(ws.tables)  # over the whole room: the profile keeps a family's links on one part only
    group_of = {label: i for i, g in enumerate(groups) for label in g.labels}
    units = {group_of.get(t.label, t.label) for t in named}
    if len(units) != 2:
        return None
    tables = {t.label: t for t in ws.tables if group_of.get(t.label, t.label) in units}
    named_in = {u: sum(group_of.get(t.label, t.label) == u for t in named) for u in units}
    # the lookup is a named table alone in its unit (a stack of lookups is not joined); the facts may be any part
    links = [(j, plan) for j in ws.joins
             if {j.left.table_label, j.right.table_label} <= set(tables) and (j.overlap_ratio or 0) > 0
             and (plan := lookup_join(j, tables, group_of) or dated_join(j, tables, group_of)) is not None
             and plan.lookup in named and named_in[group_of.get(plan.lookup.label, plan.lookup.label)] == 1]
    if not links:
        return None

    def written(j: CandidateJoin) -> bool:
        return all(re.search(rf"(?<!\w){re.escape(c)}(?!\w)", text) for c in (j.left.column, j.right.column))

    best = max(links, key=lambda link: (not link[1].dated, written(link[0]), link[0].overlap_ratio or 0))[1]
    if best.facts.label not in group_of:
        return best
    group = groups[group_of[best.facts.label]]
    renamed = group.renames.get(best.facts.label, {})  # the first part's names for the key columns
    key, when = renamed.get(best.fkey, best.fkey), renamed.get(best.fwhen, best.fwhen) if best.dated else None
    members = [t for t in group.tables if t in named]
    if len(members) == 1:  # one part named: that file alone, under its own names for the key columns
        own = {v: k for k, v in group.renames.get(members[0].label, {}).items()}
        return replace(best, facts=members[0], fkey=own.get(key, key),
                       fwhen=own.get(when, when) if when is not None else None)
    parts = TableParts(tuple(members), {t.label: group.renames[t.label] for t in members if t.label in group.renames})
    return replace(best, facts=members[0], fkey=key, fwhen=when, parts=parts)
