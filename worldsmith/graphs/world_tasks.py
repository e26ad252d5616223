"""Packaging of world tasks: verified closed-form tasks and report tasks with rubrics grounded in canonical values;
each reference solution's run doubles as an oracle trajectory."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from worldsmith.core.answer_spec import AnswerFacets, with_example
from worldsmith.core.schemas import (Action, AnswerSpec, DeliverableSpec, Difficulty, Provenance, Rubric, Step, Task,
                                     Tolerance, Trajectory)
from worldsmith.core.store import write_model
from worldsmith.core.taskpkg import TaskCollection, workspace_ref


def world_task_id(world_id: str, *parts: str) -> str:
    """A world task's id: the world id and its parts joined by dashes, underscores spelled as dashes, ≤ 120 chars."""
    return "-".join((world_id, *parts)).replace("_", "-")[:120]


def is_world_task(task_id: str, world_id: str) -> bool:
    """Whether `task_id` names a task of the world `world_id` (s1010's tasks are not s101's)."""
    return task_id.startswith(world_task_id(world_id) + "-")


def _oracle(task: Task, code: str, output: str, answer: str, model: str = "reference-solution",
            cells: list[dict[str, str]] | None = None) -> Trajectory:
    """The reference solution as a trajectory: its staged `cells` (one short cell a turn, as the analyst works;
    see VerifySolutions) when the verifier ran them, else the one script; then the answer."""
    from worldsmith.prompts import template

    words = template("oracle_thoughts.md")
    if cells:
        steps = [Step(index=i, thought=c["thought"], action=Action(kind="code", content=c["code"]),
                      observation=c["observation"]) for i, c in enumerate(cells)]
    else:
        steps = [Step(index=0, thought=words.section("script"), action=Action(kind="code", content=code),
                      observation=output)]
    steps.append(Step(index=len(steps), thought=words.section("answer"), action=Action(kind="answer", content=answer)))
    return Trajectory(id=f"{task.id}-oracle", task_id=task.id, model=model, provider="engine", label="oracle",
                      user_prompt=task.instruction, steps=steps, final_answer=answer, status="answered")


def scaled_tolerance(p: Any, facets: AnswerFacets) -> Tolerance:
    """Truth's tolerance in the answer's unit, never tighter than the rounding the instruction asks for."""
    abs_tol = (p.tolerance.abs or 0.0) * facets.factor
    if facets.decimals is not None:
        abs_tol = max(abs_tol, 0.5 * 10 ** -facets.decimals)
    return Tolerance(abs=abs_tol or None, rel=p.tolerance.rel or None)


def _request_meta(r: dict[str, Any]) -> dict[str, Any]:
    """Who wrote a task's request, and why drafts were refused (a fallback's reason)."""
    return {"request_by": r["request_by"], **({"request_rejected": r["request_errors"]} if r.get("request_errors")
                                               else {})}


async def package_spec(v: dict[str, Any], taken: set[str], budget: int, note: Callable[[str], None]) -> list[str]:
    """The tasks of one spec row: a closed-form task per verified phenomenon not yet `taken` (at most `budget`),
    then a report task over them. Re-packaging an identical task is a no-op, so a rerun after a kill is safe."""
    from worldsmith.agents.world_writers import deliverable_block
    from worldsmith.core.answer_spec import lint_answer_spec
    from worldsmith.evolution.worlds.answer_specs import systems_named, world_answer_specs
    from worldsmith.evolution.worlds.audit import load_contract
    from worldsmith.evolution.worlds.tasks import TaskSpec, load_ledger, method_items, rubric_items
    from worldsmith.graphs.world_ops import _data_files, world_id_of

    if budget <= 0:
        return []
    world_dir = Path(v["world_dir"])
    spec = TaskSpec.model_validate(v["spec"])
    verified: dict[str, dict[str, str]] = v["verified"] or {}
    contract = await asyncio.to_thread(load_contract, world_dir)
    files = _data_files(world_dir)
    ref = await asyncio.to_thread(workspace_ref, world_dir, files)
    facets = await asyncio.to_thread(world_answer_specs, world_dir)
    coll = TaskCollection(v["tasks_dir"])
    world_id = world_id_of(world_dir)
    request, by = v["request"], v["request_by"]
    request_meta = _request_meta(v)
    written: list[str] = []

    async def package(task: Task, code: str, output: str, answer: str, cells: list[dict[str, str]] | None = None) -> None:
        await asyncio.to_thread(coll.add, task, files_root=world_dir, solution_code=code, group=world_id, overwrite=True)
        await asyncio.to_thread(write_model, coll.root / "oracle" / f"{task.id}.json",
                                _oracle(task, code, output, answer, cells=cells))
        written.append(task.id)

    common = dict(workspace=ref, category=spec.kind, tags=[contract.domain.value, spec.target],
                  provenance=Provenance(source="world", world_id=world_id, category=spec.kind, produced_by=[by, "engine"]))
    lintable = [p for p in spec.phenomena if p.id in verified]
    problems = {p.id: lint_answer_spec(facets[p.id], files) for p in lintable}
    for pid, why in problems.items():
        if why:
            note(f"{pid} dropped: its answer spec leaves a facet open ({'; '.join(why)})")
    verified = {k: val for k, val in verified.items() if not problems.get(k)}
    for p in spec.phenomena:
        if p.id not in verified or p.id in taken or len(written) >= budget:
            continue
        taken.add(p.id)
        got = verified[p.id]
        value, tolerance = round(float(p.value) * facets[p.id].factor, 6), scaled_tolerance(p, facets[p.id])
        f = with_example(facets[p.id], value, tolerance.abs, tolerance.rel)  # a copied example must not pass
        own = (v.get("requests") or {}).get(p.id) or v  # its own request, about exactly this quantity
        task = Task(id=world_task_id(world_id, spec.kind, spec.target, p.id), kind="closed_form",
                    instruction=own["request"] + deliverable_block(spec, contract, f),
                    deliverable=DeliverableSpec(format="answer_tags", answer_names=[p.id]),
                    answers=[AnswerSpec(name=p.id, value=value, tolerance=tolerance, unit=f.grading_unit,
                                        description=f.aggregation, spec=f)],
                    difficulty=Difficulty(level="medium"),
                    metadata={"phenomenon": p.id, "target": spec.target, **_request_meta(own)},
                    **{**common, "provenance": common["provenance"].model_copy(
                        update={"produced_by": [own["request_by"], "engine"]})})
        await package(task, got["code"], got["output"], f"@{p.id}[{got['value']}]", got.get("cells"))
        note(f"{task.id} (closed form) verified and written")
    computed = [p for p in spec.phenomena if p.id in verified]
    if not computed or len(written) >= budget:
        return written
    spec = spec.model_copy(update={"phenomena": computed})
    named = await asyncio.to_thread(systems_named, world_dir, [facets[p.id] for p in computed])
    rubric = Rubric(criteria=rubric_items(spec, contract, facets)
                    + method_items(spec, await asyncio.to_thread(load_ledger, world_dir), systems=named))
    task = Task(id=world_task_id(world_id, spec.kind, spec.target, "report"), kind="report",
                instruction=request + deliverable_block(spec, contract, None, [facets[p.id] for p in computed]),
                deliverable=DeliverableSpec(format="markdown", filename="answer.md"), rubric=rubric,
                difficulty=Difficulty(level="hard"),
                metadata={"target": spec.target, "related": spec.related, **request_meta}, **common)
    await package(task, "\n\n".join(f"# --- {p.id}\n{verified[p.id]['code']}" for p in computed),
                  "\n".join(verified[p.id]["output"] for p in computed),
                  "\n".join(f"- {p.statement}" for p in computed))
    note(f"{task.id} (report, {len(rubric.criteria)} rubric items) written")
    return written
