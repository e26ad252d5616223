"""Memos: the context an analyst needs, written from the ledger as deterministic sentences.

The same module holds the sentence templates and their parsers, so the auditor (and a careful
analyst) can read back every documented change: date formats, posting delays, unit changes,
relabelled categories, renamed columns and the calendar of events.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from worldsmith.core.world_contract import ObservationSystem, WorldContract
from .defects import LedgerEntry


@dataclass(frozen=True)
class DateFormatNote:
    fmt: str


@dataclass(frozen=True)
class DelayNote:
    days: int


@dataclass(frozen=True)
class UnitNote:
    variable: str
    since: dt.date
    factor: float
    from_unit: str
    to_unit: str


@dataclass(frozen=True)
class RecodeNote:
    variable: str
    since: dt.date | None
    new_to_old: dict[str, str]


@dataclass(frozen=True)
class RenameNote:
    old: str
    new: str
    from_year: int | None


@dataclass(frozen=True)
class SplitNote:
    first: str
    last: str


@dataclass(frozen=True)
class EventNote:
    name: str
    date: dt.date


Note = DateFormatNote | DelayNote | UnitNote | RecodeNote | RenameNote | SplitNote | EventNote
_PART_WORD = {"xlsx": "sheet", "sqlite": "table"}


def _labels(mapping: dict[str, str]) -> str:
    return ", ".join(f'"{new}" means "{old}"' for old, new in mapping.items())


def _sentence(e: LedgerEntry, s: ObservationSystem, c: WorldContract, posted: bool = False) -> str | None:
    """`posted`: the export's dates are posting dates (a documented delay), so a change "from" a date says which
    dates it counts by (the export's own: the defects apply to the observed rows)."""
    p = e.params
    if e.defect == "id_spelling":
        return (f"Identifiers are written like `{e.example_after}` in this export "
                f"(the same record is `{e.example_before}` elsewhere).")
    if e.defect == "date_format":
        return f"Dates are written like `{e.example_after}` (format `{p['format']}`)."
    if e.defect == "delay":
        jitter = f", plus up to {p['jitter_days']} more day(s) of processing" if p["jitter_days"] else ""
        if p["days"] > 0:
            return f"Dates are posting dates: a record is posted {p['days']} day(s) after the event{jitter}."
        return f"Dates are posting dates and can lag the event by up to {p['jitter_days']} day(s)."
    if e.defect == "unit_drift":
        by = " (by this export's dates)" if posted else ""
        return (f"From {p['since']}{by}, `{p['variable']}` is recorded in {p['to_unit']} instead of {p['from_unit']} "
                f"(1 {p['from_unit']} = {float(p['factor'])!r} {p['to_unit']}).")
    if e.defect == "recode":
        if p.get("since"):
            by = " (by this export's dates)" if posted else ""
            return f"From {p['since']}{by}, `{p['variable']}` uses new labels: {_labels(p['mapping'])}."
        return f"This export labels `{p['variable']}` its own way: {_labels(p['mapping'])}."
    if e.defect == "rename":
        if p["from_partition"] == 0:
            return f"The column `{p['new_name']}` holds `{p['column']}`."
        year = c.timeline.start.year + p["from_partition"]
        word = _PART_WORD.get(s.format, "files" if s.partition == "quarter" else "file")
        return f"From the {year} {word} onward, `{p['column']}` is called `{p['new_name']}`."
    if e.defect == "duplicates":
        keys = " + ".join(f"`{k}`" for k in e.columns)
        return f"The export can repeat a record; when the same {keys} appears more than once, the first row counts."
    if e.defect == "split_column":
        return f"Names are given in two columns, `{p['into'][0]}` and `{p['into'][1]}`."
    if e.defect == "cancellations":
        return "Cancelled records are not in this export: it holds completed records only."
    return None


def system_memo(s: ObservationSystem, entries: list[LedgerEntry], c: WorldContract, files: list[str]) -> str | None:
    """Markdown memo for one system, or None when nothing about it needs explaining."""
    mine = [e for e in entries if e.documented and e.system == s.name]
    posted = any(e.defect == "delay" for e in mine)
    lines = [x for e in mine if (x := _sentence(e, s, c, posted))]
    if not lines:
        return None
    head = [f"# Notes on the `{s.name}` export", ""]
    if s.description:
        head += [s.description, ""]
    head += ["Files: " + ", ".join(f"`{f}`" for f in files) + ".", ""]
    return "\n".join(head + [f"- {x}" for x in lines]) + "\n"


def events_memo(c: WorldContract) -> str | None:
    if not c.events:
        return None
    lines = ["# Calendar of events", "", f"Context for {c.persona.organisation}, kept by {c.persona.name} "
             f"({c.persona.role}).", ""]
    for ev in sorted(c.events, key=lambda e: (e.date, e.name)):
        lines.append(f"- {ev.date.isoformat()}: **{ev.name}** - {ev.description}")
    return "\n".join(lines) + "\n"


_RE = {
    "date": re.compile(r"\(format `([^`]+)`\)"),
    "delay": re.compile(r"posted (\d+) day\(s\) after the event"),
    "unit": re.compile(r"From (\d{4}-\d{2}-\d{2})(?: \(by this export's dates\))?, `([^`]+)` is recorded in (.+?) "
                       r"instead of (.+?) "
                       r"\(1 .+? = ([0-9.eE+-]+) .+?\)\."),
    "recode_since": re.compile(r"From (\d{4}-\d{2}-\d{2})(?: \(by this export's dates\))?, `([^`]+)` uses new labels: "
                               r"(.*)\.$"),
    "recode_all": re.compile(r"This export labels `([^`]+)` its own way: (.*)\.$"),
    "label": re.compile(r'"([^"]*)" means "([^"]*)"'),
    "rename_all": re.compile(r"The column `([^`]+)` holds `([^`]+)`\."),
    "rename_from": re.compile(r"From the (\d{4}) (?:files?|sheet|table) onward, `([^`]+)` is called `([^`]+)`\."),
    "split": re.compile(r"Names are given in two columns, `([^`]+)` and `([^`]+)`\."),
    "event": re.compile(r"^- (\d{4}-\d{2}-\d{2}): \*\*([^*]+)\*\*"),
}


def parse_memo(text: str) -> list[Note]:
    """Every machine-actionable statement in a memo, in order."""
    out: list[Note] = []
    for raw in text.splitlines():
        line = raw.strip()
        if m := _RE["event"].match(line):
            out.append(EventNote(m.group(2), dt.date.fromisoformat(m.group(1))))
            continue
        line = line[2:] if line.startswith("- ") else line
        if m := _RE["date"].search(line):
            out.append(DateFormatNote(m.group(1)))
        elif m := _RE["delay"].search(line):
            out.append(DelayNote(int(m.group(1))))
        elif m := _RE["unit"].match(line):
            out.append(UnitNote(m.group(2), dt.date.fromisoformat(m.group(1)), float(m.group(5)), m.group(4),
                                m.group(3)))
        elif m := _RE["recode_since"].match(line):
            labels = dict(_RE["label"].findall(m.group(3)))
            out.append(RecodeNote(m.group(2), dt.date.fromisoformat(m.group(1)), labels))
        elif m := _RE["recode_all"].match(line):
            out.append(RecodeNote(m.group(1), None, dict(_RE["label"].findall(m.group(2)))))
        elif m := _RE["rename_all"].match(line):
            out.append(RenameNote(old=m.group(2), new=m.group(1), from_year=None))
        elif m := _RE["rename_from"].match(line):
            out.append(RenameNote(old=m.group(2), new=m.group(3), from_year=int(m.group(1))))
        elif m := _RE["split"].match(line):
            out.append(SplitNote(m.group(1), m.group(2)))
    return out


def undocumented_notes(s: ObservationSystem, c: WorldContract) -> list[Note]:
    """What a memo would have said about the system's undocumented defects (`memo: false`): the auditor knows them
    from the contract, a solver has to find them in the data."""
    out: list[Note] = []
    for d in s.defects:
        if getattr(d, "memo", True):
            continue
        if d.type == "unit_drift":
            out.append(UnitNote(d.variable, d.since, d.factor, d.from_unit, d.to_unit))
        elif d.type == "recode":
            out.append(RecodeNote(d.variable, d.since, {new: old for old, new in d.mapping.items()}))
        elif d.type == "rename":
            out.append(RenameNote(old=d.column, new=d.new_name,
                                  from_year=c.timeline.start.year + d.from_partition if d.from_partition else None))
        elif d.type == "delay" and d.days:
            out.append(DelayNote(d.days))
        elif d.type == "split_column":
            out.append(SplitNote(d.into[0], d.into[1]))
    return out  # duplicates are removed and cancellations need nothing undone, memo or not


def memo_system(text: str) -> str | None:
    m = re.search(r"^# Notes on the `([^`]+)` export", text, re.M)
    return m.group(1) if m else None
