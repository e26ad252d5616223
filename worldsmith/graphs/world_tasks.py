"""World → task packages: specs from the audited truth, requests from the question writer, rubrics grounded in
canonical values, and reference solutions verified in the sandbox (their runs double as oracle trajectories)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from collections.abc import Callable
from typing import Any

from worldsmith.core.schemas import (Action, AnswerSpec, DeliverableSpec, Difficulty, Provenance, Rubric, Step, Task,
                                     Tolerance, Trajectory)
from worldsmith.core.store import write_model
from worldsmith.core.taskpkg import TaskCollection, workspace_ref
from worldsmith.graphs.runtime import GraphRuntime, emit
from worldsmith.core.grading import extract_answers, tolerant


async def verify_solution(rt: GraphRuntime, code: str, data_root: Path, pid: str, expected: float,
                          tol: Tolerance) -> tuple[bool, str, str | None]:
    """Run a reference solution in a fresh sandbox over the data room; (matches truth, output, value printed)."""
    from worldsmith.tools.sandbox import open_sandbox

    async with open_sandbox(rt.settings.sandbox, inputs=[data_root]) as sb:  # the scripts read data/…
        result = await sb.run(code, timeout=max(rt.settings.sandbox.timeout_s, 120))
    output = result.to_observation(4000)
    got = extract_answers(result.stdout).get(pid)
    ok = result.ok and tolerant(tol.abs, tol.rel)(expected, got)
    return ok, output, got


def _oracle(task: Task, code: str, output: str, answer: str, model: str = "reference-solution") -> Trajectory:
    steps = [Step(index=0, thought="Recompute the quantity from the observed files, reconciling them first.",
                  action=Action(kind="code", content=code), observation=output),
             Step(index=1, thought="The script printed the value; report it.", action=Action(kind="answer", content=answer))]
    return Trajectory(id=f"{task.id}-oracle", task_id=task.id, model=model, provider="engine", label="oracle",
                      user_prompt=task.instruction, steps=steps, final_answer=answer, status="answered")


async def write_world_tasks(rt: GraphRuntime, world_dir: Path, tasks_dir: Path, *, max_tasks: int = 10, seed: int = 0,
                            use_llm: bool = True, on_event: Callable[[dict[str, Any]], None] | None = None,
                            topic: str | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """Specs → requests → verified closed-form and report tasks in a collection. Progress goes to the running
    graph's stream and to `on_event` (the CLI's printer) when given."""

    def note(event: dict[str, Any]) -> None:
        emit(event)
        if on_event is not None:
            on_event(event)

    from worldsmith.agents.world_writers import deliverable_block, write_request
    from worldsmith.evolution.worlds.audit import load_contract
    from worldsmith.evolution.worlds.solution import reference_solution_code
    from worldsmith.evolution.worlds.tasks import load_ledger, method_items, rubric_items, sample_specs
    from worldsmith.evolution.worlds.topic import topic_variables

    contract = await asyncio.to_thread(load_contract, world_dir)
    focus = topic_variables(contract, topic) if topic else []
    if topic:
        note({"type": "world", "step": "topic", "text": f"{topic!r} → target variables: "
                            + (", ".join(focus) if focus else "none match; sampling the whole DAG")})
    specs = await asyncio.to_thread(sample_specs, world_dir, max_tasks=max_tasks, seed=seed, focus=focus)
    ledger = await asyncio.to_thread(load_ledger, world_dir)
    data_root = world_dir / "data"
    # the workspace is the data room as a data/ folder: solvers and reference solutions read data/<file>
    ref = await asyncio.to_thread(workspace_ref, world_dir, [p.relative_to(world_dir).as_posix()
                                                             for p in sorted(data_root.rglob("*")) if p.is_file()])
    files = [f.path for f in ref.files]
    coll = TaskCollection(tasks_dir)
    model = rt.settings.llm.for_role("teacher").model
    llm = rt.llm if use_llm else None
    manifest = json.loads((world_dir / "manifest.json").read_text(encoding="utf-8"))
    world_id = f"{manifest['world_id']}-s{manifest['seed']}"  # one contract, many seeds: each its own world
    written: list[str] = []
    dropped: list[dict[str, Any]] = []
    verified: dict[str, tuple[str, str, str]] = {}  # pid -> (code, output, value)
    for spec in specs:
        if len(written) >= max_tasks:
            break
        note({"type": "world", "step": "task", "text": f"{spec.kind} task on {spec.target}: writing the request…"})
        request = await write_request(llm, spec, contract.persona, files, model=model)
        note({"type": "world", "step": "request", "text": f"by {request.produced_by}: {request.value[:100]}…"})
        for p in spec.phenomena:
            if p.id in verified or not isinstance(p.value, (int, float)) or len(written) >= max_tasks:
                continue
            code = await asyncio.to_thread(reference_solution_code, world_dir, p.id)
            tol = Tolerance(abs=p.tolerance.abs or None, rel=p.tolerance.rel or None)
            ok, output, got = await verify_solution(rt, code, data_root, p.id, float(p.value), tol)
            if not ok:
                dropped.append({"id": p.id, "reason": f"reference solution printed {got!r}, truth {p.value!r}"})
                continue
            verified[p.id] = (code, output, got or "")
            task = Task(id=f"{world_id}-{spec.kind}-{spec.target}-{p.id}".replace("_", "-")[:120], kind="closed_form",
                        instruction=request.value + deliverable_block(spec, contract, p.id),
                        workspace=ref, deliverable=DeliverableSpec(format="answer_tags", answer_names=[p.id]),
                        answers=[AnswerSpec(name=p.id, value=round(float(p.value), 6), tolerance=tol)],
                        provenance=Provenance(source="world", world_id=world_id, category=spec.kind,
                                              produced_by=[request.produced_by, "engine"]),
                        difficulty=Difficulty(level="medium"), category=spec.kind, tags=[contract.domain.value, spec.target],
                        metadata={"phenomenon": p.id, "target": spec.target})
            await _package(coll, task, world_dir, code, output, f"@{p.id}[{got}]", world_id, written)
            note({"type": "world", "step": "package", "text": f"{task.id} (closed form) verified and written"})
        computed = [p for p in spec.phenomena if p.id in verified]
        if not computed or len(written) >= max_tasks:
            continue
        spec = spec.model_copy(update={"phenomena": computed})
        rubric = Rubric(criteria=rubric_items(spec, contract) + method_items(spec, ledger))
        code = "\n\n".join(f"# --- {p.id}\n{verified[p.id][0]}" for p in computed)
        output = "\n".join(verified[p.id][1] for p in computed)
        task = Task(id=f"{world_id}-{spec.kind}-{spec.target}-report".replace("_", "-")[:120], kind="report",
                    instruction=request.value + deliverable_block(spec, contract, None), workspace=ref,
                    deliverable=DeliverableSpec(format="markdown", filename="answer.md"), rubric=rubric,
                    provenance=Provenance(source="world", world_id=world_id, category=spec.kind,
                                          produced_by=[request.produced_by, "engine"]),
                    difficulty=Difficulty(level="hard"), category=spec.kind, tags=[contract.domain.value, spec.target],
                    metadata={"target": spec.target, "related": spec.related})
        answer = "\n".join(f"- {p.statement}" for p in computed)
        await _package(coll, task, world_dir, code, output, answer, world_id, written)
        note({"type": "world", "step": "package", "text": f"{task.id} (report, {len(rubric.criteria)} rubric items) written"})
    return written, dropped


async def _package(coll: TaskCollection, task: Task, files_root: Path, code: str, output: str, answer: str,
                   world_id: str, written: list[str]) -> None:
    await asyncio.to_thread(coll.add, task, files_root=files_root, solution_code=code, group=world_id, overwrite=True)
    await asyncio.to_thread(write_model, coll.root / "oracle" / f"{task.id}.json", _oracle(task, code, output, answer))
    written.append(task.id)
