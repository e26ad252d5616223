"""Chat: a request through the router (plan, then run), and persistent analyst threads.

`worldsmith ask` and `worldsmith chat` (terminal) and the web UI all go through these; front ends only render
the streamed events (``{"type": ...}`` dicts, see worldsmith.ui)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from worldsmith.graphs.runtime import GraphRuntime

OnEvent = Callable[[dict[str, Any]], None]


async def run_request(rt: GraphRuntime, request: str, files: list[str], *, execute: bool = True,
                      on_event: OnEvent | None = None) -> dict[str, Any]:
    """Route a natural-language request: classify, plan, and (with `execute`) run the plan.

    Returns the router's output state (intent, plan, result); `on_event` sees each streamed event."""
    from worldsmith.graphs.router import build_router_graph

    final: dict[str, Any] = {}
    try:
        async for mode, chunk in build_router_graph().astream({"request": request, "files": files, "execute": execute},
                                                              context=rt, stream_mode=["custom", "values"]):
            if mode == "custom":
                if on_event is not None:
                    on_event(chunk)
            else:
                final = chunk
    finally:
        await rt.sessions.close_all()
    return final


class AnalystChat:
    """Analyst threads persisted in a SQLite checkpointer: a thread survives the process, and follow-up questions
    see the earlier turns and the same sandbox variables while the process lives.

    Async resources bind to the event loop that opens them: open, ask and close on one loop."""

    def __init__(self, rt: GraphRuntime, db: Path) -> None:
        self.rt = rt
        self.db = Path(db)
        self._graph: Any = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._open_lock: asyncio.Lock | None = None
        self._thread_locks: dict[str, asyncio.Lock] = {}

    async def open(self) -> AnalystChat:
        """Connect the checkpointer and compile the graph (once; later calls return at once)."""
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if self._graph is None:
                from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

                from worldsmith.graphs.analyst import build_analyst_graph

                self.db.parent.mkdir(parents=True, exist_ok=True)
                stack = contextlib.AsyncExitStack()
                saver = await stack.enter_async_context(AsyncSqliteSaver.from_conn_string(str(self.db)))
                self._stack, self._graph = stack, build_analyst_graph(checkpointer=saver)
        return self

    def _config(self, thread_id: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread_id},
                "recursion_limit": 8 * self.rt.settings.analyst.max_turns + 20}

    async def state(self, thread_id: str) -> dict[str, Any]:
        """The thread's checkpointed state ({} for a thread that has none yet)."""
        await self.open()
        snapshot = await self._graph.aget_state(self._config(thread_id))
        return dict(snapshot.values or {})

    async def ask(self, thread_id: str, question: str, files: list[str], workspace: Path) -> AsyncIterator[dict[str, Any]]:
        """Stream the analyst's events for `question`: the thread's first question starts it over `files` with its
        sandbox writing to `workspace`; later ones are follow-ups. Questions to one thread run one at a time."""
        from worldsmith.graphs.analyst import initial_state

        await self.open()
        cfg = self._config(thread_id)
        async with self._thread_locks.setdefault(thread_id, asyncio.Lock()):
            known = await self.state(thread_id)
            state: dict[str, Any] = {"question": question} if known.get("messages") else initial_state(
                question, files, session_id=thread_id, workspace=str(workspace))
            async for event in self._graph.astream(state, cfg, context=self.rt, stream_mode="custom"):
                yield event

    async def forget(self, thread_id: str) -> None:
        """Close the thread's sandbox (its checkpoints stay: the thread can be continued)."""
        await self.rt.sessions.close(thread_id)

    async def aclose(self) -> None:
        await self.rt.sessions.close_all()
        if self._stack is not None:
            await self._stack.aclose()
        self._graph = self._stack = None
