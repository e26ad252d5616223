"""World building and world task writing as services: each call leaves a run directory (config.json, events.jsonl,
report.md, request.json and the pipeline's step-wise storage), and `resume_*` continues a killed run in place.

The CLI (`worldsmith world new|tasks`), the router (`run_world_request`) and the LangGraph server all end in the
same world graph and pipelines (`graphs/world.py`); this layer adds only the run directory and the report.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from worldsmith.core.runs import RunDir
from worldsmith.core.store import atomic_write_text
from worldsmith.graphs.runtime import GraphRuntime
from worldsmith.graphs.world import DEFAULT_MAX_TASKS, WorldInput, build_world_graph, write_world_tasks
from worldsmith.graphs.world_ops import audit_line

OnEvent = Callable[[dict[str, Any]], None]


def _forward(run: RunDir, on_event: OnEvent | None) -> OnEvent:
    def forward(event: dict[str, Any]) -> None:
        run.event("world_step", **event)
        if on_event is not None:
            on_event(event)
    return forward


async def build_world_run(rt: GraphRuntime, request: WorldInput, *, run: RunDir | None = None,
                          on_event: OnEvent | None = None) -> tuple[RunDir, dict[str, Any]]:
    """Run the world graph for one request in a run directory (a new one, or `run` to resume it)."""
    if run is None:
        run = RunDir.create("world", rt.settings.runs_dir, config=rt.settings.masked())
        run.write_json("request.json", request)
    forward = _forward(run, on_event)
    final: dict[str, Any] = {}
    try:
        async for mode, chunk in build_world_graph().astream({**request, "pipeline_dir": str(run.path)}, context=rt,
                                                             stream_mode=["custom", "values"]):
            if mode == "custom":
                forward(chunk)
            else:
                final = chunk
    except BaseException as exc:
        run.finish(status="failed", error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise
    finally:
        await rt.sessions.close_all()
    report = world_report(final)
    run.write_json("world_result.json", final.get("world", {}))
    run.write_report(report)
    _write_world_report(Path(request["out_dir"]), final, report)
    run.finish(status="ok", tasks=len(final.get("tasks", [])))
    return run, final


def _write_world_report(out: Path, final: dict[str, Any], report: str) -> None:
    """REPORT.md beside the world: written by the run that built it, or that wrote tasks for it; a run that only
    found the identical world in place leaves the report of the run that built it as it was."""
    if not out.is_dir() or (final.get("world", {}).get("skipped") and "tasks" not in final):
        return
    path = out / "REPORT.md"
    if not (path.is_file() and path.read_text(encoding="utf-8") == report + "\n"):
        atomic_write_text(path, report + "\n")


async def resume_world_run(rt: GraphRuntime, run_dir: Path, *, on_event: OnEvent | None = None
                           ) -> tuple[RunDir, dict[str, Any]]:
    """Continue a killed `world new` run from its first unfinished step."""
    request = _request(run_dir)
    return await build_world_run(rt, request, run=RunDir.open(run_dir), on_event=on_event)


async def world_tasks_run(rt: GraphRuntime, world_dir: Path, tasks_dir: Path, *, max_tasks: int = DEFAULT_MAX_TASKS,
                          seed: int = 0, topic: str | None = None, use_llm: bool = True, run: RunDir | None = None,
                          on_event: OnEvent | None = None) -> tuple[RunDir, list[str], list[dict[str, Any]]]:
    """Write tasks for an audited world in a run directory (a new one, or `run` to resume it)."""
    request = {"world_dir": str(world_dir.resolve()), "tasks_dir": str(tasks_dir.resolve()), "max_tasks": max_tasks,
               "seed": seed, "topic": topic, "use_llm": use_llm}
    if run is None:
        run = RunDir.create("world-tasks", rt.settings.runs_dir, config=rt.settings.masked())
        run.write_json("request.json", request)
    try:
        written, dropped = await write_world_tasks(rt, run.path / "tasks", world_dir, tasks_dir, max_tasks=max_tasks,
                                                   seed=seed, topic=topic, use_llm=use_llm,
                                                   on_event=_forward(run, on_event))
    except BaseException as exc:
        run.finish(status="failed", error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise
    finally:
        await rt.sessions.close_all()
    run.write_report("\n".join([f"# Tasks for {world_dir}", "", f"Collection: {tasks_dir}", ""]
                               + [f"- {t}" for t in written] + [f"- dropped {d['id']}: {d['reason']}" for d in dropped]))
    run.finish(status="ok" if written else "failed", tasks=len(written), dropped=len(dropped))
    return run, written, dropped


async def resume_world_tasks_run(rt: GraphRuntime, run_dir: Path, *, on_event: OnEvent | None = None
                                 ) -> tuple[RunDir, list[str], list[dict[str, Any]]]:
    """Continue a killed `world tasks` run from its first unfinished step (and row)."""
    r = _request(run_dir)
    return await world_tasks_run(rt, Path(r["world_dir"]), Path(r["tasks_dir"]), max_tasks=r["max_tasks"],
                                 seed=r["seed"], topic=r["topic"], use_llm=r["use_llm"], run=RunDir.open(run_dir),
                                 on_event=on_event)


def _request(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / "request.json"
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir}: not a resumable world run (no request.json)")
    return json.loads(path.read_text(encoding="utf-8"))


async def run_world_request(rt: GraphRuntime, *, domain: str | None = None, tasks: bool = False,
                            max_tasks: int | None = None, topic: str | None = None, seed: int | None = None,
                            rows: int | None = None, out_dir: Path | None = None) -> dict[str, Any]:
    """What `worldsmith ask "make a world…"` runs: a world (and tasks) in a fresh run directory."""
    run = RunDir.create("world", rt.settings.runs_dir, config=rt.settings.masked())
    request: WorldInput = {"domain": domain, "topic": topic, "seed": seed, "rows": rows, "make_tasks": tasks,
                           "max_tasks": max_tasks, "out_dir": str(out_dir or run.path / "world"),
                           "tasks_dir": str(run.path / "tasks"), "contract_source": "template"}
    run.write_json("request.json", request)
    from worldsmith.graphs.runtime import emit

    run, final = await build_world_run(rt, request, run=run, on_event=emit)
    return {"status": "ok", "run_dir": str(run.path), "world_dir": request["out_dir"],
            "tasks_dir": request["tasks_dir"] if tasks else None, "report": str(run.path / "report.md"),
            "tasks": final.get("tasks", []), "dropped": final.get("dropped", []), "topic_note": final.get("topic_note")}


def world_report(final: dict[str, Any]) -> str:
    w = final.get("world", {})
    prov = final.get("provenance", {})
    lines = [f"# World {w.get('world_id', '?')}", "", f"Domain: {final.get('domain')}  ",
             *([f"Topic: {final['topic_note']}  "] if final.get("topic_note") else []), f"Seed: {final.get('seed')}  ",
             f"Rows: {w.get('entity_rows')}  ", "", "## Provenance", ""]
    lines += [f"- {k}: {v}" for k, v in prov.items()]
    audit = audit_line(w["audit_summary"]) if w.get("audit_summary") else "audit: not run"
    lines += ["", "## Audit", "", audit, "", f"Recoverable phenomena: {', '.join(w.get('recoverable', [])) or 'none'}"]
    if w.get("skipped"):
        lines += ["", ("Not rebuilt: an identical world was already in place and matched its manifest; "
                       "the figures above are from its stored audit.")]
    if final.get("contract_errors"):
        lines += ["", "## Contract writer problems (fed back to the model)", ""]
        lines += [f"- {e}" for e in final["contract_errors"][:20]]
    if "tasks" in final:
        lines += ["", f"## Tasks ({len(final['tasks'])})", ""] + [f"- {t}" for t in final["tasks"]]
        for d in final.get("dropped", []):
            lines.append(f"- dropped {d.get('id')}: {d.get('reason')}")
    return "\n".join(lines)
