"""`worldsmith ask`, `worldsmith chat` (terminal REPL) and `worldsmith serve` (web chat UI)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Annotated, Optional

import typer

from worldsmith.commands.common import EXIT_FAILED, STATE, console, emit_json, fail, friendly_errors, runtime


def register(app: typer.Typer) -> None:
    app.command("ask")(ask)
    app.command("chat")(chat)
    app.command("serve")(serve)


def _check_files(files: list[Path]) -> list[str]:
    for f in files:
        if not f.exists():
            fail(f"{f}: no such file", code=2)
    return [str(f.resolve()) for f in files]


def ask(request: Annotated[str, typer.Argument(help="What you want, in plain words.")],
        files: Annotated[Optional[list[Path]], typer.Argument(help="Data files the request is about.")] = None,
        plan_only: Annotated[bool, typer.Option("--plan", help="Show the plan without running it.")] = False,
        json_out: Annotated[bool, typer.Option("--json", help="Machine-readable result.")] = False) -> None:
    """One-shot natural-language request: shows the plan, then runs it (or says what is missing)."""
    from worldsmith.graphs.router import build_router_graph
    from worldsmith.llm.errors import LLMError
    from worldsmith.ui.terminal import render_event

    paths = _check_files(files or [])

    async def go() -> dict:
        rt = runtime()
        graph = build_router_graph(rt)
        final: dict = {}
        async for mode, chunk in graph.astream({"request": request, "files": paths, "execute": not plan_only},
                                               stream_mode=["custom", "values"], subgraphs=False):
            if mode == "custom":
                if not json_out:
                    render_event(console, chunk)
            else:
                final = chunk
        await rt.sessions.close_all()
        return final

    with friendly_errors(LLMError, OSError, ValueError):
        final = asyncio.run(go())
    plan = final.get("plan", {})
    result = final.get("result")
    if json_out:
        emit_json({"intent": final.get("intent"), "plan": plan, "result": result})
    elif result:
        for key in ("run_dir", "trajectory", "world_dir", "tasks_dir", "report"):
            if result.get(key):
                console.print(f"[dim]{key.replace('_', ' ')}: {result[key]}[/]")
    if plan and not plan.get("runnable", False):
        raise typer.Exit(EXIT_FAILED)
    if result and result.get("status") not in (None, "answered", "ok"):
        raise typer.Exit(EXIT_FAILED)


def chat(files: Annotated[Optional[list[Path]], typer.Argument(help="Data files to talk about.")] = None,
         thread: Annotated[Optional[str], typer.Option(help="Resume a chat thread by id.")] = None) -> None:
    """Terminal chat with the analyst: steps stream as they happen; variables persist between questions."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from worldsmith.graphs.analyst import build_analyst_graph, initial_state
    from worldsmith.llm.errors import LLMError
    from worldsmith.ui.terminal import render_event

    paths = _check_files(files or [])
    settings = STATE.settings()
    db = Path(settings.runs_dir) / "chat" / "threads.sqlite"
    db.parent.mkdir(parents=True, exist_ok=True)
    thread_id = thread or uuid.uuid4().hex[:12]

    async def go() -> None:
        rt = runtime()
        async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
            graph = build_analyst_graph(checkpointer=saver)
            cfg = {"configurable": {"thread_id": thread_id}, "recursion_limit": 8 * settings.analyst.max_turns + 20}
            snapshot = await graph.aget_state(cfg)
            if thread and not snapshot.values:
                fail(f"no chat thread {thread!r} in {db}", code=2)
            known = snapshot.values.get("files", []) if snapshot.values else []
            console.print(f"[bold]worldsmith chat[/] — thread [cyan]{thread_id}[/] (resume with --thread {thread_id}); "
                          f"files: {', '.join(Path(p).name for p in (known or paths)) or 'none'}. Empty line or Ctrl-D quits.")
            while True:
                try:
                    question = console.input("[bold cyan]you> [/]").strip()
                except (EOFError, KeyboardInterrupt):
                    break
                if not question:
                    break
                state = {"question": question} if snapshot.values else initial_state(
                    question, paths, workspace=str(db.parent / thread_id / "workspace"))  # plots outlive the process
                with friendly_errors(LLMError):
                    async for event in graph.astream(state, cfg, context=rt, stream_mode="custom"):
                        render_event(console, event)
                snapshot = await graph.aget_state(cfg)
            await rt.sessions.close_all()

    asyncio.run(go())


def serve(host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
          port: Annotated[int, typer.Option(help="Port to listen on.")] = 7860) -> None:
    """Web chat UI: upload files, ask questions, watch the steps, plots and the answer."""
    from worldsmith.ui.web import launch

    launch(STATE.settings(), host=host, port=port)
