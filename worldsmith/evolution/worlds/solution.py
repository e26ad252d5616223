"""Reference solutions: a standalone pandas script per phenomenon, built from the auditor's own plan.

The script contains the source of the kernel functions it calls (copied from `kernels.py`), one
loader per observation system with the reconciliation steps the auditor planned, the joins, and
the recipe call. Run from the world directory, it reads only `data/` and prints `@<id>[<value>]`.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from .relink import link_file
from . import kernels
from .audit import load_contract
from worldsmith.core.world_contract import WorldContract
from .recipes import recipe_call, recipe_entity, where_args
from .reconcile import PartPlan, ReconcilePlan, SourcePlan, Step, build_plan

_HEADER = '''#!/usr/bin/env python3
"""Reference solution for phenomenon `{pid}` of world `{wid}`.

{statement}
Run from the world directory: it reads only files under data/ and prints @{pid}[value].
"""
import operator
import posixpath
import re
import sqlite3
import xml.etree.ElementTree as ET
import zipfile

import numpy as np
import pandas as pd
'''


def _kernel_names() -> list[str]:
    return [n for n, f in inspect.getmembers(kernels, inspect.isfunction) if f.__module__ == kernels.__name__]


def _with_dependencies(names: set[str]) -> list[str]:
    known = _kernel_names()
    todo, seen = list(names), set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        src = inspect.getsource(getattr(kernels, n))
        todo += [k for k in known if k != n and re.search(rf"\b{k}\(", src)]
    order = {n: inspect.getsourcelines(getattr(kernels, n))[1] for n in seen}
    return sorted(seen, key=order.__getitem__)


def _call(step: Step, var: str = "df") -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in step.kwargs.items())
    return f"{var} = {step.fn}({var}{', ' + args if args else ''})"


def _loader(src: SourcePlan, used: set[str]) -> list[str]:
    lines = [f"def load_{src.system}():", f'    """Observation system `{src.system}` ({src.entity})."""',
             "    frames = []"]
    for part in src.parts:
        used.add("read_table")
        lines.append(f"    df = read_table({part.path!r}, {part.fmt!r}, {part.part!r})")
        for st in part.steps:
            used.add(st.fn)
            lines.append("    " + _call(st))
        lines.append("    frames.append(df)")
    lines.append("    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]")
    for st in src.steps:
        used.add(st.fn)
        lines.append("    " + _call(st))
    lines += ["    return df", "", ""]
    return lines


def _entity_chain(c: WorldContract, plan: ReconcilePlan, entity: str) -> list[str]:
    """Entities whose tables the wide table of `entity` needs, root first (mirrors Reconciled.wide)."""
    chain = [entity, *c.ancestors(entity)]
    return [e for e in reversed(chain) if plan.entity_sources(e)]


def _joins(c: WorldContract, plan: ReconcilePlan, entity: str, used: set[str],
           frame: Callable[[str], str] = "load_{}()".format) -> list[str]:
    """The joins of the entity chain; `frame(system)` is the expression of one system's reconciled table."""
    lines = []
    have: set[str] = set()
    for e in _entity_chain(c, plan, entity):
        loaders = ", ".join(frame(s.system) for s in plan.entity_sources(e))
        used.add("combine_sources")
        lines.append(f"{e} = combine_sources([{loaders}], {plan.keys[e]!r})")
        parent = c.entity(e).parent
        if parent in have:
            key = c.entity(parent).key  # type: ignore[arg-type]
            used.add("attach_parent")
            lines.append(f"if {key!r} in {e}.columns:")
            lines.append(f"    {e} = attach_parent({e}, {parent}, {key!r})")
        lines += _as_of_links(c, e, have, used)
        have.add(e)
    return lines


def _as_of_links(c: WorldContract, entity: str, have: set[str], used: set[str]) -> list[str]:
    """Mirror of Reconciled._as_of_links: dated rows take the parent valid on their date."""
    time_col = c.entity(entity).time_column
    lines: list[str] = []
    for anc in c.ancestors(entity) if time_col else []:
        a = c.entity(anc)
        if a.relink is None or a.parent not in have:
            continue
        p = c.entity(str(a.parent))
        used.update({"read_links", "asof_parent", "replace_parent"})
        lines += [(f"links = read_links({'data/' + link_file(c, a)!r}, {a.key!r}, {p.key!r}, "
                   f"{(a.id_prefix, a.alias)!r}, {(p.id_prefix, p.alias)!r})  # revised {a.relink.date}"),
                  f"if {a.key!r} in {entity}.columns and {p.key!r} in {entity}.columns:",
                  f"    {entity} = asof_parent({entity}, links, {a.key!r}, {p.key!r}, {time_col!r})",
                  f"    {entity} = replace_parent({entity}, {p.name}, {p.key!r})"]
    return lines


def _recipe_lines(c: WorldContract, ph, entity: str, scale: float, used: set[str]) -> list[str]:
    fn, kwargs = recipe_call(c, ph.recipe)
    used.add(fn)
    lines, frame = [], entity
    if ph.recipe.where:
        used.add("apply_where")
        lines.append(f"frame = apply_where({entity}, {where_args(ph.recipe)!r})")
        frame = "frame"
    args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    lines.append(f"value = {fn}({frame}, {args})")
    if scale != 1.0:
        lines.append(f"value = value * {scale!r}  # in the unit the task asks for")
    lines.append(f'print("@{ph.id}[%s]" % (value,))')
    return lines


def _solvable(world_dir: Path, phenomenon_id: str) -> tuple[WorldContract, Any, ReconcilePlan, str]:
    """The contract, the phenomenon, the reconciliation plan and the recipe's entity, which some system records."""
    c = load_contract(world_dir)
    ph = c.phenomenon(phenomenon_id)
    plan, _ = build_plan(world_dir, c)
    entity = recipe_entity(c, ph.recipe)
    if not plan.entity_sources(entity):
        raise ValueError(f"phenomenon {phenomenon_id}: no observation system records {entity}; not recoverable")
    return c, ph, plan, entity


def reference_solution_code(world_dir: str | Path, phenomenon_id: str, scale: float = 1.0) -> str:
    """Standalone script recomputing a phenomenon from the observed files, as the auditor does; `scale` turns the
    recipe's value into the answer spec's unit (100: a rate in percent or percentage points)."""
    c, ph, plan, entity = _solvable(Path(world_dir), phenomenon_id)
    used: set[str] = set()
    body: list[str] = []
    for e in _entity_chain(c, plan, entity):
        for src in plan.entity_sources(e):
            body += _loader(src, used)
    body += _joins(c, plan, entity, used)
    body += _recipe_lines(c, ph, entity, scale, used)
    if "read_table" in used:
        used.add("read_sheets")
    funcs = [inspect.getsource(getattr(kernels, n)) for n in _with_dependencies(used)]
    header = _HEADER.format(pid=phenomenon_id, wid=c.id, statement=ph.statement)
    return header + "\n\n" + "\n\n".join(funcs) + "\n\n" + "\n".join(body) + "\n"


#: A staged oracle's cells stay under this many characters where they can (a cell is the analyst's turn; SFT drops
#: turns over its token limit), but a helper or a load longer than this is never split.
CELL_CHARS = 900


def _read_expr(part: PartPlan, used: set[str]) -> str:
    """The reader call for one observed table, as `kernels.read_table` reads its format (no dispatch helper, and
    pandas' own readers: a staged oracle is SFT data, so it writes what an analyst writes, not a streaming xlsx
    parser)."""
    path, fmt, name = part.path, part.fmt, part.part
    if fmt in ("csv", "csv.gz"):
        return f"pd.read_csv({path!r}, keep_default_na=False, na_values=[''])"
    if fmt == "parquet":
        return f"pd.read_parquet({path!r})"
    if fmt == "jsonl":
        return f"pd.read_json({path!r}, lines=True, dtype=False)"
    if fmt == "json":
        return f"pd.read_json({path!r}, orient='records', dtype=False)"
    if fmt == "txt":
        used.add("read_log")
        return f"read_log({path!r})"
    if fmt == "xlsx":  # pandas' own reader, as an analyst writes it: the same text cells as `kernels.read_sheets`
        return f"pd.read_excel({path!r}, sheet_name={name!r}, dtype=str, keep_default_na=False, na_values=[''])"
    if fmt == "sqlite":
        return (f"pd.read_sql_query({('SELECT * FROM ' + chr(34) + str(name) + chr(34))!r}, "
                f"sqlite3.connect({('file:' + path + '?mode=ro')!r}, uri=True))")
    raise ValueError(f"{path}: unsupported format {fmt!r}")


_DOCSTRING = re.compile(r'^(def [^\n]*:\n)[ \t]+"""(?:[^"\\]|\\.|"(?!""))*"""[ \t]*\n', re.M)


@lru_cache(maxsize=None)
def _short_source(name: str) -> str:
    """A kernel's source without its docstring (the analyst's cell, not the library's); text only, no `ast`
    (CPython 3.11's ast module is not safe across the verifier's threads)."""
    return _DOCSTRING.sub(r"\1", inspect.getsource(getattr(kernels, name)), count=1).rstrip() + "\n"


def _load_lines(src: SourcePlan, used: set[str]) -> list[str]:
    """One system's table, read and reconciled in the open (no loader function), as `src_<system>`."""
    lines: list[str] = []
    many = len(src.parts) > 1
    if many:
        lines.append("parts = []")
    for part in src.parts:
        lines.append(f"df = {_read_expr(part, used)}")
        for st in part.steps:
            used.add(st.fn)
            lines.append(_call(st))
        if many:
            lines.append("parts.append(df)")
    if many:
        lines.append("df = pd.concat(parts, ignore_index=True)")
    for st in src.steps:
        used.add(st.fn)
        lines.append(_call(st))
    var = f"src_{src.system}"
    return lines + [f"{var} = df", f"print({var}.shape)", f"print({var}.head(3))"]


def _pack(blocks: list[str], limit: int) -> list[str]:
    """Consecutive blocks joined into cells of at most `limit` characters (a longer block stands alone)."""
    cells: list[str] = []
    for b in blocks:
        if cells and len(cells[-1]) + 2 + len(b) <= limit:
            cells[-1] += "\n\n" + b
        else:
            cells.append(b)
    return cells


def reference_solution_cells(world_dir: str | Path, phenomenon_id: str, scale: float = 1.0,
                             cell_chars: int = CELL_CHARS) -> list[tuple[str, str]]:
    """The reference solution as an analyst works it, one short cell a turn: [(thought, code)] — imports, the
    helpers the steps call, each observation system read and reconciled (its size and first rows printed), then the
    joins and the recipe, printing `@<id>[value]`. Run in order in one session, the cells print what
    `reference_solution_code` prints (the world-task verifier runs both and keeps the cells only when they agree)."""
    from worldsmith.prompts import template

    words = template("oracle_thoughts.md")
    step_words = dict(line.split(": ", 1) for line in words.sections["step words"].splitlines() if ": " in line)
    c, ph, plan, entity = _solvable(Path(world_dir), phenomenon_id)
    used: set[str] = set()
    loads: list[tuple[str, str]] = []
    for e in _entity_chain(c, plan, entity):
        for src in plan.entity_sources(e):
            fns = list(dict.fromkeys([st.fn for p in src.parts for st in p.steps] + [st.fn for st in src.steps]))
            said = [step_words[f] for f in fns if f in step_words]
            files = ", ".join(dict.fromkeys(p.path + (f"[{p.part}]" if p.fmt in ("xlsx", "sqlite") else "")
                                            for p in src.parts))
            thought = words.section("load", system=src.system, entity=e, files=files,
                                    steps=(": " + "; ".join(said)) if said else "")
            loads.append((thought, "\n".join(_load_lines(src, used))))
    compute = _joins(c, plan, entity, used, frame="src_{}".format) + _recipe_lines(c, ph, entity, scale, used)
    helpers = [_short_source(n) for n in _with_dependencies(used - {"read_table"})]
    code = "\n".join(helpers + [c for _, c in loads] + compute)
    imports = "\n".join(line for line in _HEADER.split('"""\n', 2)[-1].strip().splitlines()
                        if line and re.search(rf"\b{line.split()[-1]}\.", code))  # only the modules it uses
    cells = []
    for b in _pack([imports] + helpers, cell_chars):
        names = re.findall(r"^def (\w+)", b, flags=re.M)
        cells.append((words.section("helpers", names=", ".join(names)) if names else words.section("imports"), b))
    cells += loads
    cells.append((words.section("compute", entity=entity), "\n".join(compute)))
    return cells


def parse_answer(output: str, phenomenon_id: str) -> str | None:
    """The value printed as @<id>[value] by a reference solution (None when absent)."""
    m = re.search(rf"@{re.escape(phenomenon_id)}\[(.*?)\]", output)
    return m.group(1) if m else None
