"""Chat threads behind the web UI: uploads, the persistent checkpointer, transcripts and the analyst stream.

One browser session talks to one thread at a time. A thread = one LangGraph thread of the analyst graph
(SQLite checkpointer, so it survives a server restart) + its uploaded files + a transcript of the rendered
chat (so a reopened thread shows its history). Layout under ``<runs_dir>/web/``:

    threads.sqlite            LangGraph checkpoints
    threads/<id>.json         WebThread transcripts
    uploads/<id>/<file>       copies of the uploaded files (the analyst's read-only inputs)
    workspaces/<id>/          the sandbox's writable workspace (plots land here)

No Gradio import here: this is plain asyncio, testable without a browser.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from worldsmith.core.config import Settings
from worldsmith.core.store import ArtifactError, atomic_copy, read_model, write_model

log = logging.getLogger(__name__)

THREAD_ID = re.compile(r"^[0-9a-f]{12}$")
MAX_UPLOAD_MB = 512  # per file; bigger tables belong on disk next to the CLI, not in a browser upload


class UploadError(ValueError):
    """One or more uploaded files cannot be used; the message lists each file and why."""


class WebThread(BaseModel):
    """A web chat thread as stored on disk (the graph state itself lives in the checkpointer)."""

    id: str = Field(description="12 hex digits; also the LangGraph thread_id and the sandbox session id")
    files: list[str] = Field(default_factory=list, description="absolute paths of the uploaded copies")
    upload_key: list[str] = Field(default_factory=list, description="the browser-side upload set this thread "
                                  "was made from (a different set starts a new thread)")
    messages: list[dict[str, Any]] = Field(default_factory=list, description="rendered chat messages, for redisplay")
    created: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))


def supported_upload_suffixes() -> list[str]:
    """File endings the analyst can read (tables) or at least show (documents)."""
    from worldsmith.tools.files import supported_suffixes
    from worldsmith.tools.files.formats import DOCUMENT_SUFFIXES

    return sorted(set(supported_suffixes()) | set(DOCUMENT_SUFFIXES))


def check_upload(path: Path, suffixes: list[str]) -> str | None:
    """Why `path` cannot be used as an input file, or None when it can."""
    name = path.name.lower()
    if not path.is_file():
        return "not found (the upload may have expired; upload it again)"
    if not any(name.endswith(s) for s in suffixes):
        return f"unsupported file type; use one of {', '.join(suffixes)}"
    size = path.stat().st_size
    if size == 0:
        return "the file is empty"
    if size > MAX_UPLOAD_MB * 2**20:
        return f"{size / 2**20:.0f} MiB is over the {MAX_UPLOAD_MB} MiB upload limit"
    return None


class ChatService:
    """The web side of chat for every session of one server: uploads and transcripts here; the analyst threads
    (runtime, checkpointer, turns) are the application's :class:`worldsmith.app.chat.AnalystChat`.

    Everything async must run on one event loop (Gradio's server loop): the checkpointer and the sandbox
    workers bind to the loop that first uses them.
    """

    def __init__(self, settings: Settings, llm: Any | None = None) -> None:
        self.settings = settings
        self.root = Path(settings.runs_dir).resolve() / "web"
        self._llm = llm
        self._chat: Any = None  # worldsmith.app.chat.AnalystChat, made on the server loop
        self.loop: asyncio.AbstractEventLoop | None = None
        self.suffixes = supported_upload_suffixes()

    # ---- paths and transcripts -------------------------------------------------------------------------
    def upload_dir(self, thread_id: str) -> Path:
        return self.root / "uploads" / thread_id

    def workspace_dir(self, thread_id: str) -> Path:
        return self.root / "workspaces" / thread_id

    def _transcript(self, thread_id: str) -> Path:
        return self.root / "threads" / f"{thread_id}.json"

    def save(self, thread: WebThread) -> None:
        write_model(self._transcript(thread.id), thread)

    def append_messages(self, thread: WebThread, messages: list[dict[str, Any]]) -> WebThread:
        """Add rendered messages to the stored transcript (re-read first: another tab may have added some)."""
        current = self.load(thread.id) or thread
        current.messages.extend(messages)
        self.save(current)
        return current

    def load(self, thread_id: str) -> WebThread | None:
        """A stored thread, or None when the id is malformed or unknown (ids come from URLs: never trust them)."""
        if not THREAD_ID.match(thread_id or ""):
            return None
        path = self._transcript(thread_id)
        if not path.exists():
            return None
        try:
            return read_model(path, WebThread)
        except ArtifactError as exc:
            log.warning("web chat: unreadable thread transcript: %s", exc)
            return None

    def new_thread(self, uploads: list[str]) -> WebThread:
        """A fresh thread holding copies of `uploads` (paths on this machine, e.g. Gradio's upload cache)."""
        problems = [f"`{Path(p).name}`: {why}" for p in uploads if (why := check_upload(Path(p), self.suffixes))]
        if problems:
            raise UploadError("cannot use the uploaded files:\n" + "\n".join(f"- {p}" for p in problems))
        names = [Path(p).name for p in uploads]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise UploadError(f"two uploaded files share the name {', '.join(dupes)}; rename one and upload again")
        thread = WebThread(id=uuid.uuid4().hex[:12], upload_key=sorted(uploads))
        target = self.upload_dir(thread.id)
        for p in uploads:
            copy = atomic_copy(p, target / Path(p).name)
            copy.chmod(0o644)  # the sandbox runs as another uid and mounts inputs read-only: they must be readable
            thread.files.append(str(copy))
        self.workspace_dir(thread.id).mkdir(parents=True, exist_ok=True)
        self.save(thread)
        return thread

    # ---- the analyst (worldsmith.app.chat) ---------------------------------------------------------------
    async def chat(self) -> Any:
        """The application's analyst chat over this server's checkpointer (made on first use, on this loop)."""
        if self._chat is None:
            from worldsmith.app.chat import AnalystChat
            from worldsmith.app.runtime import make_runtime

            rt = make_runtime(self.settings, llm=self._llm)  # may raise LLM errors: the caller shows them
            self._chat, self.loop = AnalystChat(rt, self.root / "threads.sqlite"), asyncio.get_running_loop()
        return await self._chat.open()

    async def ask(self, thread: WebThread, question: str) -> AsyncIterator[dict[str, Any]]:
        """Stream the analyst's events for `question` in `thread` (a follow-up when the thread has state).

        Questions to one thread run one at a time (two tabs may hold the same thread)."""
        chat = await self.chat()
        async for event in chat.ask(thread.id, question, thread.files, self.workspace_dir(thread.id)):
            yield event

    async def forget(self, thread_id: str) -> None:
        """Close the thread's sandbox (its files and checkpoints stay; the thread can be reopened)."""
        if self._chat is not None:
            await self._chat.forget(thread_id)

    async def aclose(self) -> None:
        if self._chat is not None:
            await self._chat.aclose()
        self._chat = None

    def close_from_any_thread(self, timeout_s: float = 15.0) -> None:
        """Close sandboxes and the checkpointer from outside the server loop (at shutdown)."""
        loop = self.loop
        if loop is None:
            return
        try:
            if loop.is_running():
                asyncio.run_coroutine_threadsafe(self.aclose(), loop).result(timeout=timeout_s)
            elif not loop.is_closed():
                loop.run_until_complete(self.aclose())
        except (RuntimeError, TimeoutError, OSError) as exc:  # shutting down anyway: say so, don't mask the exit
            log.warning("web chat: could not close sandboxes/checkpointer cleanly: %s", exc)
