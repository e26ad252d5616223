"""What the router runs for each runnable intent; each action leaves a run directory.

The router graph reaches these through its runtime (``GraphRuntime.actions``), so graphs never import app."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from worldsmith.agents.router import Intent
from worldsmith.graphs.runtime import GraphRuntime


async def dispatch(intent: Intent, plan: dict[str, Any], rt: GraphRuntime) -> dict[str, Any]:
    if intent.action == "answer_question":
        from worldsmith.app.ask import answer_question

        # the user's words verbatim; the router's intent travels beside them, into the run and the trajectory
        return await answer_question(rt, intent.question or "", intent.files, intent=intent.model_dump(mode="json"))
    if intent.action == "help":
        return {"text": plan["steps"][0]}
    folders = [f for f in intent.files if Path(f).expanduser().is_dir()]
    if intent.action == "make_tasks" and folders:
        from worldsmith.app.evolve import evolve_request

        return await evolve_request(rt, Path(folders[0]).expanduser(), tasks=intent.count or 10)
    if intent.action in ("make_world", "make_tasks"):
        from worldsmith.app.world import run_world_request

        return await run_world_request(rt, domain=intent.domain, tasks=intent.action == "make_tasks",
                                       max_tasks=intent.count, topic=intent.topic)
    if intent.action == "evaluate":
        from worldsmith.app.eval import evaluate_path

        return await evaluate_path(rt, Path(intent.files[0]))
    raise ValueError(f"nothing to run for intent {intent.action!r}")
