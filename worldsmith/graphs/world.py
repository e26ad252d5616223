"""The world graph: prepare → build (persona → skeleton → contract → engine + projection + audit) → tasks
(specs → requests → verified solutions → packages).

Each of `build` and `tasks` runs a compiled pipeline (`graphs/world_ops.py`) over step-wise storage in the run
directory, so a killed world build or task writing resumes where it stopped. LLM agents write the contract
(optional, validated with feedback) and the stakeholder requests; the deterministic engine makes the world exact;
only audited-recoverable phenomena become tasks, and every task ships a reference solution that was run in the
sandbox and matched canonical truth.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from worldsmith.core.config import Settings
from worldsmith.core.pipeline import Pipeline
from worldsmith.core.runs import RunDir
from worldsmith.core.storage import StepStorage
from worldsmith.graphs.runtime import GraphRuntime, context, emit
from worldsmith.graphs.world_ops import (BuildWorld, PackageTasks, PickPersona, SampleTaskSpecs, SkeletonFromTemplate,
                                         VerifySolutions, WriteContract, WriteRequests)

DEFAULT_MAX_TASKS = 10


class WorldInput(TypedDict, total=False):
    domain: str | None
    topic: str | None
    seed: int | None
    rows: int | None
    out_dir: str
    contract_source: Literal["template", "llm"]
    overwrite: bool  # replace a different or altered world in out_dir (atomically, once the new one is complete)
    make_tasks: bool
    use_llm: bool
    max_tasks: int | None
    tasks_dir: str | None
    pipeline_dir: str | None  # where the step-wise storage lives (default: a fresh run directory)


class WorldOutput(TypedDict, total=False):
    domain: str
    topic_note: str | None
    seed: int | None
    persona: dict[str, Any]
    template_id: str
    provenance: dict[str, str]
    contract_errors: list[str]
    world: dict[str, Any]
    tasks: list[str]
    dropped: list[dict[str, Any]]
    pipeline_dir: str | None


class WorldState(WorldInput, WorldOutput, total=False):
    pass


def with_defaults(state: WorldInput, settings: Settings) -> WorldInput:
    """The one place world requests get their defaults (CLI, router and `langgraph dev` alike)."""
    out = Path(state["out_dir"]).resolve()
    return {**state, "out_dir": str(out), "domain": state.get("domain"), "topic": state.get("topic"),
            "seed": settings.world.seed if state.get("seed") is None else state["seed"],
            "rows": state.get("rows") or settings.world.rows,
            "contract_source": state.get("contract_source") or "template", "overwrite": bool(state.get("overwrite")),
            "make_tasks": bool(state.get("make_tasks")), "use_llm": state.get("use_llm", True),
            "max_tasks": state.get("max_tasks") or DEFAULT_MAX_TASKS,
            "tasks_dir": str(Path(state.get("tasks_dir") or out / "tasks").resolve())}


def world_pipeline(rt: GraphRuntime) -> Pipeline:
    s = rt.settings
    return (Pipeline("world")
            .add(PickPersona())
            .add(SkeletonFromTemplate())
            .add(WriteContract(rt.llm, model=s.llm.for_role("teacher").model, retries=s.world.contract_retries))
            .add(BuildWorld())
            .compile(WORLD_COLUMNS))


WORLD_COLUMNS = ("domain", "topic", "seed", "rows", "out_dir", "contract_source", "overwrite")
TASK_COLUMNS = ("world_dir", "tasks_dir", "seed", "topic", "max_tasks")


def tasks_pipeline(rt: GraphRuntime, *, use_llm: bool = True) -> Pipeline:
    s = rt.settings
    return (Pipeline("world_tasks")
            .add(SampleTaskSpecs())
            .add(WriteRequests(rt.llm if use_llm else None, model=s.llm.for_role("teacher").model,
                               concurrency=s.world.concurrency))
            .add(VerifySolutions(s.sandbox, timeout_s=max(s.sandbox.timeout_s, 120), concurrency=s.world.concurrency))
            .add(PackageTasks())
            .compile(TASK_COLUMNS))


async def write_world_tasks(rt: GraphRuntime, storage_dir: Path, world_dir: Path, tasks_dir: Path, *,
                            max_tasks: int = DEFAULT_MAX_TASKS, seed: int = 0, topic: str | None = None,
                            use_llm: bool = True,
                            on_event: Callable[[dict[str, Any]], None] | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """World task writing as a resumable pipeline in `storage_dir`: (task ids written, phenomena dropped)."""
    storage = StepStorage(storage_dir, on_event=on_event or emit)
    row = {"world_dir": str(world_dir.resolve()), "tasks_dir": str(tasks_dir.resolve()), "seed": seed, "topic": topic,
           "max_tasks": max_tasks}
    rows = await tasks_pipeline(rt, use_llm=use_llm).arun(storage, [row])
    written = [t for r in rows for t in r["task_ids"]]
    dropped = list({d["id"]: d for r in rows for d in r["dropped"]}.values())
    return written, dropped


async def prepare(state: WorldInput, runtime: Runtime[GraphRuntime]) -> dict[str, Any]:
    rt = context(runtime)
    out = with_defaults(state, rt.settings)
    if not out.get("pipeline_dir"):
        out["pipeline_dir"] = str(RunDir.create("world", rt.settings.runs_dir, config=rt.settings.masked()).path)
    return dict(out)


async def build(state: WorldState, runtime: Runtime[GraphRuntime]) -> dict[str, Any]:
    rt = context(runtime)
    storage = StepStorage(Path(state["pipeline_dir"]) / "world", on_event=emit)
    [row] = await world_pipeline(rt).arun(storage, [{k: state.get(k) for k in WORLD_COLUMNS}])
    return {"domain": row["domain"], "topic_note": row["topic_note"], "persona": row["persona"],
            "template_id": row["template_id"], "contract_errors": row["contract_errors"], "world": row["world"],
            "provenance": {"persona": f"template:personas/{row['domain']}", "skeleton": f"template:{row['template_id']}",
                           "contract": row["contract_by"], "world": "engine"}}


def route_after_build(state: WorldState) -> Literal["tasks", "__end__"]:
    return "tasks" if state.get("make_tasks") else END


async def tasks(state: WorldState, runtime: Runtime[GraphRuntime]) -> dict[str, Any]:
    written, dropped = await write_world_tasks(context(runtime), Path(state["pipeline_dir"]) / "tasks",
                                               Path(state["out_dir"]), Path(state["tasks_dir"]),
                                               max_tasks=state["max_tasks"], seed=state["seed"], topic=state.get("topic"),
                                               use_llm=state.get("use_llm", True))
    return {"tasks": written, "dropped": dropped}


def build_world_graph(checkpointer: Any = None) -> Any:
    """The world graph; invoke it with ``context=rt``. No ``context_schema``: ``langgraph dev`` passes a dict context,
    which LangGraph would coerce into the dataclass and fail; nodes resolve the runtime with ``context(runtime)``."""
    g = StateGraph(WorldState, input_schema=WorldInput, output_schema=WorldOutput)
    g.add_node("prepare", prepare)
    g.add_node("build", build)
    g.add_node("tasks", tasks)
    g.add_edge(START, "prepare")
    g.add_edge("prepare", "build")
    g.add_conditional_edges("build", route_after_build)
    g.add_edge("tasks", END)
    return g.compile(checkpointer=checkpointer, name="world")
