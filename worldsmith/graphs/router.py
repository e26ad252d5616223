"""The router graph: request → typed intent → plan (shown) → run it, or say precisely what is missing.

Streams {"type": "intent"|"plan"|"missing"|...} custom events, and the sub-graph's events when it runs one.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from worldsmith.agents.router import Intent, classify
from worldsmith.graphs.runtime import GraphRuntime, context, emit

HELP = ("I can: answer questions about your data files (\"what drives cancellations in bookings.csv?\"); "
        "generate a synthetic data world with audited files (\"make a world about energy\"); make analysis tasks "
        "from a generated world (\"make 20 hard tasks about churn\"); evaluate the analyst on a task folder or the "
        "DABench share (\"evaluate on ./tasks\").")


class Plan(TypedDict):
    runnable: bool
    steps: list[str]
    missing: list[str]
    command: str


class RouterInput(TypedDict, total=False):
    request: str
    files: list[str]
    execute: bool  # False: classify and plan only


class RouterOutput(TypedDict, total=False):
    intent: dict[str, Any]
    plan: Plan
    result: dict[str, Any]


class RouterState(RouterInput, RouterOutput, total=False):
    pass


def make_plan(intent: Intent, settings: Any) -> Plan:
    files = [f for f in intent.files if Path(f).expanduser().exists()]
    missing_files = [f for f in intent.files if not Path(f).expanduser().exists()]
    missing: list[str] = [f"{f} does not exist" for f in missing_files]
    if intent.action == "answer_question":
        if not files:
            missing.append("a data file to analyse: attach one, e.g. worldsmith ask \"...\" data.csv")
        names = " ".join(f'"{f}"' for f in files)
        return Plan(runnable=not missing, missing=missing, command=f'worldsmith ask "{intent.question}" {names}'.strip(),
                    steps=[f"profile {len(files)} file(s)", "analyst: think → code in the sandbox → answer",
                           "save the trajectory in the run directory"])
    if intent.action in ("make_world", "make_tasks"):
        if intent.action == "make_tasks" and (files or missing_files):
            return _evolution_plan(intent, files, missing)
        domain = intent.domain or (f"the template domain that best matches {intent.topic!r}" if intent.topic
                                   else "a template domain")
        n = intent.count or (1 if intent.action == "make_world" else 10)
        steps = [f"generate a world ({domain}) from its contract template", "project imperfect observed files",
                 "audit every edge, invariant and phenomenon from the observed files"]
        topic = f" --topic {shlex.quote(intent.topic)}" if intent.topic else ""
        cmd = f"worldsmith world new{' --domain ' + intent.domain if intent.domain else ''}{topic} OUT"
        if intent.action == "make_tasks":
            about = f" about {intent.topic!r} first" if intent.topic else ""
            steps.append(f"write up to {n} tasks{about} with rubrics and verified reference solutions")
            cmd += f" && worldsmith world tasks OUT --max-tasks {n}{topic}"
        return Plan(runnable=not missing, steps=steps, missing=missing, command=cmd)
    if intent.action == "evaluate":
        if not files:
            missing.append("a task collection folder or a DABench-format folder to evaluate on")
        return Plan(runnable=not missing, missing=missing, command=f"worldsmith eval --tasks {files[0] if files else 'PATH'}",
                    steps=["load the tasks", "solve each with the analyst", "grade and report pass@1 / pass@k"])
    if intent.action == "train":
        return Plan(runnable=False, steps=[], command="", missing=[
            "training (SFT + DAPO) is not available in this version yet; today you can generate tasks "
            "(worldsmith world tasks) and evaluate (worldsmith eval), whose trajectories will be its data"])
    if intent.action == "help":
        return Plan(runnable=True, steps=[HELP], missing=[], command="worldsmith --help")
    return Plan(runnable=False, steps=[], command="", missing=["I could not tell what you want. " + HELP])


def _evolution_plan(intent: Intent, files: list[str], missing: list[str]) -> Plan:
    """Tasks from the person's own folder: workspace evolution over it, then backward task synthesis."""
    folders = [f for f in files if Path(f).expanduser().is_dir()]
    if files and not folders:
        missing.append("tasks from your own files come from workspace evolution over a folder: name the folder "
                       "that holds them (e.g. ./data)")
    n = intent.count or 10
    folder = folders[0] if folders else "DATA_DIR"
    steps, nodes = evolution_budget(n)
    return Plan(runnable=not missing, missing=missing,
                command=f"worldsmith evolve {shlex.quote(folder)} --steps {steps} --max-nodes {nodes} --tasks {n}",
                steps=[f"profile the files of {folder}", (f"evolve it for up to {steps} rounds ({nodes} nodes): "
                                                          "director → proposer → executor ⇄ validator, verified "
                                                          "findings only"),
                       f"synthesise up to {n} tasks backward from shallow and deep findings, with validated rubrics"])


def evolution_budget(tasks: int) -> tuple[int, int]:
    """(director rounds, nodes) for a request of ``tasks`` tasks: a node per task, two directions per round."""
    nodes = max(2, tasks)
    return max(2, -(-nodes // 2)), nodes


async def understand(state: RouterState, runtime: Runtime[GraphRuntime]) -> dict[str, Any]:
    """The request (and attached files) → a typed intent."""
    intent = await classify(context(runtime).llm, state["request"], state.get("files"))
    emit({"type": "intent", "intent": intent.model_dump()})
    return {"intent": intent.model_dump()}


async def plan(state: RouterState, runtime: Runtime[GraphRuntime]) -> dict[str, Any]:
    """The intent → a plan the person sees, with what is missing to run it."""
    p = make_plan(Intent.model_validate(state["intent"]), context(runtime).settings)
    emit({"type": "plan", "plan": dict(p)})
    if p["missing"]:
        emit({"type": "missing", "items": p["missing"]})
    return {"plan": p}


def route(state: RouterState) -> Literal["run", "__end__"]:
    return "run" if state["plan"]["runnable"] and state.get("execute", True) else END


async def run(state: RouterState, runtime: Runtime[GraphRuntime]) -> dict[str, Any]:
    """Run the plan with the runtime's actions (the application layer supplies them: graphs never import app)."""
    rt = context(runtime)
    if rt.actions is None:
        raise RuntimeError("router: the runtime has no actions to run a plan with; build it with "
                           "worldsmith.app.runtime.make_runtime(settings), or invoke with execute=False to plan only")
    return {"result": await rt.actions(Intent.model_validate(state["intent"]), state["plan"], rt)}


def build_router_graph(checkpointer: Any = None) -> Any:
    """The compiled router graph; invoke it with ``context=rt`` (a GraphRuntime whose ``actions`` run plans).

    No ``context_schema``: LangGraph coerces a dict context into a dataclass schema, and ``langgraph dev`` passes a
    dict (GraphRuntime(**{}) fails); without one the served graph gets the dict and ``context()`` falls back."""
    g = StateGraph(RouterState, input_schema=RouterInput, output_schema=RouterOutput)
    g.add_node("understand", understand)
    g.add_node("plan", plan)
    g.add_node("run", run)
    g.add_edge(START, "understand")
    g.add_edge("understand", "plan")
    g.add_conditional_edges("plan", route)
    g.add_edge("run", END)
    return g.compile(checkpointer=checkpointer, name="router")
