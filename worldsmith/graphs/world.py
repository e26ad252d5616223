"""The world graph: persona → dependency skeleton → contract writer → engine + projection → audit →
task writer → rubric → package.

LLM agents write the contract (optional, validated with feedback) and the stakeholder requests; the
deterministic engine makes the world exact; only audited-recoverable phenomena become tasks, and every
task ships a reference solution that was run in the sandbox and matched canonical truth.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal, TypedDict

import numpy as np
from langgraph.graph import END, START, StateGraph

from worldsmith.graphs.runtime import GraphRuntime, emit


class WorldState(TypedDict, total=False):
    domain: str | None
    topic: str | None
    topic_note: str | None
    seed: int
    rows: int | None
    out_dir: str
    contract_source: Literal["template", "llm"]
    make_tasks: bool
    use_llm: bool
    max_tasks: int
    tasks_dir: str | None
    persona: dict[str, Any]
    template_id: str
    contract: dict[str, Any]
    provenance: dict[str, str]
    contract_errors: list[str]
    world: dict[str, Any]
    specs: list[dict[str, Any]]
    tasks: list[str]
    dropped: list[dict[str, Any]]


def build_world_graph(rt: GraphRuntime, checkpointer: Any = None) -> Any:
    settings = rt.settings
    model = settings.llm.for_role("teacher").model

    async def persona(state: WorldState) -> dict[str, Any]:
        from worldsmith.evolution.worlds.templates import list_templates, personas

        domains = sorted({t.domain for t in list_templates()})
        domain, note = state.get("domain"), None
        if not domain and state.get("topic"):
            domain, note = _domain_for_topic(state["topic"])
            emit({"type": "world", "step": "topic", "text": note.removeprefix("topic ")})
        domain = domain or domains[int(np.random.default_rng(state.get("seed", 0)).integers(len(domains)))]
        if domain not in domains:
            raise ValueError(f"unknown domain {domain!r}; choose one of: {', '.join(domains)}")
        options = personas(domain)
        chosen = options[state.get("seed", 0) % len(options)]
        emit({"type": "world", "step": "persona", "text": f"{chosen.name}, {chosen.role} ({domain})"})
        return {"domain": domain, "topic_note": note, "persona": chosen.model_dump(),
                "provenance": {"persona": f"template:personas/{domain}"}}

    async def skeleton(state: WorldState) -> dict[str, Any]:
        from worldsmith.core.world_contract import Persona
        from worldsmith.evolution.worlds.templates import load_template

        template = await asyncio.to_thread(load_template, state["domain"], state.get("rows"))
        template = template.model_copy(update={"persona": Persona(**state["persona"])})
        emit({"type": "world", "step": "skeleton",
              "text": f"{len(template.edges)} edges over {len(template.nodes())} variables (template {template.id})"})
        return {"template_id": template.id, "contract": template.model_dump(mode="json"),
                "provenance": {**state["provenance"], "skeleton": f"template:{template.id}"}}

    async def contract(state: WorldState) -> dict[str, Any]:
        from worldsmith.agents.world_writers import write_contract
        from worldsmith.core.world_contract import Persona, WorldContract

        template = WorldContract.model_validate(state["contract"])
        llm = rt.llm if state.get("contract_source") == "llm" else None
        out = await write_contract(llm, template, Persona(**state["persona"]), model=model,
                                   retries=settings.world.contract_retries)
        emit({"type": "world", "step": "contract", "text": f"contract by {out.produced_by}"
              + (f" after {len(out.errors or [])} problem(s)" if out.errors else "")})
        return {"contract": out.value.model_dump(mode="json"), "contract_errors": out.errors or [],
                "provenance": {**state["provenance"], "contract": out.produced_by}}

    async def build(state: WorldState) -> dict[str, Any]:
        from worldsmith.core.world_contract import WorldContract
        from worldsmith.evolution.worlds.world import build_world

        c = WorldContract.model_validate(state["contract"])
        emit({"type": "world", "step": "engine", "text": f"generating {state.get('rows') or 'template'} rows, seed {state.get('seed', 0)}"})
        result = await asyncio.to_thread(build_world, c, state.get("seed", 0), state["out_dir"], state.get("rows"),
                                         produced_by=state["provenance"]["contract"])
        emit({"type": "world", "step": "audit", "text": _audit_line(result.audit_summary or {})})
        return {"world": result.model_dump(mode="json"), "provenance": {**state["provenance"], "world": "engine"}}

    def route_after_build(state: WorldState) -> Literal["tasks", "__end__"]:
        return "tasks" if state.get("make_tasks") else END

    async def tasks(state: WorldState) -> dict[str, Any]:
        from worldsmith.graphs.world_tasks import write_world_tasks

        written, dropped = await write_world_tasks(rt, Path(state["out_dir"]), Path(state["tasks_dir"] or
                                                   Path(state["out_dir"]) / "tasks"),
                                                   max_tasks=state.get("max_tasks", 10), seed=state.get("seed", 0),
                                                   use_llm=state.get("use_llm", True), topic=state.get("topic"))
        return {"tasks": written, "dropped": dropped}

    g = StateGraph(WorldState)
    for name, fn in (("persona", persona), ("skeleton", skeleton), ("contract", contract), ("build", build),
                     ("tasks", tasks)):
        g.add_node(name, fn)
    g.add_edge(START, "persona")
    g.add_edge("persona", "skeleton")
    g.add_edge("skeleton", "contract")
    g.add_edge("contract", "build")
    g.add_conditional_edges("build", route_after_build)
    g.add_edge("tasks", END)
    return g.compile(checkpointer=checkpointer, name="world")


def _domain_for_topic(topic: str) -> tuple[str | None, str]:
    """The best-matching template's domain for a topic, and a line saying why (or that none matched)."""
    from worldsmith.evolution.worlds.topic import match_topic

    matches = match_topic(topic)
    if not matches:
        return None, f"topic {topic!r} matches no template; domain picked by seed"
    best = matches[0]
    why = ", ".join(best.variables[:3]) if best.variables else "its description"
    return best.domain, f"topic {topic!r} → {best.domain} (matched {why})"


PLURAL = {"edge": "edges", "invariant": "invariants", "phenomenon": "phenomena"}


def _audit_line(summary: dict[str, dict[str, int]]) -> str:
    parts = [f"{PLURAL.get(k, k)} {v.get('pass', 0)}/{v.get('pass', 0) + v.get('fail', 0)} pass" for k, v in summary.items()]
    return "audit: " + ", ".join(parts)


async def run_world_request(rt: GraphRuntime, *, domain: str | None = None, tasks: bool = False,
                            max_tasks: int | None = None, topic: str | None = None, seed: int | None = None,
                            rows: int | None = None, out_dir: Path | None = None) -> dict[str, Any]:
    """What `worldsmith ask "make a world…"` runs: a world (and tasks) in a fresh run directory."""
    from worldsmith.core.runs import RunDir

    run = RunDir.create("world", rt.settings.runs_dir, config=rt.settings.masked())
    out = out_dir or run.path / "world"
    state: WorldState = {"domain": domain, "topic": topic, "seed": rt.settings.world.seed if seed is None else seed,
                         "rows": rows or rt.settings.world.rows, "out_dir": str(out), "make_tasks": tasks,
                         "max_tasks": max_tasks or 10, "tasks_dir": str(run.path / "tasks"),
                         "contract_source": "template"}
    final: dict[str, Any] = {}
    async for mode, chunk in build_world_graph(rt).astream(state, stream_mode=["custom", "values"]):
        if mode == "custom":
            emit(chunk)
            run.event("world_step", **chunk)
        else:
            final = chunk
    await rt.sessions.close_all()
    run.write_json("world_result.json", final.get("world", {}))
    run.write_report(world_report(final))
    run.finish(status="ok", tasks=len(final.get("tasks", [])))
    return {"status": "ok", "run_dir": str(run.path), "world_dir": str(out),
            "tasks_dir": str(run.path / "tasks") if tasks else None, "report": str(run.path / "report.md"),
            "tasks": final.get("tasks", []), "dropped": final.get("dropped", []),
            "topic_note": final.get("topic_note")}


def world_report(final: dict[str, Any]) -> str:
    w = final.get("world", {})
    prov = final.get("provenance", {})
    lines = [f"# World {w.get('world_id', '?')}", "", f"Domain: {final.get('domain')}  ",
             *([f"Topic: {final['topic_note']}  "] if final.get("topic_note") else []), f"Seed: {final.get('seed')}  ",
             f"Rows: {w.get('entity_rows')}  ", "", "## Provenance", ""]
    lines += [f"- {k}: {v}" for k, v in prov.items()]
    lines += ["", "## Audit", "", _audit_line(w.get("audit_summary") or {}), "",
              f"Recoverable phenomena: {', '.join(w.get('recoverable', [])) or 'none'}"]
    if final.get("contract_errors"):
        lines += ["", "## Contract writer problems (fed back to the model)", ""]
        lines += [f"- {e}" for e in final["contract_errors"][:20]]
    if "tasks" in final:
        lines += ["", f"## Tasks ({len(final['tasks'])})", ""] + [f"- {t}" for t in final["tasks"]]
        for d in final.get("dropped", []):
            lines.append(f"- dropped {d.get('id')}: {d.get('reason')}")
    return "\n".join(lines)
