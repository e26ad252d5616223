"""Analyst stream events → chat messages for the web UI (Gradio's "messages" format, plain dicts).

Pure functions, no Gradio import: a message is {"role": "user"|"assistant", "content": str | {"path": ...}}.
String content is Markdown; Gradio renders tables, code fences and blockquotes. Symbols are ones common text
fonts carry (✓ ✗ ⚠ ↺), not colour emoji, which many Linux browsers lack.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ChatMessage = dict[str, Any]

FINAL_ANSWER_HEADING = "### ✓ Final answer"
STOPPED_HEADING = "### ⚠ Stopped without an answer"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp")


def fence(text: str, lang: str = "") -> str:
    """`text` in a Markdown code fence longer than any backtick run inside it (so it cannot break out)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def quote(text: str) -> str:
    """Markdown blockquote (rendered muted by the UI's CSS); blank lines keep the quote going."""
    return "\n".join(f"> {line}" if line.strip() else ">" for line in text.strip().splitlines()) or ">"


def user_message(text: str) -> ChatMessage:
    return {"role": "user", "content": text}


def note_message(text: str) -> ChatMessage:
    """A line from the UI itself (new thread, files attached), not from the model."""
    return {"role": "assistant", "content": f"ℹ {text}"}


def error_message(text: str) -> ChatMessage:
    return {"role": "assistant", "content": f"**⚠ Error** — {text}"}


def servable(path: str) -> bool:
    """Only a regular file reached without any symbolic link may be shown (a cell can plant `plot.png -> /etc/…`;
    the UI must never hand the link's target to the browser)."""
    p = Path(path)
    try:
        return p.is_absolute() and p.resolve(strict=True) == p and p.is_file()
    except OSError:
        return False


def event_to_message(event: dict[str, Any]) -> ChatMessage | None:
    """One analyst stream event as one chat message; None for events that only update the status line."""
    kind = event.get("type")
    if kind == "thought":
        text = str(event.get("text", "")).strip()
        return {"role": "assistant", "content": quote(f"Thought: {text}")} if text else None
    if kind == "code":
        return {"role": "assistant", "content": "**Code**\n\n" + fence(str(event.get("code", "")), "python")}
    if kind == "output":
        body = str(event.get("text", "")) or "(no output)"
        head = "**Output**" if event.get("ok", True) else "**✗ Error in the code**"
        return {"role": "assistant", "content": f"{head}\n\n" + fence(body, "text")}
    if kind == "plot":
        path = str(event.get("path", ""))
        if not path.lower().endswith(IMAGE_SUFFIXES) or not servable(path):
            return {"role": "assistant", "content": f"File written: `{Path(path).name}`"}
        return {"role": "assistant", "content": {"path": path, "alt_text": Path(path).name}}
    if kind == "feedback":
        label = f"Answer check ({event['guard']})" if event.get("guard") else "Format check"
        return {"role": "assistant", "content": quote(f"↺ **{label}:** {event.get('text', '')}")}
    if kind == "answer":
        note = ("\n\n" + quote("⚠ **Unsupported:** no code that read the data backs this answer, or it copies the "
                                "worked example") if event.get("status") == "unsupported" else "")
        return {"role": "assistant",
                "content": f"{FINAL_ANSWER_HEADING}\n\n{str(event.get('text', '')).strip()}{note}"}
    if kind == "done":
        status = event.get("status") or "unknown"
        hint = {"max_turns": " — the turn limit was reached; ask again or raise analyst.max_turns",
                "context_full": " — the conversation outgrew the model's context; start a new chat, or raise "
                                "llm.default.n_ctx (embedded) or use a model with a longer context"}.get(status, "")
        return {"role": "assistant", "content": f"{STOPPED_HEADING}\n\nstatus: `{status}`{hint}"}
    return None


STATUS_WORDS = {"thought": "thinking…", "code": "running code…", "output": "reading the output…",
                "plot": "reading the output…", "feedback": "retrying the answer format…"}


def status_word(event: dict[str, Any]) -> str | None:
    """What the agent is doing after `event`, for the status line (None: leave it as is)."""
    kind = event.get("type")
    if kind == "status":
        text = str(event.get("text", "")).strip()
        return f"{text}…" if text and not text.endswith("…") else (text or None)
    return STATUS_WORDS.get(str(kind))
