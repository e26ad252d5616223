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
    from worldsmith.app.chat import run_request
    from worldsmith.llm.errors import LLMError
    from worldsmith.ui.terminal import render_event

    paths = _check_files(files or [])
    show = None if json_out else (lambda event: render_event(console, event))
    with friendly_errors(LLMError, OSError, ValueError):
        final = asyncio.run(run_request(runtime(), request, paths, execute=not plan_only, on_event=show))
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
    from worldsmith.app.chat import AnalystChat
    from worldsmith.llm.errors import LLMError
    from worldsmith.ui.terminal import render_event

    paths = _check_files(files or [])
    db = Path(STATE.settings().runs_dir) / "chat" / "threads.sqlite"
    thread_id = thread or uuid.uuid4().hex[:12]
    workspace = db.parent / thread_id / "workspace"  # plots outlive the process

    async def go() -> None:
        session = AnalystChat(runtime(), db)
        try:
            known = await session.state(thread_id)
            if thread and not known:
                fail(f"no chat thread {thread!r} in {db}", code=2)
            console.print(f"[bold]worldsmith chat[/] — thread [cyan]{thread_id}[/] (resume with --thread {thread_id}); "
                          f"files: {', '.join(Path(p).name for p in (known.get('files') or paths)) or 'none'}. Empty line or Ctrl-D quits.")
            while True:
                try:
                    question = console.input("[bold cyan]you> [/]").strip()
                except (EOFError, KeyboardInterrupt):
                    break
                if not question:
                    break
                with friendly_errors(LLMError):
                    async for event in session.ask(thread_id, question, paths, workspace):
                        render_event(console, event)
        finally:
            await session.aclose()

    asyncio.run(go())


def serve(host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
          port: Annotated[int, typer.Option(help="Port to listen on.")] = 7860) -> None:
    """Web chat UI: upload files, ask questions, watch the steps, plots and the answer."""
    from worldsmith.ui.web import launch

    launch(STATE.settings(), host=host, port=port)
