"""`worldsmith serve`: the web chat UI (Gradio). Upload files, ask, watch each step stream in, read the answer.

Offline by construction: analytics off, no share link, no server-side rendering (no Node), system fonts only.
A thread survives a server restart: open ``/?thread=<id>`` (the status line shows the id) to continue it.
"""

from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported: no telemetry calls

import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import gradio as gr

from worldsmith.core.config import Settings
from worldsmith.ui.web_messages import error_message, event_to_message, note_message, status_word, user_message
from worldsmith.ui.web_threads import MAX_UPLOAD_MB, ChatService, UploadError, WebThread, check_upload

log = logging.getLogger(__name__)

CONCURRENT_CHATS = 4  # questions answered at once across all browser sessions (each holds a sandbox)

CSS = """
#ws-chat blockquote { color: var(--body-text-color-subdued); font-style: italic; border-left-width: 3px; }
#ws-chat h3 { margin-top: 0.2em; }
#ws-status { font-size: 0.9em; color: var(--body-text-color-subdued); }
#ws-chat button[aria-label="Share"] { display: none; }  /* would post the plot to Hugging Face: no network here */
"""


def _friendly(exc: BaseException) -> str:
    """An error as one readable sentence for the chat; unexpected ones are also logged with their traceback."""
    from worldsmith.llm.errors import LLMError, LLMUnavailableError
    from worldsmith.tools.files import FileReadError
    from worldsmith.tools.sandbox import SandboxError

    if isinstance(exc, LLMUnavailableError):
        return f"the language model is not available: {exc}"
    if isinstance(exc, LLMError):
        return f"the language model call failed: {exc}"
    if isinstance(exc, SandboxError):
        return f"the code sandbox failed: {exc}"
    if isinstance(exc, (UploadError, FileReadError)):
        return str(exc)
    if isinstance(exc, (ValueError, OSError)):
        return f"{type(exc).__name__}: {exc}"
    log.exception("web chat: unexpected error", exc_info=exc)
    return f"internal error ({type(exc).__name__}: {exc}); the server log has the details"


def _model_label(settings: Settings) -> str:
    from worldsmith.graphs.analyst import ROLE

    ep = settings.llm.for_role(ROLE)
    return f"{ep.provider} · {ep.model}"


def _status(settings: Settings, thread_id: str | None, what: str) -> str:
    thread = f" · thread `{thread_id}` (reopen with `?thread={thread_id}`)" if thread_id else ""
    return f"**Model:** {_model_label(settings)}{thread} · **{what}**"


def _upload_paths(files: Any) -> list[str]:
    """Gradio's File value (None, a path, or a list of paths / file objects) as a list of paths."""
    if not files:
        return []
    items = files if isinstance(files, list) else [files]
    return [str(getattr(f, "name", f)) for f in items]


def build_app(settings: Settings, llm: Any | None = None, *, service: ChatService | None = None) -> gr.Blocks:
    """The chat UI as a Gradio Blocks app (not launched). `llm` overrides the one built from settings."""
    service = service or ChatService(settings, llm)

    async def respond(question: str, files: Any, history: list[dict[str, Any]] | None,
                      session: dict[str, Any]) -> AsyncIterator[tuple[Any, ...]]:
        # Outputs: chat, question box, status, session, send button. While a question runs, the box and the
        # button are disabled (a second question in the same thread would race the first).
        history = list(history or [])
        session = dict(session or {})
        question = (question or "").strip()
        if not question:
            yield history, gr.update(), _status(settings, session.get("thread"), "type a question first"), \
                session, gr.update()
            return
        history.append(user_message(question))
        new_turn: list[dict[str, Any]] = [user_message(question)]
        uploads = _upload_paths(files)
        thread: WebThread | None = service.load(session.get("thread", ""))
        locked = gr.update(value="", interactive=False)
        try:
            if thread is None or sorted(uploads) != session.get("key", []):  # new file set → new thread
                old, thread = thread, service.new_thread(uploads)
                if old is not None:
                    await service.forget(old.id)
                session.update(thread=thread.id, key=sorted(uploads))
                names = ", ".join(f"`{Path(f).name}`" for f in thread.files) or "no files"
                new_turn.append(note_message(f"New conversation (thread `{thread.id}`) with {names}."))
                history.append(new_turn[-1])
            yield history, locked, _status(settings, thread.id, "starting…"), session, locked
            started = time.monotonic()
            async for event in service.ask(thread, question):
                msg = event_to_message(event)
                if msg is not None:
                    history.append(msg)
                    new_turn.append(msg)
                word = status_word(event) or "working…"
                yield history, gr.update(), _status(settings, thread.id, word), session, gr.update()
            what = f"done in {time.monotonic() - started:.1f} s"
        except Exception as exc:  # noqa: BLE001 — shown to the user as a sentence, logged when unexpected
            new_turn.append(error_message(_friendly(exc)))
            history.append(new_turn[-1])
            what = "error"
        if thread is not None:
            service.append_messages(thread, new_turn)
        unlocked = gr.update(interactive=True)
        yield history, gr.update(value="", interactive=True), _status(settings, session.get("thread"), what), \
            session, unlocked

    async def new_chat(session: dict[str, Any]) -> tuple[Any, ...]:
        old = (session or {}).get("thread")
        if old:
            await service.forget(old)
        return [], _status(settings, None, "new chat: upload files (or keep these) and ask"), {}

    def restore(session: dict[str, Any], files: Any, request: gr.Request) -> tuple[Any, ...]:
        # The page shows "connecting…" until this load event answers; files picked before it answered keep
        # their "attached" line rather than being overwritten by "ready".
        wanted = (request.query_params.get("thread") if request is not None else None) or ""
        thread = service.load(wanted) if wanted else None
        if wanted and thread is None:
            return [error_message(f"no chat thread `{wanted[:40]}` on this server")], \
                _status(settings, None, "ready"), {}
        if thread is None:
            return [], on_upload(files, session) if _upload_paths(files) else _status(settings, None, "ready"), \
                session or {}
        history = thread.messages + [note_message(
            f"Reopened thread `{thread.id}` with {', '.join(Path(f).name for f in thread.files) or 'no files'}; "
            "upload nothing new to continue it.")]
        return history, _status(settings, thread.id, "ready"), {"thread": thread.id, "key": []}

    def on_upload(files: Any, session: dict[str, Any]) -> str:
        paths = _upload_paths(files)
        bad = [f"{Path(p).name} ({why})" for p in paths if (why := check_upload(Path(p), service.suffixes))]
        what = f"{len(paths)} file(s) attached" + (f"; cannot use: {'; '.join(bad)}" if bad else "")
        return _status(settings, (session or {}).get("thread"), what if paths else "no files attached")

    with gr.Blocks(title="worldsmith chat", analytics_enabled=False, fill_height=True) as app:
        app.worldsmith_service = service  # type: ignore[attr-defined]  # launch() closes it at shutdown
        session = gr.State({})
        gr.Markdown("## worldsmith — ask questions about your data")
        status = gr.Markdown(_status(settings, None, "connecting…"), elem_id="ws-status")
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=240):
                files = gr.File(label="Data files", file_count="multiple", elem_id="ws-files",
                                file_types=[s for s in service.suffixes if s.count(".") == 1] + [".gz"])
                new_btn = gr.Button("New chat", elem_id="ws-new")
            with gr.Column(scale=4):
                chat = gr.Chatbot(label="Analysis", elem_id="ws-chat", height=620, feedback_options=None,
                                  buttons=["copy"], allow_tags=False, group_consecutive_messages=True,
                                  placeholder="Upload data files, then ask a question. Steps appear as they run.")
                with gr.Row():
                    box = gr.Textbox(show_label=False, placeholder="Ask a question about your files…", scale=6,
                                     elem_id="ws-question", lines=1, max_lines=6)
                    send = gr.Button("Send", variant="primary", scale=1, min_width=90, elem_id="ws-send")
        outputs = [chat, box, status, session, send]
        send.click(respond, [box, files, chat, session], outputs, concurrency_limit=CONCURRENT_CHATS,
                   concurrency_id="ask")
        box.submit(respond, [box, files, chat, session], outputs, concurrency_limit=CONCURRENT_CHATS,
                   concurrency_id="ask")
        new_btn.click(new_chat, [session], [chat, status, session])
        files.change(on_upload, [files, session], [status])
        app.load(restore, [session, files], [chat, status, session])
    return app


def _theme() -> gr.themes.Base:
    # System fonts only: the default theme fetches Google Fonts, which this machine (and many users') cannot reach.
    return gr.themes.Soft(font=["ui-sans-serif", "system-ui", "sans-serif"],
                          font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "monospace"])


def launch(settings: Settings, host: str = "127.0.0.1", port: int = 7860, *, llm: Any | None = None,
           block: bool = True) -> gr.Blocks:
    """Serve the chat UI on host:port. With block=False return the running app (tests); call app.close()."""
    service = ChatService(settings, llm)
    service.root.mkdir(parents=True, exist_ok=True)
    app = build_app(settings, llm, service=service)
    app.queue(default_concurrency_limit=CONCURRENT_CHATS)
    try:
        # allowed_paths: plots live in <runs_dir>/web/workspaces/<thread>/ and Gradio serves only allowed files.
        app.launch(server_name=host, server_port=port, share=False, inbrowser=False, prevent_thread_lock=not block,
                   allowed_paths=[str(service.root)], ssr_mode=False, mcp_server=False, pwa=False,
                   footer_links=["settings"], show_error=False, max_file_size=f"{MAX_UPLOAD_MB}mb",
                   quiet=not block, theme=_theme(), css=CSS)
    finally:
        if block:  # Ctrl-C ended the server: stop sandboxes and release the checkpointer
            service.close_from_any_thread()
    return app


def shutdown(app: gr.Blocks) -> None:
    """Stop a non-blocking app from launch(): sandboxes and checkpointer first, then the server."""
    service = getattr(app, "worldsmith_service", None)
    if service is not None:
        service.close_from_any_thread()
    app.close()
