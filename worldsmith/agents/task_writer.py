"""The task writer (backward synthesis, closed form): the complete answer spec of one number an evolution script
printed. The spec's lint (`core.answer_spec.lint_answer_spec`) over the task's data files is the check: a facet left
open goes back to the model, and a spec that never passes is not used (no closed-form task is made from it).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from worldsmith.agents.asking import Outcome, ask, versions
from worldsmith.core.answer_spec import AnswerFacets, lint_answer_spec
from worldsmith.evolution.spec_check import (
    group_problems,
    holders,
    pinned,
    repaired,
    spec_mismatch,
    unwindowed,
    with_group,
    x_from_script,
)
from worldsmith.llm.structured import validate_reply
from worldsmith.prompts import template

TEMPLATE = "evolve_task_writer.md"


def resolved(facets: AnswerFacets, files: list[str]) -> AnswerFacets:
    """The spec with every file it names as the task ships it: a script reads 'orders.csv' from its working folder
    where the task has 'data/orders.csv', so a base name that names exactly one data file is that file."""
    by_name: dict[str, list[str]] = {}
    for f in files:
        by_name.setdefault(PurePosixPath(f).name, []).append(f)

    def one(f: str) -> str:
        if f in files:
            return f
        hits = by_name.get(PurePosixPath(f).name, [])
        return hits[0] if len(hits) == 1 else f

    def measure(m: Any) -> Any:
        return None if m is None else m.model_copy(update={"files": [one(f) for f in m.files]})

    return facets.model_copy(update={
        "measure": measure(facets.measure), "x": measure(facets.x),
        "controls": [measure(m) for m in facets.controls],
        "other_columns": {c: [one(f) for f in fs] for c, fs in facets.other_columns.items()}})


def spec_problems(facets: AnswerFacets, name: str, files: list[str], *, root: Path | None = None,
                  value: float | None = None) -> list[str]:
    """The lint's problems; then, with the task's folder `root` and the printed `value`, whether the spec read as
    written computes that value from the files (evolution/spec_check.py)."""
    problems = [] if facets.name == name else [f"name must be {name!r}, got {facets.name!r}"]
    problems += lint_answer_spec(resolved(facets, files), files)
    if not problems and root is not None:
        as_shipped = resolved(facets, files)
        problems = group_problems(as_shipped, root, name, files) + (
            spec_mismatch(as_shipped, root, value) if value is not None else [])
    return problems


def narrowed(facets: AnswerFacets, script: str) -> AnswerFacets:
    """The spec with its measure's (and x's) files cut to the ones the script reads, when it reads some of them: v10's
    writer gave the 2023 correlation's measure all three yearly order files, so no single file could supply its
    missing x and the repair gave up."""
    from worldsmith.tools.files.names import names_file

    def cut(files: list[str]) -> list[str]:
        read = [f for f in files if names_file(script, PurePosixPath(f).name)]
        return read or files

    update: dict[str, Any] = {"measure": facets.measure.model_copy(update={"files": cut(facets.measure.files)})}
    if facets.x is not None:
        update["x"] = facets.x.model_copy(update={"files": cut(facets.x.files)})
    return facets.model_copy(update=update)


async def write_answer_spec(llm: Any, *, goal: str, script: str, name: str, value: float, files: list[str],
                            role: str = "teacher", retries: int = 2, root: Path | None = None) -> Outcome[AnswerFacets]:
    t = template(TEMPLATE)
    messages = [{"role": "system", "content": t.section("system")},
                {"role": "user", "content": t.section("user", goal=goal, files=", ".join(files), script=script,
                                                      name=name, value=repr(value))}]
    out = await ask(llm, messages, AnswerFacets, role=role, templates=versions(TEMPLATE), retries=retries,
                    check=lambda f: spec_problems(f, name, files, root=root, value=value))
    if out.value is None and root is not None:  # the model never got it right: fix its last spec from the data
        last = next((v for c in reversed(out.calls) if (v := validate_reply(c.reply, AnswerFacets)[0]) is not None),
                    None)
        grouped = with_group(narrowed(resolved(last, files), script), root, name, files) if last is not None else None
        if grouped is not None:
            grouped = x_from_script(grouped, script, root, files) or grouped
        fixed = None if grouped is None else (repaired(grouped, root, name, value) or grouped)
        if fixed is not None and not spec_problems(fixed, name, files, root=root, value=value):
            out.value = fixed
            out.errors.append("the last spec was repaired from the data (files the script does not read, a dateless "
                              "window, a group's filter, a missing x from the data or the script, a plain mean or "
                              "count filed as a difference) and then computed the printed number")
    if out.value is not None:
        out.value = resolved(out.value, files)
        if root is not None:
            out.value = pinned(unwindowed(holders(out.value, root), script, root), root, value)
    return out
