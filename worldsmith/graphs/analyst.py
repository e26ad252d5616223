"""The analyst graph: profile → (think/act → execute → observe)* → answer check → trajectory.

State is plain data (checkpointable); the LLM and sandboxes come from a GraphRuntime. A chat thread is one
graph thread: a new question continues the conversation and the same sandbox (variables persist).
Custom stream events (`stream_mode="custom"`): {"type": thought|code|output|plot|answer|feedback|done, ...}.
"""

from __future__ import annotations

import asyncio
import operator
import re
import time
import uuid
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from worldsmith.agents import analyst as agent
from worldsmith.core.schemas import ExecSummary, Step, Trajectory
from worldsmith.graphs.runtime import GraphRuntime, emit
from worldsmith.tools.grammar import render_observation, render_turn

ROLE = "agent"


class AnalystState(TypedDict, total=False):
    question: str
    files: list[str]
    task_id: str
    answer_names: list[str]
    categories: list[str]
    hints: str
    sample_index: int
    temperature: float
    session_id: str
    workspace: str
    messages: Annotated[list[dict[str, str]], operator.add]
    steps: Annotated[list[dict[str, Any]], operator.add]
    q_first_step: int
    user_prompt: str
    turn: int
    retries_left: int
    status: str
    final_answer: str | None
    error: str | None
    pending: dict[str, Any] | None
    trajectory: dict[str, Any] | None
    started: float


def build_analyst_graph(rt: GraphRuntime, checkpointer: Any = None) -> Any:
    cfg = rt.settings.analyst

    def _names(state: AnalystState) -> list[str]:
        return agent.required_names(state.get("question", ""), state.get("answer_names"))

    async def prepare(state: AnalystState, config: RunnableConfig) -> dict[str, Any]:
        if not state.get("question", "").strip():
            raise ValueError("the analyst needs a non-empty question")
        session_id = state.get("session_id") or (config.get("configurable") or {}).get("thread_id") or uuid.uuid4().hex
        new, user_prompt = await asyncio.to_thread(_opening, state, _names(state), cfg.profile_chars)
        emit({"type": "status", "text": "thinking"})
        return {"messages": new, "session_id": session_id, "turn": 0, "retries_left": cfg.format_retries,
                "status": "running", "final_answer": None, "error": None, "pending": None, "trajectory": None,
                "q_first_step": len(state.get("steps", [])), "user_prompt": user_prompt, "started": time.time()}

    async def act(state: AnalystState) -> dict[str, Any]:
        turn = state.get("turn", 0)
        msgs = list(state["messages"])
        extra: list[dict[str, str]] = []
        if turn == cfg.max_turns - 1 and turn > 0:
            extra.append({"role": "user", "content": agent.LAST_TURN_NUDGE})
        d = await agent.decide(rt.llm, msgs + extra, role=ROLE, max_tokens=cfg.max_tokens,
                               temperature=state.get("temperature"), sample_index=state.get("sample_index", 0))
        index = len(state.get("steps", []))
        base = {"index": index, "raw": d.raw, "thought": d.turn.thought, "prompt_tokens": d.prompt_tokens,
                "completion_tokens": d.completion_tokens, "latency_s": d.latency_s}
        if d.turn.thought:
            emit({"type": "thought", "text": d.turn.thought, "turn": turn})
        update: dict[str, Any] = {"turn": turn + 1, "messages": extra}
        if d.turn.action is None:
            step = Step(**base, void=True, void_reason=d.turn.error or "no action")
            feedback = agent.void_feedback(d.turn.error)
            emit({"type": "feedback", "text": feedback})
            update.update(steps=[step.model_dump(mode="json")], pending=None,
                          messages=extra + [{"role": "assistant", "content": d.raw},
                                            {"role": "user", "content": feedback}])
            return update
        base["action"] = d.turn.action.model_dump()
        update["pending"] = base
        update["messages"] = extra + [{"role": "assistant", "content": render_turn(d.turn.thought, d.turn.action)}]
        return update

    def route_after_act(state: AnalystState) -> Literal["execute", "check", "act", "finalize"]:
        pending = state.get("pending")
        if pending is None:
            return "finalize" if state.get("turn", 0) >= cfg.max_turns else "act"
        return "execute" if pending["action"]["kind"] == "code" else "check"

    async def execute(state: AnalystState) -> dict[str, Any]:
        pending = dict(state["pending"] or {})
        code = pending["action"]["content"]
        emit({"type": "code", "code": code})
        sb, fresh = await rt.sessions.get(state["session_id"], state.get("files", []), state.get("workspace"))
        if fresh:
            await sb.run(agent.PRELUDE)
            await _replay(sb, state.get("steps", []))
        result = await sb.run(code, timeout=cfg.cell_timeout_s)
        observation = agent.observation_text(result, cfg.max_observation_chars)
        previous = next((s for s in reversed(state.get("steps", [])) if s.get("action")), None)
        if previous and previous["action"] == pending["action"] and _same_output(previous.get("observation") or "", observation):
            observation += agent.REPEAT_NUDGE  # weak models loop on a failing cell; say so plainly
        if result.restarted:  # timeout or crash: rebuild the variables earlier cells made
            replayed = await sb.replay()
            observation += ("\n[The interpreter was restarted; your earlier successful cells were re-run"
                            + ("." if replayed.ok else f", but re-running them failed: {replayed.error}.") + "]")
        emit({"type": "output", "text": observation, "ok": result.ok})
        for f in result.files_changed:
            if f.lower().endswith((".png", ".jpg", ".jpeg", ".svg")):
                emit({"type": "plot", "path": str(sb.workspace / f) if sb.workspace else f})
        pending.update(observation=observation, execution=ExecSummary(
            duration_s=result.duration_s, ok=result.ok, error_type=result.error.type if result.error else None,
            timed_out=result.timed_out, truncated=result.truncated, files_changed=list(result.files_changed)).model_dump())
        step = Step(**pending)
        return {"steps": [step.model_dump(mode="json")], "pending": None,
                "messages": [{"role": "interpreter", "content": render_observation(observation)}]}

    def route_after_execute(state: AnalystState) -> Literal["act", "finalize"]:
        return "finalize" if state.get("turn", 0) >= cfg.max_turns else "act"

    async def check(state: AnalystState) -> dict[str, Any]:
        pending = dict(state["pending"] or {})
        answer = pending["action"]["content"]
        step = Step(**pending)
        update: dict[str, Any] = {"steps": [step.model_dump(mode="json")], "pending": None, "final_answer": answer}
        problems = agent.answer_problems(answer, state.get("question", ""), _names(state))
        if problems and state.get("retries_left", 0) > 0 and state.get("turn", 0) < cfg.max_turns:
            feedback = agent.format_feedback(problems, _names(state))
            emit({"type": "feedback", "text": feedback})
            update.update(retries_left=state["retries_left"] - 1, messages=[{"role": "user", "content": feedback}])
        else:
            rounded = agent.round_to_request(answer, state.get("question", ""), _names(state)) if problems else None
            if rounded is not None:  # the model ignored the rounding feedback: round its own numbers, and say so
                update["final_answer"] = rounded
                emit({"type": "feedback", "text": "rounded the answer's values to the requested decimals"})
            update["status"] = "answered"
        return update

    def route_after_check(state: AnalystState) -> Literal["act", "finalize"]:
        return "finalize" if state.get("status") == "answered" else "act"

    async def finalize(state: AnalystState) -> dict[str, Any]:
        status = state.get("status")
        if status != "answered":
            status = "answered" if state.get("final_answer") else "max_turns"
        steps = [Step.model_validate(s) for s in state.get("steps", [])[state.get("q_first_step", 0):]]
        msgs = state.get("messages", [])
        system = next((m["content"] for m in msgs if m["role"] == "system"), "")
        user = state.get("user_prompt") or state.get("question", "")
        ep = rt.settings.llm.for_role(ROLE)
        traj = Trajectory(
            id=f"{state.get('task_id') or 'chat'}-{state.get('sample_index', 0)}-{uuid.uuid4().hex[:8]}",
            task_id=state.get("task_id") or "chat", model=ep.model, provider=ep.provider,
            label="sampled" if state.get("task_id") else "chat", sample_index=state.get("sample_index", 0),
            system_prompt=system, user_prompt=user, steps=steps, final_answer=state.get("final_answer"),
            status=status, prompt_tokens=sum(s.prompt_tokens for s in steps),
            completion_tokens=sum(s.completion_tokens for s in steps),
            time_s=round(time.time() - state.get("started", time.time()), 3),
            metadata={"few_shot": "analyst_example.json", "categories": state.get("categories") or [],
                      "answer_rounded_by_agent": bool(steps and steps[-1].action and state.get("final_answer")
                                                      and steps[-1].action.content != state.get("final_answer"))})
        emit({"type": "answer" if traj.final_answer else "done", "text": traj.final_answer or "", "status": status})
        return {"status": status, "trajectory": traj.model_dump(mode="json")}

    g = StateGraph(AnalystState)
    g.add_node("prepare", prepare)
    g.add_node("act", act)
    g.add_node("execute", execute)
    g.add_node("check", check)
    g.add_node("finalize", finalize)
    g.add_edge(START, "prepare")
    g.add_edge("prepare", "act")
    g.add_conditional_edges("act", route_after_act)
    g.add_conditional_edges("execute", route_after_execute)
    g.add_conditional_edges("check", route_after_check)
    g.add_edge("finalize", END)
    return g.compile(checkpointer=checkpointer, name="analyst")


def _same_output(before: str, now: str) -> bool:
    """Equal up to the interpreter's cell numbering (tracebacks name <cell-N>)."""
    norm = lambda t: re.sub(r"<cell-\d+>", "<cell>", t.split("\n[You ran the same code")[0])  # noqa: E731
    return norm(before) == norm(now)


def _opening(state: AnalystState, names: list[str], profile_chars: int) -> tuple[list[dict[str, str]], str]:
    """Messages that open a question (file I/O: profiling and prompt templates, so run it off the event loop)."""
    new: list[dict[str, str]] = []
    if not state.get("messages"):
        profile_text = _profile(state.get("files", []), profile_chars)
        new.append({"role": "system", "content": agent.system_prompt(state.get("hints"))})
        new.extend(agent.few_shot_messages())
        user_prompt = agent.user_prompt(state["question"], profile_text, names,
                                        agent.category_hints(state.get("categories") or []))
    else:
        user_prompt = agent.user_prompt(state["question"], "", names,
                                        agent.category_hints(state.get("categories") or []))
    new.append({"role": "user", "content": user_prompt})
    return new, user_prompt


def _profile(files: list[str], max_chars: int) -> str:
    if not files:
        return "(no files)"
    from pathlib import Path

    from worldsmith.tools.files import profile_workspace

    return profile_workspace([Path(f) for f in files], as_mounted=True).to_prompt(max_chars=max_chars)


async def _replay(sb: Any, steps: list[dict[str, Any]]) -> None:
    """A fresh session for a thread with history (resume after a kill or a server restart) re-runs the earlier
    successful cells quietly, so variables the model relies on exist again."""
    cells = [s["action"]["content"] for s in steps
             if (s.get("action") or {}).get("kind") == "code" and (s.get("execution") or {}).get("ok")]
    if cells:
        await sb.replay(cells)


def initial_state(question: str, files: list[str], *, task_id: str | None = None, answer_names: list[str] | None = None,
                  categories: list[str] | None = None, sample_index: int = 0, temperature: float | None = None,
                  session_id: str | None = None, workspace: str | None = None) -> dict[str, Any]:
    state: dict[str, Any] = {"question": question, "files": [str(f) for f in files], "sample_index": sample_index}
    for key, value in (("task_id", task_id), ("answer_names", answer_names), ("categories", categories),
                       ("temperature", temperature), ("session_id", session_id), ("workspace", workspace)):
        if value is not None:
            state[key] = value
    return state
