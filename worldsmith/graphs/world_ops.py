"""World building and world task writing as operators over rows (see `core/operators.py`).

World rows: one per world to build {domain, topic, seed, rows, out_dir, contract_source}.
Task rows: one per world at first {world_dir, tasks_dir, seed, topic, max_tasks}; spec sampling expands each
into one row per task spec. The deterministic engine stays in `evolution/worlds`; the writers are agents.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np

from worldsmith.core.operators import Binding, Operator, Row, RowOperator, register_operator
from worldsmith.core.storage import StepStorage


def _note(storage: StepStorage, step: str, text: str) -> None:
    storage.emit({"type": "world", "step": step, "text": text})


def domain_for_topic(topic: str) -> tuple[str | None, str]:
    """The best-matching template's domain for a topic, and a line saying why (or that none matched)."""
    from worldsmith.evolution.worlds.topic import match_topic

    matches = match_topic(topic)
    if not matches:
        return None, f"topic {topic!r} matches no template; domain picked by seed"
    best = matches[0]
    why = ", ".join(best.variables[:3]) if best.variables else "its description"
    return best.domain, f"topic {topic!r} → {best.domain} (matched {why})"


# --------------------------------------------------------------------------------------------- world building


@register_operator
class PickPersona(RowOperator):
    name = "pick_persona"
    category = "generate"
    description = "Pick the world's domain (given, by topic, or by seed) and the stakeholder persona of that domain."
    inputs = ("domain", "topic", "seed")
    outputs = ("domain", "topic_note", "persona")

    async def process(self, v: dict[str, Any], storage: StepStorage) -> dict[str, Any]:
        from worldsmith.evolution.worlds.templates import list_templates, personas

        domains = sorted({t.domain for t in list_templates()})
        domain, note, seed = v["domain"], None, v["seed"] or 0
        if not domain and v["topic"]:
            domain, note = domain_for_topic(v["topic"])
            _note(storage, "topic", note.removeprefix("topic "))
        domain = domain or domains[int(np.random.default_rng(seed).integers(len(domains)))]
        if domain not in domains:
            raise ValueError(f"unknown domain {domain!r}; choose one of: {', '.join(domains)}")
        options = personas(domain)
        chosen = options[seed % len(options)]
        _note(storage, "persona", f"{chosen.name}, {chosen.role} ({domain})")
        return {"domain": domain, "topic_note": note, "persona": chosen.model_dump(mode="json")}


@register_operator
class SkeletonFromTemplate(RowOperator):
    name = "skeleton_from_template"
    category = "generate"
    description = "Dependency skeleton: the domain's template contract (variables, causal edges) with the persona."
    inputs = ("domain", "persona", "rows")
    outputs = ("contract", "template_id")

    async def process(self, v: dict[str, Any], storage: StepStorage) -> dict[str, Any]:
        from worldsmith.core.world_contract import Persona
        from worldsmith.evolution.worlds.templates import load_template

        template = await asyncio.to_thread(load_template, v["domain"], v["rows"])
        template = template.model_copy(update={"persona": Persona(**v["persona"])})
        _note(storage, "skeleton", f"{len(template.edges)} edges over {len(template.nodes())} variables "
                                   f"(template {template.id})")
        return {"contract": template.model_dump(mode="json"), "template_id": template.id}


@register_operator
class WriteContract(RowOperator):
    name = "write_contract"
    category = "refine"
    description = ("LLM contract writer: adapt the template contract to the persona, validated by the engine's "
                   "validator with problems fed back; the template when no model is given or it keeps failing.")
    inputs = ("contract", "persona", "contract_source")
    outputs = ("contract", "contract_by", "contract_errors")

    def __init__(self, llm: Any | None, *, model: str, retries: int):
        self.llm, self.model, self.retries = llm, model, retries

    async def process(self, v: dict[str, Any], storage: StepStorage) -> dict[str, Any]:
        from worldsmith.agents.world_writers import write_contract
        from worldsmith.core.world_contract import Persona, WorldContract

        llm = self.llm if v["contract_source"] == "llm" else None
        out = await write_contract(llm, WorldContract.model_validate(v["contract"]), Persona(**v["persona"]),
                                   model=self.model, retries=self.retries)
        _note(storage, "contract", f"contract by {out.produced_by}"
              + (f" after {len(out.errors or [])} problem(s)" if out.errors else ""))
        return {"contract": out.value.model_dump(mode="json"), "contract_by": out.produced_by,
                "contract_errors": out.errors or []}


PLURAL = {"edge": "edges", "invariant": "invariants", "phenomenon": "phenomena", "claim": "claims"}


def audit_line(summary: dict[str, dict[str, int]]) -> str:
    parts = [f"{PLURAL.get(k, k)} {v.get('pass', 0)}/{v.get('pass', 0) + v.get('fail', 0)} pass" for k, v in summary.items()]
    return "audit: " + ", ".join(parts)


@register_operator
class BuildWorld(RowOperator):
    name = "build_world"
    category = "generate"
    description = "Deterministic engine and projection: canonical state, imperfect observed files, then the audit."
    inputs = ("contract", "seed", "rows", "out_dir", "contract_by", "overwrite")
    outputs = ("world",)

    async def process(self, v: dict[str, Any], storage: StepStorage) -> dict[str, Any]:
        from worldsmith.core.world_contract import WorldContract
        from worldsmith.evolution.worlds.world import build_world

        contract = WorldContract.model_validate(v["contract"])
        _note(storage, "engine", f"generating {v['rows'] or 'template'} rows, seed {v['seed'] or 0}")
        result = await asyncio.to_thread(build_world, contract, v["seed"] or 0, v["out_dir"], v["rows"],
                                         produced_by=v["contract_by"], overwrite=bool(v["overwrite"]))
        if result.skipped:
            _note(storage, "reuse", f"an identical, intact world is already in {v['out_dir']}; not rebuilt")
        _note(storage, "audit", audit_line(result.audit_summary) if result.audit_summary else "audit: not run")
        return {"world": result.model_dump(mode="json")}


# --------------------------------------------------------------------------------------------- task writing


@register_operator
class SampleTaskSpecs(RowOperator):
    name = "sample_task_specs"
    category = "generate"
    description = ("Sample cause/consequence task specs from an audited world's DAG, grounded in recoverable "
                   "phenomena; topic variables first. One output row per spec.")
    inputs = ("world_dir", "seed", "topic", "max_tasks")
    outputs = ("spec",)

    async def process(self, v: dict[str, Any], storage: StepStorage) -> list[dict[str, Any]]:
        from worldsmith.evolution.worlds.audit import load_contract
        from worldsmith.evolution.worlds.integrity import require_intact_world
        from worldsmith.evolution.worlds.tasks import sample_specs
        from worldsmith.evolution.worlds.topic import topic_variables

        world_dir = Path(v["world_dir"])
        await asyncio.to_thread(require_intact_world, world_dir)  # never sample tasks from an altered world
        focus: list[str] = []
        if v["topic"]:
            focus = topic_variables(await asyncio.to_thread(load_contract, world_dir), v["topic"])
            _note(storage, "topic", f"{v['topic']!r} → target variables: "
                  + (", ".join(focus) if focus else "none match; sampling the whole DAG"))
        specs = await asyncio.to_thread(sample_specs, world_dir, max_tasks=v["max_tasks"], seed=v["seed"] or 0,
                                        focus=focus)
        return [{"spec": s.model_dump(mode="json")} for s in specs]


def _data_files(world_dir: Path) -> list[str]:
    return [p.relative_to(world_dir).as_posix() for p in sorted((world_dir / "data").rglob("*")) if p.is_file()]


def _graded(world_dir: Path, spec: Any) -> list[Any]:
    """Answer specs of the spec's numeric phenomena: what the request's tasks grade."""
    from worldsmith.evolution.worlds.answer_specs import world_answer_specs

    facets = world_answer_specs(world_dir)
    return [facets[p.id] for p in spec.phenomena if p.id in facets and isinstance(p.value, (int, float))]


@register_operator
class WriteRequests(RowOperator):
    name = "write_requests"
    category = "generate"
    description = ("LLM question writer: the stakeholder request of each task spec's report and one per closed-form "
                   "quantity (about exactly it), checked for leaks and off-target text; the template request when no "
                   "model is given. Runs rows concurrently.")
    inputs = ("spec", "world_dir")
    outputs = ("request", "request_by", "request_errors", "requests")

    def __init__(self, llm: Any | None, *, model: str, concurrency: int = 1):
        self.llm, self.model, self.concurrency = llm, model, concurrency

    async def process(self, v: dict[str, Any], storage: StepStorage) -> dict[str, Any]:
        from worldsmith.agents.world_writers import write_requests
        from worldsmith.evolution.worlds.audit import load_contract
        from worldsmith.evolution.worlds.tasks import TaskSpec

        spec = TaskSpec.model_validate(v["spec"])
        world_dir = Path(v["world_dir"])
        contract = await asyncio.to_thread(load_contract, world_dir)
        _note(storage, "task", f"{spec.kind} task on {spec.target}: writing the request…")
        out, each = await write_requests(self.llm, spec, contract.persona, _data_files(world_dir), model=self.model,
                                         answers=await asyncio.to_thread(_graded, world_dir, spec))
        _note(storage, "request", f"by {out.produced_by}: {out.value[:100]}…")
        return {"request": out.value, "request_by": out.produced_by, "request_errors": out.errors or [],
                "requests": {k: {"request": r.value, "request_by": r.produced_by, "request_errors": r.errors or []}
                             for k, r in each.items()}}


@register_operator
class VerifySolutions(RowOperator):
    name = "verify_solutions"
    category = "evaluate"
    description = ("Run each numeric phenomenon's reference solution in a fresh sandbox over the data room and keep "
                   "it only if the printed value matches canonical truth.")
    inputs = ("spec", "world_dir")
    outputs = ("verified", "dropped")
    required = ("sandbox",)

    def __init__(self, sandbox: Any, *, timeout_s: float = 120.0, concurrency: int = 1):
        self.sandbox, self.timeout_s, self.concurrency = sandbox, timeout_s, concurrency
        self._runs: dict[tuple[str, str], asyncio.Future[dict[str, Any]]] = {}  # a phenomenon shared by specs runs once

    async def process(self, v: dict[str, Any], storage: StepStorage) -> dict[str, Any]:
        from worldsmith.evolution.worlds.tasks import TaskSpec

        spec = TaskSpec.model_validate(v["spec"])
        verified: dict[str, dict[str, str]] = {}
        dropped: list[dict[str, str]] = []
        for p in spec.phenomena:
            if not isinstance(p.value, (int, float)):
                continue
            key = (v["world_dir"], p.id)
            if key not in self._runs:
                self._runs[key] = asyncio.ensure_future(self._verify(Path(v["world_dir"]), p))
            got = await self._runs[key]
            if got["ok"]:
                verified[p.id] = {"code": got["code"], "output": got["output"], "value": got["value"] or "",
                                  "cells": got["cells"]}
            else:
                dropped.append({"id": p.id, "reason": f"reference solution printed {got['value']!r}, truth {p.value!r}"})
        return {"verified": verified, "dropped": dropped}

    async def _verify(self, world_dir: Path, p: Any) -> dict[str, Any]:
        from worldsmith.evolution.worlds.answer_specs import world_answer_specs
        from worldsmith.evolution.worlds.solution import reference_solution_code
        from worldsmith.tools.sandbox import open_sandbox
        from worldsmith.core.grading import extract_answers, tolerant

        # the script prints the value in the unit the task asks for; truth is compared in that unit too
        factor = (await asyncio.to_thread(world_answer_specs, world_dir))[p.id].factor
        code = await asyncio.to_thread(reference_solution_code, world_dir, p.id, factor)
        async with open_sandbox(self.sandbox, inputs=[world_dir / "data"]) as sb:  # the scripts read data/…
            result = await sb.run(code, timeout=self.timeout_s)
        got = extract_answers(result.stdout).get(p.id)
        ok = result.ok and tolerant((p.tolerance.abs or 0.0) * factor or None,
                                    p.tolerance.rel or None)(float(p.value) * factor, got)
        cells = await self._staged(world_dir, p.id, factor, got) if ok else []
        return {"ok": ok, "code": code, "output": result.to_observation(4000), "value": got, "cells": cells}

    async def _staged(self, world_dir: Path, pid: str, factor: float, want: str | None) -> list[dict[str, str]]:
        """The same solution as an analyst's short cells, run in order in a fresh session, each with the observation
        the analyst would see: [{thought, code, observation}], or [] unless the last cell prints `want` too (then
        the oracle trajectory falls back to the one script)."""
        from worldsmith.agents.analyst import observation_text
        from worldsmith.core.grading import extract_answers
        from worldsmith.evolution.worlds.solution import reference_solution_cells
        from worldsmith.tools.sandbox import open_sandbox

        staged = await asyncio.to_thread(reference_solution_cells, world_dir, pid, factor)
        out: list[dict[str, str]] = []
        async with open_sandbox(self.sandbox, inputs=[world_dir / "data"]) as sb:
            for thought, code in staged:
                result = await sb.run(code, timeout=self.timeout_s)
                if not result.ok:
                    return []
                out.append({"thought": thought, "code": code, "observation": observation_text(result, 4000)})
        got = extract_answers(result.stdout).get(pid) if staged else None
        return out if got is not None and got == want else []


@register_operator
class PackageTasks(Operator):
    name = "package_tasks"
    category = "generate"
    description = ("Package verified closed-form tasks and report tasks with rubrics into a task collection, with "
                   "reference solutions and oracle trajectories; at most max_tasks, each phenomenon once.")
    inputs = ("spec", "request", "request_by", "request_errors", "requests", "verified", "world_dir", "tasks_dir",
              "max_tasks")
    outputs = ("task_ids",)

    async def transform(self, rows: list[Row], binding: Binding, storage: StepStorage, index: int) -> list[Row]:
        from worldsmith.evolution.worlds.integrity import require_intact_world
        from worldsmith.graphs.world_tasks import package_spec

        for world_dir in sorted({str(row.get(binding.inputs["world_dir"])) for row in rows}):
            # again here: a resumed run may find the world altered since its specs were sampled
            await asyncio.to_thread(require_intact_world, Path(world_dir))
        taken: set[str] = set()
        total = 0
        out = []
        for row in rows:
            v = {n: row.get(c) for n, c in binding.inputs.items()}
            ids = await package_spec(v, taken, v["max_tasks"] - total, lambda t: _note(storage, "package", t))
            total += len(ids)
            out.append({**row, binding.outputs["task_ids"]: ids})
        return out


def world_id_of(world_dir: Path) -> str:
    manifest = json.loads((world_dir / "manifest.json").read_text(encoding="utf-8"))
    return f"{manifest['world_id']}-s{manifest['seed']}"  # one contract, many seeds: each its own world
