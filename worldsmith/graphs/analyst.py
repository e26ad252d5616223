"""The analyst graph: profile → (think/act → execute → observe)* → answer check → trajectory.

State is plain data (checkpointable); the LLM and sandboxes come from the GraphRuntime passed as LangGraph's
runtime context (`graph.ainvoke(state, config, context=rt)`). A chat thread is one graph thread: a new question
continues the conversation and the same sandbox (variables persist).
The conversation in state is exactly what the model is sent; each model call is recorded as a `ModelCall` (the
provider's request messages, sampling, raw completion), so the trajectory is a faithful training record.
Custom stream events (`stream_mode="custom"`): {"type": thought|code|output|plot|answer|feedback|done, ...}; an
answer guard's feedback carries `"guard": <kind>` (agents/answer_guards.py), the answer its trajectory status.
"""

from __future__ import annotations

import asyncio
import operator
import time
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypedDict

from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from worldsmith.agents import analyst as agent
from worldsmith.agents import answer_guards as guards
from worldsmith.agents import setup_guard
from worldsmith.core.schemas import ExecSummary, GuardFiring, ModelCall, PostProcess, RecordedMessage, Step, Trajectory
from worldsmith.graphs.runtime import GraphRuntime, context, emit
from worldsmith.llm.errors import LLMContextError
from worldsmith.tools.grammar import render_observation

ROLE = "agent"


class AnalystInput(TypedDict, total=False):
    """What a caller gives: a question (a follow-up in a thread needs nothing else) and, to start, its files."""

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
    postprocess: bool  # None/absent: the analyst.postprocess setting; False when sampling training data
    intent: dict[str, Any]  # the router's reading of the request (recorded beside it; the model sees the question)


class AnalystState(AnalystInput, total=False):
    # the conversation exactly as sent: {"role", "content", "source", "templates"} (source/templates: what wrote it)
    messages: Annotated[list[dict[str, Any]], operator.add]
    steps: Annotated[list[dict[str, Any]], operator.add]
    calls: Annotated[list[dict[str, Any]], operator.add]
    q_first_step: int  # where this question starts in the thread's steps / calls / messages
    q_first_call: int
    q_first_message: int
    user_prompt: str
    setup: str  # code the session ran after the prelude, before the model's first cell (agents/analyst.Opening)
    setup_ok: bool  # it ran without an error (then it counts as a cell that read the data)
    setup_probe: str  # agents/setup_guard.PROBE's output right after the setup: `df` as the setup left it
    max_turns: int
    turn: int
    retries_left: int
    status: str
    final_answer: str | None
    graded_answer: str | None
    postprocessed: list[dict[str, Any]]
    guards: Annotated[list[dict[str, Any]], operator.add]  # GuardFiring dicts, every question of the thread
    data_facts: dict[str, Any] | None  # answer_guards.DataFacts.to_state() + "files", profiled when a guard needs it
    error: str | None
    pending: dict[str, Any] | None
    trajectory: dict[str, Any] | None
    started: float


def turn_budget(cfg: Any, setup: str | None) -> int:
    """A turn's completion budget: `max_tokens_per_turn`, plus room to copy the session's setup when there is one
    (`setup_copy_room`; ~3 characters a token for code). At f4ca853 the 1.5B model began 47 of 81 cells of the
    generated set's setup questions with a copy of the setup, although it had run, and all 10 cells cut at the
    384-token budget were such copies: each came back a SyntaxError with no analysis run."""
    return cfg.max_tokens_per_turn + (-(-len(setup) // 3) if setup and cfg.setup_copy_room else 0)


def _msg(role: str, content: str, source: str, *templates: str) -> dict[str, Any]:
    return {"role": role, "content": content, "source": source, "templates": agent.versions(*templates)}


def _names(state: AnalystState) -> list[str]:
    return agent.required_names(state.get("question", ""), state.get("answer_names"))


async def prepare(state: AnalystState, runtime: Runtime[GraphRuntime]) -> dict[str, Any]:
    cfg = context(runtime).settings.analyst
    if not state.get("question", "").strip():
        raise ValueError("the analyst needs a non-empty question")
    thread_id = (get_config().get("configurable") or {}).get("thread_id")
    session_id = state.get("session_id") or thread_id or uuid.uuid4().hex
    new, user_prompt, setup = await asyncio.to_thread(_opening, state, _names(state), cfg.profile_chars)
    emit({"type": "status", "text": "thinking"})
    first = {"setup": setup} if not state.get("messages") else {}  # a thread's later questions keep its first's
    return {**first, "messages": new, "session_id": session_id, "turn": 0, "max_turns": cfg.max_turns,
            "retries_left": cfg.format_retries, "status": "running", "final_answer": None, "graded_answer": None,
            "postprocessed": [], "error": None, "pending": None, "trajectory": None,
            "q_first_step": len(state.get("steps", [])), "q_first_call": len(state.get("calls", [])),
            "q_first_message": len(state.get("messages", [])), "user_prompt": user_prompt, "started": time.time()}


async def act(state: AnalystState, runtime: Runtime[GraphRuntime]) -> dict[str, Any]:
    rt = context(runtime)
    cfg = rt.settings.analyst
    turn = state.get("turn", 0)
    extra: list[dict[str, Any]] = []
    if turn == cfg.max_turns - 1 and turn > 0:
        extra.append(_msg("user", agent.last_turn_nudge(), "nudge", agent.FEEDBACK_TEMPLATE))
    sent = list(state["messages"]) + extra
    budget = turn_budget(cfg, state.get("setup"))
    try:
        d = await agent.decide(rt.llm, sent, role=ROLE, max_tokens=budget,
                               temperature=state.get("temperature"), sample_index=state.get("sample_index", 0))
    except LLMContextError as exc:  # a longer conversation cannot fit either: the question ends here, on record
        emit({"type": "feedback", "text": f"the conversation no longer fits the model's context ({exc})"})
        return {"status": "context_full", "error": str(exc), "pending": None}
    call_index = len(state.get("calls", [])) - state.get("q_first_call", 0)
    dropped: list[ModelCall] = []
    known = _known_mistakes(state) if cfg.repeat_resamples else None  # off by default: nothing to build per turn
    while (known is not None and d.turn.action is not None and d.turn.action.kind == "code"
           and len(dropped) < cfg.repeat_resamples and (why := known(d.turn.action.content))):
        # a weak model re-writes a failing cell, or the mistake it was just told how to fix, and greedy decoding
        # will again: sample this turn anew
        dropped.append(_record_call(call_index, sent, d, state.get("q_first_message", 0), dropped=why))
        call_index += 1
        emit({"type": "feedback", "text": f"the model's cell {why}; sampling its turn again"})
        d = await agent.decide(rt.llm, sent, role=ROLE, max_tokens=budget,
                               temperature=cfg.repeat_temperature,
                               sample_index=10 * state.get("sample_index", 0) + len(dropped))
    # a turn that repeats one span until its budget runs out says nothing, and sent back whole it primes the next
    # turn to go on repeating it: it is sampled anew
    d, looped = await agent.unlooped(d, lambda k: agent.decide(
        rt.llm, sent, role=ROLE, max_tokens=budget,
        temperature=agent.loop_temperature(state.get("temperature")),
        sample_index=100 + 10 * state.get("sample_index", 0) + k))
    for gone, why in looped:
        dropped.append(_record_call(call_index, sent, gone, state.get("q_first_message", 0), dropped=why))
        call_index += 1
        emit({"type": "feedback", "text": f"the model's reply {why}; sampling its turn again"})
    call = _record_call(call_index, sent, d, state.get("q_first_message", 0))
    c = d.completion
    base = {"index": len(state.get("steps", [])), "raw": d.raw, "thought": d.turn.thought,
            "prompt_tokens": c.usage.prompt_tokens, "completion_tokens": c.usage.completion_tokens,
            "latency_s": c.latency_s, "call": call_index}
    if d.turn.thought:
        emit({"type": "thought", "text": d.turn.thought, "turn": turn})
    update: dict[str, Any] = {"turn": turn + 1, "calls": [m.model_dump(mode="json") for m in (*dropped, call)]}
    if d.turn.action is None:
        step = Step(**base, void=True, void_reason=d.turn.error or "no action")
        text = agent.void_feedback(d.turn.error)
        emit({"type": "feedback", "text": text})
        update.update(steps=[step.model_dump(mode="json")], pending=None,
                      messages=extra + [_msg("assistant", call.reply, "model_void"),
                                        _msg("user", text, "feedback", agent.FEEDBACK_TEMPLATE)])
        return update
    base["action"] = d.turn.action.model_dump()
    update["pending"] = base
    update["messages"] = extra + [_msg("assistant", d.reply, "model")]
    return update


def _cell_key(code: str) -> str:
    """A code cell up to trailing spaces and blank lines (what makes two cells "the same")."""
    return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip())


def _known_mistakes(state: AnalystState) -> Callable[[str], str | None]:
    """A check of a new code cell against the mistakes this question has already shown: a cell that ran and failed,
    written again (up to spacing); a file read again with the pandas reader the feedback named as wrong (its load
    call was shown). Returns why the cell is a known mistake, or None."""
    failed = [s["action"]["content"] for s in state.get("steps", [])[state.get("q_first_step", 0):]
              if (s.get("action") or {}).get("kind") == "code" and not (s.get("execution") or {}).get("ok", True)]
    keys = {_cell_key(c) for c in failed}
    facts = state.get("data_facts") or {}
    loads = (facts.get("loads") or {}) if facts.get("files") == state.get("files", []) else {}
    told = {w for c in failed for w in agent.wrong_readers(c, loads)}

    def check(code: str) -> str | None:
        if _cell_key(code) in keys:
            return "repeats a code cell that already failed in this question"
        again = [w for w in agent.wrong_readers(code, loads) if w in told]
        return f"reads a file with the reader it was told is wrong ({'; '.join(again)})" if again else None
    return check


def _record_call(index: int, sent: list[dict[str, Any]], d: agent.Decision, q_first_message: int,
                 dropped: str | None = None) -> ModelCall:
    """The training record of one call. Its messages are the provider's request messages; our own copies only add
    what wrote each one, so a layer that changed the messages on the way out is an error, not a silent mismatch."""
    c = d.completion
    as_sent = c.request_messages or [{"role": "user" if m["role"] == "interpreter" else m["role"],
                                      "content": m["content"]} for m in sent]  # an LLM stub that does not echo them
    if len(as_sent) != len(sent) or any(a["content"] != m["content"] for a, m in zip(as_sent, sent)):
        raise ValueError(f"model call {index}: the provider received {len(as_sent)} messages that differ from the "
                         f"{len(sent)} in the analyst's conversation; the trajectory would not be a faithful record")
    # an answer a guard sent back (the next message is its re-ask) is not one to learn from
    rejected = {i for i in range(len(sent) - 1) if str(sent[i + 1].get("source", "")).startswith("guard:")}
    messages = [RecordedMessage(role=a["role"], content=a["content"], source=m.get("source", ""),
                                trainable=m.get("source") == "model" and i >= q_first_message and i not in rejected)
                for i, (a, m) in enumerate(zip(as_sent, sent))]
    templates: dict[str, str] = {}
    for m in sent:
        templates.update(m.get("templates") or {})
    reply = d.reply if d.turn.action is not None or dropped else agent.loop_cut(d.reply)
    return ModelCall(index=index, messages=messages, templates=templates, completion=c.text, reply=reply,
                     action=d.turn.action, void_reason=d.turn.error if d.turn.action is None else None,
                     repaired=d.turn.repaired, dropped=dropped,
                     sampling=dict(c.sampling), prompt_tokens=c.usage.prompt_tokens,
                     completion_tokens=c.usage.completion_tokens, latency_s=c.latency_s,
                     finish_reason=c.finish_reason, cached=c.cached, model=c.model, provider=c.provider)


def route_after_act(state: AnalystState) -> Literal["execute", "check", "act", "finalize"]:
    pending = state.get("pending")
    if pending is None:
        return "finalize" if state.get("turn", 0) >= state["max_turns"] or state.get("status") == "context_full" \
            else "act"
    return "execute" if pending["action"]["kind"] == "code" else "check"


async def execute(state: AnalystState, runtime: Runtime[GraphRuntime]) -> dict[str, Any]:
    rt = context(runtime)
    cfg = rt.settings.analyst
    pending = dict(state["pending"] or {})
    code = pending["action"]["content"]
    emit({"type": "code", "code": code})
    sb, fresh = await rt.sessions.get(state["session_id"], state.get("files", []), state.get("workspace"))
    if fresh:
        await sb.run(agent.PRELUDE)
    ran_setup: dict[str, Any] = {}
    if state.get("setup") and (fresh or not any(s.get("execution") for s in state.get("steps", []))):
        # the join the task turn says has run: before the thread's first cell
        ran_setup["setup_ok"] = (await sb.run(state["setup"])).ok
        if ran_setup["setup_ok"] and cfg.restore_setup:  # what `df` is as the setup leaves it
            ran_setup["setup_probe"] = await setup_guard.snapshot(sb)
    if fresh:
        await _replay(sb, state.get("steps", []))
    setup_ok = bool(ran_setup.get("setup_ok", state.get("setup_ok", False)))
    result = await sb.run(code, timeout=cfg.cell_timeout_s)
    suspect = (result.error is not None or agent.empty_merge(code, result.stdout or "")
               or bool(agent.compared_literals(code)))  # a label the data codes otherwise matches no row
    profiled = await _profiled(state) if suspect else None
    facts = guards.DataFacts.from_state(profiled) if profiled else None
    last_call = (state.get("calls") or [{}])[-1]
    observation = agent.observation_text(
        result, cfg.max_observation_chars, facts, code=code,
        cut_off_at=turn_budget(cfg, state.get("setup")) if last_call.get("finish_reason") == "length" else None)
    nudged = observation != result.to_observation(cfg.max_observation_chars)
    previous = next((s for s in reversed(state.get("steps", [])) if s.get("action")), None)
    if previous and previous["action"] == pending["action"] and agent.same_output(previous.get("observation") or "", observation):
        observation += agent.repeat_nudge()  # weak models loop on a failing cell; say so plainly
        nudged = True
    restored: list[dict[str, Any]] = []
    if result.restarted:  # timeout or crash: rebuild the variables earlier cells made
        replayed = await sb.replay()
        observation += agent.restart_note(None if replayed.ok else str(replayed.error))
        nudged = True
    elif setup_ok and cfg.restore_setup and (again := await setup_guard.again(
            sb, code, state.get("setup", ""), ran_setup.get("setup_probe", state.get("setup_probe", "")))):
        observation += "\n" + again  # the setup's work undone by the cell: done again
        nudged = True
        restored = [GuardFiring(kind=setup_guard.KIND, step=pending["index"], detail=again,
                                reasked=True).model_dump()]
    emit({"type": "output", "text": observation, "ok": result.ok})
    for f in result.files_changed:
        if f.lower().endswith((".png", ".jpg", ".jpeg", ".svg")):
            emit({"type": "plot", "path": str(sb.workspace / f) if sb.workspace else f})
    pending.update(observation=observation, execution=ExecSummary(
        duration_s=result.duration_s, ok=result.ok, error_type=result.error.type if result.error else None,
        timed_out=result.timed_out, truncated=result.truncated, files_changed=list(result.files_changed)).model_dump())
    step = Step(**pending)
    templates = (agent.FEEDBACK_TEMPLATE,) if nudged else ()
    update = {"steps": [step.model_dump(mode="json")], "pending": None, **ran_setup,
              "messages": [_msg("interpreter", render_observation(observation), "interpreter", *templates)]}
    if restored:
        update["guards"] = restored
    if profiled:
        update["data_facts"] = profiled  # kept: the next failing cell and the answer's guards reuse the profile
    return update


def route_after_execute(state: AnalystState) -> Literal["act", "finalize"]:
    return "finalize" if state.get("turn", 0) >= state["max_turns"] else "act"


async def check(state: AnalystState, runtime: Runtime[GraphRuntime]) -> dict[str, Any]:
    """The final answer's checks: the guards (agents/answer_guards.py, one re-ask per kind) and the format check
    (format_retries re-asks), within the turn limit; then the answer is kept, `unsupported` when a blocking guard
    still fires, and its numbers rounded to the request when the format feedback was ignored."""
    cfg = context(runtime).settings.analyst
    pending = dict(state["pending"] or {})
    answer = pending["action"]["content"]
    step = Step(**pending)
    update: dict[str, Any] = {"steps": [step.model_dump(mode="json")], "pending": None, "final_answer": answer,
                              "graded_answer": answer, "postprocessed": []}
    question, names = state.get("question", ""), _names(state)
    facts = await _data_facts(state, question, names)
    if facts is not None:
        update["data_facts"] = facts
    setup = state.get("setup", "") if state.get("setup_ok") else ""
    findings = guards.check_answer(answer, question, names, guards.cells(state.get("steps", []), setup),
                                   state.get("files", []), guards.DataFacts.from_state(facts) if facts else None)
    problems = agent.answer_problems(answer, question, names)
    postprocess = state.get("postprocess")
    if postprocess is None:
        postprocess = cfg.postprocess
    # only the rounding is off: rounded on record, not re-asked — the 1.5B model's answer to the re-ask was exactly
    # that rounding in 23 of 23 generated-v1 re-asks at 6a8997e, at ~10 s a re-ask. Without post-processing
    # (sampling training data) the model is asked, so the trajectory ends in its own rounded answer.
    round_only = bool(postprocess) and bool(problems) and problems == agent.rounding_problems(answer, question, names)
    can_reask = state.get("turn", 0) < cfg.max_turns
    format_left = bool(problems) and state.get("retries_left", 0) > 0 and not round_only
    used = {g["kind"] for g in _question_guards(state) if g["reasked"]}
    reask = guards.pick_reask(findings, used, format_first=format_left) if can_reask else None
    update["guards"] = [g.model_dump() for g in guards.record(findings, step.index, reask)]
    if reask is not None:
        text = guards.feedback(reask, names)
        emit({"type": "feedback", "text": text, "guard": reask.kind})
        update["messages"] = [_msg("user", text, f"guard:{reask.kind}", agent.FEEDBACK_TEMPLATE)]
        return update
    if format_left and can_reask:
        text = agent.format_feedback(problems, names)
        emit({"type": "feedback", "text": text})
        update.update(retries_left=state["retries_left"] - 1,
                      messages=[_msg("user", text, "feedback", agent.FEEDBACK_TEMPLATE)])
        return update
    done: list[dict[str, Any]] = []
    graded = answer
    stripped = agent.strip_placeholder(graded, names) if problems and postprocess else None
    if stripped is not None:  # the placeholder's words stayed after the feedback: the grader sees the number alone
        done.append(PostProcess(
            kind="strip_placeholder", before=graded, after=stripped,
            reason="the answer kept the answer line's placeholder words after the format feedback: "
                   + "; ".join(problems)).model_dump())
        graded = stripped
        emit({"type": "feedback", "text": "cut the placeholder's words from the answer's values"})
    rounded = agent.round_to_request(graded, question, names) if problems and postprocess else None
    if rounded is not None:  # the model ignored the rounding feedback: the grader sees its numbers rounded, on record
        why = ("only the rounding was off, so the numbers were rounded without a re-ask: " if round_only else
               "the answer kept more decimals than requested after the format feedback: ")
        done.append(PostProcess(kind="round_decimals", before=graded, after=rounded,
                                reason=why + "; ".join(problems)).model_dump())
        graded = rounded
        emit({"type": "feedback", "text": "rounded the answer's values to the requested decimals"})
    if done:
        update["graded_answer"], update["postprocessed"] = graded, done
    update["status"] = "unsupported" if guards.blocks(f.kind for f in findings) else "answered"
    return update


def route_after_check(state: AnalystState) -> Literal["act", "finalize"]:
    return "finalize" if state.get("status") in ("answered", "unsupported") else "act"


def _question_guards(state: AnalystState) -> list[dict[str, Any]]:
    """The guard firings of the current question (the thread's list holds every question's)."""
    return [g for g in state.get("guards", []) if g["step"] >= state.get("q_first_step", 0)]


async def _profiled(state: AnalystState) -> dict[str, Any] | None:
    """The question's input files' data facts (DataFacts.to_state, with the files they describe: columns, ranges,
    load calls), profiled once per set of files and kept in state; None without input files."""
    files = state.get("files", [])
    if not files:
        return None
    cached = state.get("data_facts")
    if cached and cached.get("files") == files:
        return cached
    return {"files": files, **(await asyncio.to_thread(guards.profile_facts, files)).to_state()}


async def _data_facts(state: AnalystState, question: str, names: list[str]) -> dict[str, Any] | None:
    """The data facts the guards need; None when no data-dependent guard applies to this question."""
    return await _profiled(state) if guards.needs_facts(question, names) else None


async def finalize(state: AnalystState, runtime: Runtime[GraphRuntime]) -> dict[str, Any]:
    rt = context(runtime)
    status = state.get("status")
    question_guards = _question_guards(state)
    if status not in ("answered", "unsupported"):  # the turns ran out after a re-ask: the last answer stands
        answers = [s["index"] for s in state.get("steps", [])[state.get("q_first_step", 0):]
                   if (s.get("action") or {}).get("kind") == "answer"]
        blocked = bool(answers) and guards.blocks(g["kind"] for g in question_guards if g["step"] == answers[-1])
        status = ("unsupported" if blocked else "answered") if state.get("final_answer") else \
            "context_full" if status == "context_full" else "max_turns"
    steps = [Step.model_validate(s) for s in state.get("steps", [])[state.get("q_first_step", 0):]]
    calls = [ModelCall.model_validate(c) for c in state.get("calls", [])[state.get("q_first_call", 0):]]
    msgs = state.get("messages", [])
    system = next((m["content"] for m in msgs if m["role"] == "system"), "")
    user = state.get("user_prompt") or state.get("question", "")
    ep = rt.settings.llm.for_role(ROLE)
    traj = Trajectory(
        id=f"{state.get('task_id') or 'chat'}-{state.get('sample_index', 0)}-{uuid.uuid4().hex[:8]}",
        task_id=state.get("task_id") or "chat", model=ep.model, provider=ep.provider,
        label="sampled" if state.get("task_id") else "chat", sample_index=state.get("sample_index", 0),
        system_prompt=system, user_prompt=user, steps=steps, calls=calls, final_answer=state.get("final_answer"),
        postprocess=[PostProcess.model_validate(p) for p in state.get("postprocessed") or []],
        graded_answer=state.get("graded_answer") if state.get("final_answer") else None,
        status=status, error=state.get("error"), guards=[GuardFiring.model_validate(g) for g in question_guards],
        prompt_tokens=sum(s.prompt_tokens for s in steps),
        completion_tokens=sum(s.completion_tokens for s in steps),
        time_s=round(time.time() - state.get("started", time.time()), 3),
        metadata={"few_shot": agent.EXAMPLE_TEMPLATE, "categories": state.get("categories") or [],
                  "prelude": agent.versions(agent.PRELUDE_TEMPLATE),
                  **({"setup": state["setup"]} if state.get("setup") else {}),
                  **({"intent": state["intent"]} if state.get("intent") else {})})
    emit({"type": "answer" if traj.final_answer else "done", "text": traj.answer_to_grade or "", "status": status})
    return {"status": status, "trajectory": traj.model_dump(mode="json")}


def build_analyst_graph(checkpointer: Any = None) -> Any:
    """The compiled analyst graph; run it with `context=GraphRuntime` (the LLM, sandboxes and settings).

    No `context_schema=GraphRuntime`: LangGraph coerces a context dict into a dataclass schema, and `langgraph dev`
    sends each run a (filtered, here empty) dict, so `GraphRuntime(**{})` would fail before the first node; nodes get
    the runtime through `context(runtime)`, which falls back to a settings-built one under the server."""
    g = StateGraph(AnalystState, input_schema=AnalystInput)
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


def _opening(state: AnalystState, names: list[str], profile_chars: int) -> tuple[list[dict[str, Any]], str, str]:
    """Messages that open a question (file I/O: profiling and prompt templates, so run it off the event loop).

    Everything task-specific goes in the task turn, after the system prompt and worked example, so those stay
    byte-identical across questions and the model's prefix cache reuses them."""
    new: list[dict[str, Any]] = []
    category = agent.method_hints(state.get("categories") or [], state["question"])
    hints = "\n".join(h.strip() for h in (category, state.get("hints") or "") if h.strip())
    user_templates = (agent.USER_TEMPLATE, agent.HINTS_TEMPLATE) if category else (agent.USER_TEMPLATE,)
    if not state.get("messages"):
        new.append(_msg("system", agent.system_prompt(), "system", agent.SYSTEM_TEMPLATE))
        new.extend({**m, "source": "example", "templates": agent.versions(agent.EXAMPLE_TEMPLATE)}
                   for m in agent.few_shot_messages())
        opened = agent.opening(state["question"], state.get("files", []), profile_chars, names, hints)
        user_prompt, setup = opened.turn, opened.setup
    else:
        user_prompt, setup = agent.user_prompt(state["question"], "", names, hints), ""
    new.append(_msg("user", user_prompt, "task", *user_templates))
    return new, user_prompt, setup


async def _replay(sb: Any, steps: list[dict[str, Any]]) -> None:
    """A fresh session for a thread with history (resume after a kill or a server restart) re-runs the earlier
    successful cells quietly, so variables the model relies on exist again."""
    cells = [s["action"]["content"] for s in steps
             if (s.get("action") or {}).get("kind") == "code" and (s.get("execution") or {}).get("ok")]
    if cells:
        await sb.replay(cells)


def initial_state(question: str, files: list[str], *, task_id: str | None = None, answer_names: list[str] | None = None,
                  categories: list[str] | None = None, sample_index: int = 0, temperature: float | None = None,
                  session_id: str | None = None, workspace: str | None = None,
                  postprocess: bool | None = None, intent: dict[str, Any] | None = None) -> dict[str, Any]:
    state: dict[str, Any] = {"question": question, "files": [str(f) for f in files], "sample_index": sample_index}
    for key, value in (("task_id", task_id), ("answer_names", answer_names), ("categories", categories),
                       ("temperature", temperature), ("session_id", session_id), ("workspace", workspace),
                       ("postprocess", postprocess), ("intent", intent)):
        if value is not None:
            state[key] = value
    return state
