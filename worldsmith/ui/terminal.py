"""Rendering of analyst/router stream events in a terminal (rich)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.syntax import Syntax


def render_event(console: Console, event: dict[str, Any]) -> None:
    kind = event.get("type")
    if kind == "thought":
        console.print(f"[dim italic]💭 {event['text']}[/]", highlight=False)
    elif kind == "code":
        console.print(Panel(Syntax(event["code"], "python", theme="ansi_dark", word_wrap=True), title="code",
                            title_align="left", border_style="blue"))
    elif kind == "output":
        style = "green" if event.get("ok", True) else "red"
        console.print(Panel(event["text"] or "(no output)", title="output", title_align="left", border_style=style),
                      highlight=False, markup=False)
    elif kind == "plot":
        console.print(f"[magenta]🖼  plot saved: {event['path']}[/]")
    elif kind == "feedback":
        console.print(f"[yellow]↺ {event['text']}[/]", highlight=False)
    elif kind == "answer":
        unsupported = event.get("status") == "unsupported"  # a blocking answer guard still fired on it
        console.print(Panel(event["text"], title="answer (unsupported: no code that read the data backs it)"
                            if unsupported else "answer", title_align="left",
                            border_style="bold yellow" if unsupported else "bold green"),
                      highlight=False, markup=False)
    elif kind == "done":
        console.print(f"[red]stopped without an answer ({event.get('status')})[/]")
    elif kind == "intent":
        i = event["intent"]
        console.print(f"[cyan]intent:[/] {i['action']} " + ", ".join(
            f"{k}={v}" for k, v in i.items() if v not in (None, [], "") and k not in ("action", "question", "source")))
    elif kind == "plan":
        p = event["plan"]
        for s in p["steps"]:
            console.print(f"[cyan]plan:[/] {s}", highlight=False)
        if p.get("command"):
            console.print("[cyan]equivalent command:[/] ", end="")
            console.print(p["command"], highlight=False, markup=False)
    elif kind == "missing":
        for m in event["items"]:
            console.print(f"[bold red]missing:[/] {m}", highlight=False)
    elif kind == "status":
        pass
    else:
        console.print(f"[dim]{event}[/]")
