"""The evolution graph (issue 13, item 7): setup (root snapshot, document memory, profiler) → plan (director →
decomposer → proposer, search retrieval) → branch (each planned node: executor ⇄ validator review loop → commit or
discard, independent nodes concurrently, bounded) → memory → plan … until the budget (steps, depth, nodes, review
rounds, tokens) is spent or the director has nothing left.

Compiled without a runtime; invoked with ``context=GraphRuntime`` (LLM, settings). Give it a checkpointer (the
application uses SQLite in the run directory) and a killed run resumes from its last finished step; the branch
step itself is idempotent (see ``evolve_ops``), so a kill inside it costs the unfinished nodes' work, never a
duplicate node. Custom stream events: {"type": "setup" | "plan" | "node" | "stop", ...}.
"""

from __future__ import annotations

import asyncio
import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from worldsmith.core.evolution_schemas import EvolveConfig, NodeRun, ProfilerOutput
from worldsmith.graphs import evolve_ops as ops
from worldsmith.graphs.runtime import GraphRuntime, context, emit

#: Consecutive director rounds without a usable plan after which the run stops.
MAX_IDLE_ROUNDS = 2


class EvolveInput(TypedDict, total=False):
    data_dir: str
    run_dir: str
    config: dict[str, Any]  # an EvolveConfig dump


class EvolveState(EvolveInput, total=False):
    root: int
    profile: dict[str, Any]  # a ProfilerOutput dump
    tables: dict[str, Any]  # the data's tables: {"text": one line each, "columns": table → column names}
    step: int
    idle: int  # consecutive rounds that planned nothing
    refused: list[str]  # why the last round's director plan was refused (empty after a round that planned)
    tokens: int
    items: list[dict[str, Any]]
    runs: Annotated[list[dict[str, Any]], operator.add]  # one summary per finished node
    notes: Annotated[list[str], operator.add]
    stop: str | None


def _cfg(state: EvolveState) -> EvolveConfig:
    return EvolveConfig.model_validate(state.get("config") or {})


async def setup(state: EvolveState, runtime: Runtime[GraphRuntime]) -> dict[str, Any]:
    rt = context(runtime)
    run_dir, data_dir, cfg = Path(state["run_dir"]), Path(state["data_dir"]), _cfg(state)
    store = await asyncio.to_thread(ops.open_store, run_dir)
    await asyncio.to_thread(store.sweep_temps)
    nodes = await asyncio.to_thread(store.graph.nodes)
    root = nodes[0] if nodes else await asyncio.to_thread(store.create_root, data_dir)
    memory = await asyncio.to_thread(ops.open_memory, run_dir, rt.llm)
    notes = await ops.ingest_documents(memory, data_dir, cfg.docs)
    prof, tables, tokens, errors = await ops.profile_root(rt.llm, data_dir)
    if errors:
        notes.append("profiler failed; the file tools' profile stands in: " + "; ".join(errors))
    emit({"type": "setup", "root": root.id, "overview": prof.workspace.overview, "notes": notes})
    return {"root": root.id, "profile": prof.model_dump(mode="json"), "tables": tables, "step": 0, "idle": 0, "tokens": tokens,
            "items": [], "runs": [], "notes": notes, "stop": None}


async def _budget_left(state: EvolveState, cfg: EvolveConfig) -> str | None:
    """Why the run must stop now (None while budget is left)."""
    b = cfg.budget
    if state.get("step", 0) >= b.steps:
        return f"steps: {b.steps} director rounds done"
    store = await asyncio.to_thread(ops.open_store, state["run_dir"])
    made = len(await asyncio.to_thread(store.graph.nodes)) - 1
    if made >= b.max_nodes:
        return f"nodes: {made} of {b.max_nodes} made"
    if state.get("tokens", 0) >= b.max_tokens:
        return f"tokens: {state.get('tokens', 0)} of {b.max_tokens} used"
    if state.get("idle", 0) >= MAX_IDLE_ROUNDS:
        return f"director: {MAX_IDLE_ROUNDS} rounds in a row planned nothing"
    return None


async def plan(state: EvolveState, runtime: Runtime[GraphRuntime]) -> dict[str, Any]:
    rt, cfg = context(runtime), _cfg(state)
    if (why := await _budget_left(state, cfg)) is not None:
        emit({"type": "stop", "reason": why})
        return {"stop": why, "items": []}
    run_dir = Path(state["run_dir"])
    store = await asyncio.to_thread(ops.open_store, run_dir)
    memory = await asyncio.to_thread(ops.open_memory, run_dir, rt.llm)
    prof = ProfilerOutput.model_validate(state["profile"])
    items, tokens, errors = await ops.plan_round(rt.llm, store, memory, cfg, prof, state.get("tables"),
                                                 state.get("refused"))
    made = len(await asyncio.to_thread(store.graph.nodes)) - 1
    items = items[: max(0, cfg.budget.max_nodes - made)]
    step = state.get("step", 0) + 1
    emit({"type": "plan", "step": step, "items": [{"mode": i["mode"], "question": i["question"]} for i in items],
          "errors": errors[-3:]})
    if not items and errors and "no node can be expanded" in errors[-1]:
        return {"stop": errors[-1].removeprefix("director: "), "items": [], "step": step,
                "tokens": state.get("tokens", 0) + tokens, "notes": errors[-3:]}
    refused = [] if items else [e.removeprefix("director: ") for e in errors if e.startswith("director: ")][-3:]
    return {"items": items, "step": step, "idle": 0 if items else state.get("idle", 0) + 1, "refused": refused,
            "tokens": state.get("tokens", 0) + tokens, "notes": [f"round {step}: {e}" for e in errors[-3:]]}


async def branch(state: EvolveState, runtime: Runtime[GraphRuntime]) -> dict[str, Any]:
    """The round's planned nodes, at most ``concurrency`` at once (they are independent: siblings or compositions
    of finished nodes), then memory."""
    rt, cfg = context(runtime), _cfg(state)
    run_dir = Path(state["run_dir"])
    store = await asyncio.to_thread(ops.open_store, run_dir)
    gate = asyncio.Semaphore(cfg.concurrency)

    items = state.get("items", [])
    claimed = [await ops.claim_node(store, item) for item in items]

    async def one(item: dict[str, Any], node: Any) -> NodeRun:
        async with gate:
            run = await ops.run_node(rt.llm, store, rt.settings.sandbox, cfg, run_dir, item, node)
        emit({"type": "node", "node": run.node, "mode": run.mode, "status": run.status, "question": run.question})
        return run

    runs = await asyncio.gather(*(one(i, n) for i, n in zip(items, claimed)))
    memory = await asyncio.to_thread(ops.open_memory, run_dir, rt.llm)
    await ops.remember(memory, store, list(runs))
    return {"items": [], "tokens": state.get("tokens", 0) + sum(r.tokens for r in runs),
            "runs": [{"node": r.node, "mode": r.mode, "status": r.status, "tokens": r.tokens} for r in runs]}


def _after_plan(state: EvolveState) -> str:
    if state.get("stop"):
        return END
    return "branch" if state.get("items") else "plan"


def build_evolve_graph(checkpointer: Any = None) -> Any:
    g = StateGraph(EvolveState, input_schema=EvolveInput)
    g.add_node("setup", setup)
    g.add_node("plan", plan)
    g.add_node("branch", branch)
    g.add_edge(START, "setup")
    g.add_edge("setup", "plan")
    g.add_conditional_edges("plan", _after_plan, ["branch", "plan", END])
    g.add_edge("branch", "plan")
    return g.compile(checkpointer=checkpointer, name="evolve")


def recursion_limit(cfg: EvolveConfig) -> int:
    """LangGraph supersteps a run may take: setup, then at most two per round plus idle rounds and the stop."""
    return 2 * cfg.budget.steps + MAX_IDLE_ROUNDS + 6
