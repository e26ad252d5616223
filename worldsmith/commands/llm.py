"""`worldsmith llm ping|models`."""

from __future__ import annotations

from typing import Annotated

import typer

from worldsmith.commands.common import EXIT_FAILED, STATE, console, emit_json, fail

app = typer.Typer(help="Talk to the configured models.", no_args_is_help=True)


@app.command("ping")
def ping_cmd(role: Annotated[str, typer.Option(help="Role whose endpoint to test (agent, teacher, judge, student, …).")] = "agent",
             json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Send one structured request; print model, latency, tokens/s and the validated object."""
    from worldsmith.core.llm_config import RoleConfigError
    from worldsmith.llm import LLM, LLMError
    from worldsmith.llm.errors import error_kind
    from worldsmith.llm.ping import ping

    settings = STATE.settings()
    try:
        ep = settings.llm.for_role(role)
        if not json_out:
            # soft_wrap: a model named by its GGUF path stays one copyable line, not folded mid-word by rich
            console.print(f"pinging role [cyan]{role}[/] → {ep.provider}:{ep.model} …", soft_wrap=True)
        result = ping(LLM.from_settings(settings), role)
    except (LLMError, RoleConfigError) as exc:
        if json_out:  # a script reads one JSON object either way; the exit code says which
            emit_json({"ok": False, "role": role, "error": str(exc) or type(exc).__name__, "kind": error_kind(exc)})
            raise typer.Exit(EXIT_FAILED) from None
        fail(str(exc) or type(exc).__name__)
    if json_out:
        emit_json({"ok": result.correct, **result.model_dump()})
    else:
        load = f"load {result.load_s:.2f} s  " if result.load_s >= 0.01 else ""
        console.print(f"[green]ok[/] {result.provider}:{result.model}  {load}latency {result.latency_s:.2f} s  "
                      f"{result.completion_tokens} tokens, {result.tokens_per_s:.1f} tok/s"
                      + ("  (needed a repair retry)" if result.repaired else ""), soft_wrap=True)
        console.print(f"object: {result.answer.model_dump_json()}  (2+3 {'correct' if result.correct else 'WRONG'})",
                      highlight=False)
    if not result.correct:
        fail("the model answered, schema-valid, but 2+3 was wrong")


@app.command("models")
def models_cmd(json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """List the embedded models, whether their packages are installed, and where they assemble."""
    from worldsmith.llm.models import REGISTRY, missing_packages

    settings = STATE.settings()
    rows = []
    for name, spec in REGISTRY.items():
        missing = missing_packages(spec)
        rows.append({"name": name, "installed": not missing, "missing": missing, "size": spec.size,
                     "sha256": spec.sha256})
    if json_out:
        emit_json(rows)
        return
    for r in rows:
        state = "[green]installed[/]" if r["installed"] else f"[red]missing {len(r['missing'])} package(s)[/]"
        size = f"{r['size'] / 1e6:8.0f} MB" if r["size"] else "        ?"
        console.print(f"{r['name']:<22} {size}  {state}")
    console.print(f"[dim]assembled into {settings.llm.models_dir or settings.home / 'models'}; any other GGUF is "
                  "served by its path (--set llm.roles.agent.model=student.gguf)[/]")
