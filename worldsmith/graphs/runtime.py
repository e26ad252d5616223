"""What graphs need at run time but must not keep in (checkpointed) state: the LLM and live sandboxes."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langgraph.config import get_stream_writer

from worldsmith.core.config import Settings


def emit(event: dict[str, Any]) -> None:
    """Send a custom stream event (`stream_mode="custom"`) to whoever streams the running graph."""
    try:
        get_stream_writer()(event)
    except RuntimeError:  # called outside a running graph (direct calls in scripts and tests)
        pass


#: at most this many workspace files are read as a trajectory's deliverables (each capped in size)
MAX_DELIVERABLE_FILES = 20


@dataclass
class SandboxSessions:
    """Live sandboxes by session id (one per trajectory or chat thread), least recently used closed first."""

    settings: Settings
    max_open: int = 8
    _open: OrderedDict[str, Any] = field(default_factory=OrderedDict)
    _dirs: dict[str, Path] = field(default_factory=dict)
    _lock: asyncio.Lock | None = None

    def _lock_(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def get(self, session_id: str, inputs: list[str], workspace: str | None = None) -> tuple[Any, bool]:
        """The session's sandbox, and whether it was freshly started (then the caller may replay cells)."""
        from worldsmith.tools.sandbox import open_sandbox

        async with self._lock_():
            sb = self._open.get(session_id)
            if sb is not None:
                self._open.move_to_end(session_id)
                return sb, False
            while len(self._open) >= self.max_open:
                old_id, old = self._open.popitem(last=False)
                await old.close()
            ws = Path(workspace) if workspace else self._dirs.get(session_id)
            if ws is None:
                ws = self._dirs[session_id] = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=f"ws-{session_id[:12]}-"))
            await asyncio.to_thread(ws.mkdir, parents=True, exist_ok=True)
            sb = await asyncio.to_thread(open_sandbox, self.settings.sandbox, workspace=ws,
                                         inputs=[Path(p) for p in inputs])
            await sb.__aenter__()
            self._open[session_id] = sb
            return sb, True

    async def deliverables(self, session_id: str) -> dict[str, str]:
        """The text files and workbooks the session's cells left in its workspace (its inputs not included), by
        relative path, read as a report's verifier reads them (`rubric_grading.workspace_texts`); {} when the
        session is not open. Through the sandbox's own file API, so a remote backend answers the same."""
        from worldsmith.core.rubric_grading import is_deliverable_name, workspace_texts

        sb = self._open.get(session_id)
        if sb is None:
            return {}
        names = [n for n in await sb.list_files() if is_deliverable_name(n)][:MAX_DELIVERABLE_FILES]
        with tempfile.TemporaryDirectory(prefix="deliverables-") as tmp:
            for n in names:
                dest = Path(tmp, n)
                await asyncio.to_thread(dest.parent.mkdir, parents=True, exist_ok=True)
                await asyncio.to_thread(dest.write_bytes, await sb.download(n))
            return await asyncio.to_thread(workspace_texts, tmp)

    async def close(self, session_id: str) -> None:
        """End a session: its sandbox stops, and a temporary workspace this registry made is deleted
        (a workspace the caller named, e.g. in a run directory, is kept)."""
        async with self._lock_():
            sb = self._open.pop(session_id, None)
            if sb is not None:
                await sb.close()
            ws = self._dirs.pop(session_id, None)
            if ws is not None:
                await asyncio.to_thread(shutil.rmtree, ws, ignore_errors=True)

    async def close_all(self) -> None:
        for sid in list(self._open) + list(self._dirs):
            await self.close(sid)


#: What the router runs for a runnable plan: ``await actions(intent, plan, rt) -> result``. The application layer
#: (``worldsmith.app.actions.dispatch``) supplies it through the runtime, because graphs never import app.
Actions = Callable[[Any, dict[str, Any], "GraphRuntime"], Awaitable[dict[str, Any]]]


@dataclass
class GraphRuntime:
    settings: Settings
    llm: Any
    sessions: SandboxSessions
    actions: Actions | None = None

    @classmethod
    def from_settings(cls, settings: Settings, llm: Any | None = None, actions: Actions | None = None) -> GraphRuntime:
        if llm is None:
            from worldsmith.llm import LLM

            llm = LLM.from_settings(settings)
        return cls(settings=settings, llm=llm, sessions=SandboxSessions(settings), actions=actions)


_DEFAULT: GraphRuntime | None = None
_DEFAULT_FACTORY: Callable[[], GraphRuntime] | None = None


def set_default_runtime(factory: Callable[[], GraphRuntime] | None) -> None:
    """How :func:`context` builds the process-wide fallback runtime (the LangGraph server entry point installs the
    application's, which carries the router's actions); None restores plain ``GraphRuntime.from_settings``."""
    global _DEFAULT_FACTORY, _DEFAULT
    _DEFAULT_FACTORY, _DEFAULT = factory, None


def context(runtime: Any) -> GraphRuntime:
    """The GraphRuntime of a running graph (LangGraph's ``Runtime.context``, passed as ``context=rt`` when the graph
    is invoked). A graph served by ``langgraph dev`` gets no Python context from its client, so it falls back to one
    process-wide runtime built from the settings (the LLM and sandboxes are then shared by that server's threads)."""
    global _DEFAULT
    ctx = getattr(runtime, "context", None)
    if isinstance(ctx, GraphRuntime):
        return ctx
    if _DEFAULT is None:
        if _DEFAULT_FACTORY is not None:
            _DEFAULT = _DEFAULT_FACTORY()
        else:
            from worldsmith.core.config import load_settings

            _DEFAULT = GraphRuntime.from_settings(load_settings())
    return _DEFAULT
