"""The auditor's reconciliation: observed files + memos (+ the contract for *what* to look for) -> tables.

It never reads `.truth/`. It plans, per system, which files/sheets/tables to read, how to map
columns back (memo-declared renames, split names, foreign keys found by their id pattern), and the
kernel calls that undo documented changes (date formats, unit changes, relabelling, posting delays),
normalise id spellings and drop repeated records. A plan is data: the auditor executes it and the
reference-solution generator prints it as code, so both do exactly the same thing.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from . import kernels as K
from worldsmith.core.world_contract import ObservationSystem, WorldContract
from .memos import (DateFormatNote, DelayNote, EventNote, Note, RecodeNote, RenameNote, SplitNote, UnitNote,
                    memo_system, parse_memo, undocumented_notes)
from .observe import ISO, system_keys
from .writers import EXT

FK_MATCH = 0.9
PART_SUFFIX = r"(?:_(\d{4})(?:Q[1-4])?)?"  # none, a year (_2024) or a quarter (_2024Q1); group 1 = the year


@dataclass
class Step:
    fn: str
    kwargs: dict[str, Any]


@dataclass
class PartPlan:
    path: str  # relative to the world directory
    fmt: str
    part: str | None
    year: int | None  # of a year or quarter partition (parts of one year stay in file/sheet order)
    steps: list[Step] = field(default_factory=list)  # renames / name joins per part
    columns: set[str] = field(default_factory=set)  # canonical columns available after the steps


@dataclass
class SourcePlan:
    system: str
    entity: str
    parts: list[PartPlan]
    steps: list[Step] = field(default_factory=list)


@dataclass
class ReconcilePlan:
    sources: list[SourcePlan]
    keys: dict[str, list[str]]  # entity -> row key columns
    log: list[str] = field(default_factory=list)  # what was reconciled, in words (for WORLD.md)
    issues: list[str] = field(default_factory=list)  # what could not be resolved
    events: dict[str, str] = field(default_factory=dict)  # memo calendar: name -> ISO date
    unit_notes: dict[str, list[UnitNote]] = field(default_factory=dict)

    def entity_sources(self, entity: str) -> list[SourcePlan]:
        return [s for s in self.sources if s.entity == entity]


def read_memos(world_dir: Path) -> tuple[dict[str, list[Note]], list[EventNote]]:
    per_system: dict[str, list[Note]] = {}
    events: list[EventNote] = []
    for path in sorted((world_dir / "data" / "memos").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        notes = parse_memo(text)
        events += [n for n in notes if isinstance(n, EventNote)]
        name = memo_system(text)
        if name is not None:
            per_system.setdefault(name, []).extend(n for n in notes if not isinstance(n, EventNote))
    return per_system, events


def _sheet_names(path: Path) -> list[str]:
    """Sheet names straight from xl/workbook.xml (opening the workbook would parse every sheet)."""
    import zipfile

    with zipfile.ZipFile(path) as z:
        xml = z.read("xl/workbook.xml").decode("utf-8")
    return [html.unescape(n) for n in re.findall(r'<(?:\w+:)?sheet\b[^>]*\bname="([^"]*)"', xml)]


def find_parts(world_dir: Path, s: ObservationSystem) -> list[PartPlan]:
    """Files (or sheets / tables) of a system, oldest partition first."""
    data = world_dir / "data"
    ext = EXT[s.format]
    if s.format in ("xlsx", "sqlite"):
        path = data / f"{s.stem}.{ext}"
        if not path.exists():
            return []
        if s.format == "xlsx":
            names = _sheet_names(path)
        else:
            names = K.read_table(path, "sqlite", "sqlite_master")["name"].tolist()
        out = []
        for n in names:
            m = re.fullmatch(re.escape(s.name) + PART_SUFFIX, n)
            if m:
                out.append(PartPlan(f"data/{path.name}", s.format, n, int(m.group(1)) if m.group(1) else None))
        return sorted(out, key=lambda p: p.year or 0)
    out = []
    for path in sorted(data.iterdir()):
        m = re.fullmatch(re.escape(s.stem) + PART_SUFFIX + r"\." + re.escape(ext), path.name)
        if m:
            out.append(PartPlan(f"data/{path.name}", s.format, None, int(m.group(1)) if m.group(1) else None))
    return sorted(out, key=lambda p: p.year or 0)


class FrameCache:
    """Reads each observed table once (the plan builder needs headers and id values)."""

    def __init__(self, world_dir: Path):
        self.world_dir = world_dir
        self.frames: dict[tuple[str, str | None], pd.DataFrame] = {}

    def get(self, part: PartPlan) -> pd.DataFrame:
        key = (part.path, part.part)
        if key not in self.frames:
            if part.fmt == "xlsx":  # one pass over the workbook instead of one per sheet
                for name, df in K.read_sheets(self.world_dir / part.path).items():
                    self.frames[(part.path, name)] = df
            else:
                self.frames[key] = K.read_table(self.world_dir / part.path, part.fmt, part.part)
        return self.frames[key]


def _plan_part(c: WorldContract, s: ObservationSystem, part: PartPlan, notes: list[Note], expected: list[str],
               cache: FrameCache, plan: ReconcilePlan) -> None:
    df = cache.get(part)
    cols = list(df.columns)
    renames: dict[str, str] = {}
    for n in notes:
        if isinstance(n, RenameNote) and n.new in cols and (n.from_year is None or (part.year or 0) >= n.from_year):
            renames[n.new] = n.old
    if renames:
        part.steps.append(Step("rename_columns", {"mapping": renames}))
        plan.log.append(f"`{part.path}`{' sheet ' + part.part if part.part else ''}: renamed columns back "
                        + ", ".join(f"`{a}` -> `{b}`" for a, b in renames.items()))
    present = {renames.get(x, x) for x in cols}
    for n in notes:
        if isinstance(n, SplitNote) and n.first in cols and n.last in cols:
            missing_text = [v for v in expected if v not in present and v in c.nodes() and c.node(v).kind == "text"]
            if missing_text:
                part.steps.append(Step("join_name", {"first": n.first, "last": n.last, "into": missing_text[0]}))
                plan.log.append(f"`{part.path}`: `{n.first}` + `{n.last}` joined back into `{missing_text[0]}`")
                present |= {missing_text[0]}
    e = c.entity(s.entity)
    if e.parent is not None:
        p = c.entity(e.parent)
        if p.key not in present:
            unknown = [x for x in cols if renames.get(x, x) not in expected]
            rates = {x: K.id_match_rate(df[x], p.id_prefix, str(p.alias)) for x in unknown}
            best = max(rates, key=lambda k: rates[k], default=None)
            if best is not None and rates[best] >= FK_MATCH:
                part.steps.append(Step("rename_columns", {"mapping": {best: p.key}}))
                present.add(p.key)
                plan.log.append(f"`{part.path}`{' sheet ' + part.part if part.part else ''}: column `{best}` holds "
                                f"{p.name} ids ({rates[best]:.0%} match); used as `{p.key}`")
    part.columns = present
    for x in expected:
        if x not in present:
            where = part.path + (f" / {part.part}" if part.part else "")
            plan.issues.append(f"{s.name}: column `{x}` not found in {where}")


def _source_steps(c: WorldContract, s: ObservationSystem, notes: list[Note], plan: ReconcilePlan,
                  have: set[str]) -> list[Step]:
    e = c.entity(s.entity)
    keys, ids = system_keys(c, s)
    steps = [Step("normalise_ids", {"column": col, "prefix": pre, "alias": alias})
             for col, (pre, alias) in ids.items() if col in have]
    time = e.time_column if e.time_column in have else None
    fmt = next((n.fmt for n in notes if isinstance(n, DateFormatNote)), ISO)
    if time:
        steps.append(Step("parse_dates", {"column": time, "fmt": fmt}))
    kinds = {v: c.node(v).kind for v in s.variables if v in have}
    nums = [v for v, k in kinds.items() if k in ("numeric", "count", "binary")]
    if nums:
        steps.append(Step("to_numeric", {"columns": nums}))
    labels = [v for v, k in kinds.items() if k in ("categorical", "text")]
    if labels:
        steps.append(Step("strip_labels", {"columns": labels}))
    for n in notes:
        if isinstance(n, UnitNote) and n.variable in kinds and time:
            steps.append(Step("undo_unit_change", {"column": n.variable, "date_column": time,
                                                   "since": n.since.isoformat(), "factor": n.factor}))
            plan.unit_notes.setdefault(n.variable, []).append(n)
            plan.log.append(f"{s.name}: `{n.variable}` converted back from {n.to_unit} to {n.from_unit} "
                            f"for rows recorded from {n.since}")
        if isinstance(n, RecodeNote) and n.variable in kinds and (time or not n.since):
            steps.append(Step("undo_recode", {"column": n.variable, "new_to_old": n.new_to_old,
                                              "date_column": time if n.since else None,
                                              "since": n.since.isoformat() if n.since else None}))
            plan.log.append(f"{s.name}: labels of `{n.variable}` mapped back ({n.new_to_old})"
                            + (f" from {n.since}" if n.since else ""))
    for n in notes:
        if isinstance(n, DelayNote) and time and n.days:
            steps.append(Step("shift_dates", {"column": time, "days": n.days}))
            plan.log.append(f"{s.name}: dates moved back by the documented {n.days}-day posting delay")
    if fmt != ISO:
        plan.log.append(f"{s.name}: dates parsed with the documented format `{fmt}`")
    if set(keys) <= have:
        steps.append(Step("dedupe", {"keys": keys}))
    else:
        plan.issues.append(f"{s.name}: key columns {keys} incomplete; repeated records were not removed")
    return steps


def build_plan(world_dir: Path, c: WorldContract, cache: FrameCache | None = None) -> tuple[ReconcilePlan, FrameCache]:
    cache = cache or FrameCache(world_dir)
    notes_by_system, events = read_memos(world_dir)
    plan = ReconcilePlan(sources=[], keys={}, events={ev.name: ev.date.isoformat() for ev in events})
    for s in c.systems:
        keys, ids = system_keys(c, s)
        plan.keys[s.entity] = keys
        e = c.entity(s.entity)
        expected = [*ids, *([e.time_column] if e.time_column else []), *s.variables]
        parts = find_parts(world_dir, s)
        if not parts:
            plan.issues.append(f"{s.name}: no files found for stem `{s.stem}` ({s.format})")
            continue
        notes = notes_by_system.get(s.name, [])
        hidden = undocumented_notes(s, c)
        if hidden:
            plan.log.append(f"{s.name}: {len(hidden)} undocumented change(s) known from the contract, not a memo: "
                            + ", ".join(type(n).__name__.removesuffix("Note").lower() for n in hidden))
        notes = [*notes, *hidden]
        for part in parts:
            _plan_part(c, s, part, notes, expected, cache, plan)
        have = set().union(*(p.columns for p in parts))
        plan.sources.append(SourcePlan(s.name, s.entity, parts, _source_steps(c, s, notes, plan, have)))
    return plan, cache


def run_steps(df: pd.DataFrame, steps: list[Step]) -> pd.DataFrame:
    for st in steps:
        df = getattr(K, st.fn)(df, **st.kwargs)
    return df


def load_source(src: SourcePlan, cache: FrameCache) -> pd.DataFrame:
    frames = [run_steps(cache.get(p), p.steps) for p in src.parts]
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    return run_steps(df, src.steps)


class Reconciled:
    """Reconciled entity tables and their wide (parent-joined) versions, computed lazily."""

    def __init__(self, c: WorldContract, plan: ReconcilePlan, cache: FrameCache):
        self.c, self.plan, self.cache = c, plan, cache
        self.world_dir = cache.world_dir
        self._tables: dict[str, pd.DataFrame | None] = {}
        self._wide: dict[str, pd.DataFrame | None] = {}
        self.removed: dict[str, int] = {}  # system -> rows dropped as repeats
        self.by_system: dict[str, pd.DataFrame] = {}  # reconciled table of each system

    def table(self, entity: str) -> pd.DataFrame | None:
        if entity not in self._tables:
            frames = []
            for src in self.plan.entity_sources(entity):
                raw = sum(len(self.cache.get(p)) for p in src.parts)
                df = load_source(src, self.cache)
                self.removed[src.system] = raw - len(df)
                self.by_system[src.system] = df
                frames.append(df)
            self._tables[entity] = K.combine_sources(frames, self.plan.keys[entity]) if frames else None
        return self._tables[entity]

    def wide(self, entity: str) -> pd.DataFrame | None:
        if entity not in self._wide:
            df = self.table(entity)
            e = self.c.entity(entity)
            if df is not None and e.parent is not None and self.c.entity(e.parent).key in df.columns:
                parent = self.wide(e.parent)
                if parent is not None:
                    df = K.attach_parent(df, parent, self.c.entity(e.parent).key)  # type: ignore[arg-type]
            if df is not None and e.time_column is not None:
                df = self._as_of_links(entity, df)
            self._wide[entity] = df
        return self._wide[entity]

    def _as_of_links(self, entity: str, df: pd.DataFrame) -> pd.DataFrame:
        """Dated rows below an entity whose parent link was revised take the parent valid on their date."""
        from .relink import read_links

        for anc in self.c.ancestors(entity):
            a = self.c.entity(anc)
            if a.relink is None or a.key not in df.columns or self.c.entity(str(a.parent)).key not in df.columns:
                continue
            links = read_links(self.world_dir, self.c, a)
            parent = self.wide(str(a.parent))
            if links is None or parent is None:
                continue
            pkey = str(self.c.entity(str(a.parent)).key)
            df = K.asof_parent(df, links, str(a.key), pkey, str(self.c.entity(entity).time_column))
            df = K.replace_parent(df, parent, pkey)
        return df


def reconcile(world_dir: str | Path, c: WorldContract) -> Reconciled:
    plan, cache = build_plan(Path(world_dir), c)
    return Reconciled(c, plan, cache)
