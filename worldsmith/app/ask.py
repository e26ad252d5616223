"""Ask: one analyst trajectory over the given files, saved as trajectory.json + report.md in a run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from worldsmith.core.runs import RunDir
from worldsmith.core.schemas import Trajectory
from worldsmith.core.store import write_model
from worldsmith.graphs.analyst import build_analyst_graph, initial_state
from worldsmith.graphs.runtime import GraphRuntime, emit


async def answer_question(rt: GraphRuntime, question: str, files: list[str], *, run: RunDir | None = None,
                          intent: dict[str, Any] | None = None) -> dict[str, Any]:
    """One analyst trajectory over the given files; saved as trajectory.json + report.md in a run directory.

    `question` reaches the analyst as given (the user's words); `intent`, the router's reading, is recorded beside
    it (the run's question event and the trajectory's metadata) and never shown to the model."""
    run = run or RunDir.create("ask", rt.settings.runs_dir, config=rt.settings.masked())
    run.event("question", question=question, files=files, **({"intent": intent} if intent else {}))
    graph = build_analyst_graph()
    session = run.path.name
    state = initial_state(question, [str(Path(f).expanduser().resolve()) for f in files], session_id=session,
                          workspace=str(run.path / "workspace"), intent=intent)
    cfg = {"recursion_limit": 8 * rt.settings.analyst.max_turns + 20}
    out: dict[str, Any] = {}
    try:  # forward the analyst's events to whoever streams the calling graph
        async for mode, chunk in graph.astream(state, cfg, context=rt, stream_mode=["custom", "values"]):
            if mode == "custom":
                emit(chunk)
            else:
                out = chunk
    finally:
        await rt.sessions.close(session)
    traj = Trajectory.model_validate(out["trajectory"])
    write_model(run.path / "trajectory.json", traj)
    run.write_report(trajectory_report(question, files, traj))
    run.finish(status=traj.status, turns=len(traj.steps))
    return {"answer": traj.answer_to_grade, "status": traj.status, "run_dir": str(run.path),
            "trajectory": str(run.path / "trajectory.json")}


def trajectory_report(question: str, files: list[str], traj: Trajectory) -> str:
    lines = [f"# {question}", "", f"Files: {', '.join(files) or '(none)'}  ", f"Model: {traj.model} ({traj.provider})  ",
             f"Status: {traj.status} after {len(traj.steps)} turn(s), {traj.time_s:.1f} s, "
             f"{traj.prompt_tokens}+{traj.completion_tokens} tokens", ""]
    for s in traj.steps:
        lines.append(f"## Turn {s.index + 1}")
        if s.thought:
            lines += [f"*{s.thought}*", ""]
        if s.void:
            lines += [f"(void turn: {s.void_reason})", ""]
        elif s.action and s.action.kind == "code":
            lines += ["```python", s.action.content, "```", "", "```", (s.observation or "").strip(), "```", ""]
        elif s.action:
            lines += ["**Answer:**", "", s.action.content, ""]
    lines += ["## Final answer", "", traj.final_answer or "(no answer)"]
    for p in traj.postprocess:
        lines += ["", f"Post-processed ({p.kind}: {p.reason}): {p.after}"]
    for g in traj.guards:
        what = "Setup run again after the cell" if g.kind == "setup_restored" else "Answer guard"
        lines += ["", f"{what} {g.kind} on turn {g.step + 1} ({'re-asked' if g.reasked else 'kept'}): {g.detail}"]
    return "\n".join(lines)
