"""`worldsmith world new|audit|tasks|show`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Optional

import typer

from worldsmith.commands.common import (EXIT_FAILED, EXIT_USAGE, STATE, console, emit_json, fail, friendly_errors,
                                        runtime)

app = typer.Typer(help="Mechanism-first worlds: generate, audit, make tasks, show.", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="world")


def _render(event: dict) -> None:
    if event.get("type") == "world":
        console.print(f"[cyan]{event['step']:>9}[/] {event['text']}", highlight=False)


@app.command("new")
def new(out: Annotated[Path, typer.Argument(help="Folder to create the world in.")],
        domain: Annotated[Optional[str], typer.Option(help="One of the 16 domains (default: by --topic, else by seed).")] = None,
        topic: Annotated[Optional[str], typer.Option(help="What the world and its tasks are about, e.g. 'churn'.")] = None,
        seed: Annotated[Optional[int], typer.Option(help="Seed: same contract + seed → byte-identical files.")] = None,
        rows: Annotated[Optional[int], typer.Option(help="Canonical rows of the main entity.")] = None,
        contract: Annotated[str, typer.Option(help="'template' (engine only) or 'llm' (LLM adapts the template, validated).")] = "template",
        tasks: Annotated[bool, typer.Option("--tasks/--no-tasks", help="Also write tasks into OUT/tasks.")] = False,
        max_tasks: Annotated[int, typer.Option(help="Most tasks to write with --tasks.")] = 10,
        json_out: Annotated[bool, typer.Option("--json", help="Machine-readable result.")] = False) -> None:
    """Generate a world: contract → canonical state → observed files → audit (and optionally tasks)."""
    from worldsmith.evolution.worlds.problems import ContractError
    from worldsmith.graphs.world import build_world_graph, world_report
    from worldsmith.llm import LLMError

    if contract not in ("template", "llm"):
        fail("--contract must be 'template' or 'llm'", code=EXIT_USAGE)
    settings = STATE.settings()
    state = {"domain": domain, "topic": topic, "seed": settings.world.seed if seed is None else seed,
             "rows": rows or settings.world.rows,
             "out_dir": str(out.resolve()), "contract_source": contract, "make_tasks": tasks, "max_tasks": max_tasks,
             "tasks_dir": str(out.resolve() / "tasks"), "use_llm": True}

    async def go() -> dict:
        rt = runtime()
        final: dict = {}
        async for mode, chunk in build_world_graph(rt).astream(state, stream_mode=["custom", "values"]):
            if mode == "custom" and not json_out:
                _render(chunk)
            elif mode == "values":
                final = chunk
        await rt.sessions.close_all()
        return final

    with friendly_errors(LLMError, ContractError, ValueError, OSError):
        final = asyncio.run(go())
    w = final.get("world", {})
    (out / "REPORT.md").write_text(world_report(final) + "\n", encoding="utf-8")
    if json_out:
        emit_json({"world": w, "provenance": final.get("provenance"), "tasks": final.get("tasks")})
    else:
        console.print(f"[green]world {w.get('world_id')}[/] in {out} — recoverable phenomena: "
                      f"{len(w.get('recoverable', []))}; report: {out / 'REPORT.md'}")


@app.command("audit")
def audit(world: Annotated[Path, typer.Argument(help="World folder.")],
          json_out: Annotated[bool, typer.Option("--json", help="Machine-readable result.")] = False) -> None:
    """Re-audit a world from its observed files only; exit 1 if any edge or invariant fails."""
    from worldsmith.evolution.worlds.audit import audit_world

    if not (world / "contract.json").is_file():
        fail(f"{world}: not a world folder (no contract.json)", code=EXIT_USAGE)
    with friendly_errors(ValueError, OSError):
        report = audit_world(world)
    if json_out:
        emit_json(report.model_dump(mode="json"))
    else:
        from rich.table import Table

        table = Table("kind", "id", "status", "observed", "expected", "reason", title=f"audit of {world}")
        for r in report.edges + report.invariants + report.phenomena:
            colour = {"pass": "green", "fail": "red", "skip": "yellow"}[r.status]
            table.add_row(r.kind, r.id, f"[{colour}]{r.status}[/]", _fmt(r.observed), _fmt(r.expected), r.reason[:60])
        console.print(table)
        from worldsmith.graphs.world import PLURAL

        s = report.summary
        console.print(", ".join(f"{PLURAL[k]} {v['pass']} pass / {v['fail']} fail / {v['skip']} skip" for k, v in s.items()))
    if not report.passed:
        raise typer.Exit(EXIT_FAILED)


def _fmt(v: object) -> str:
    return f"{v:.4g}" if isinstance(v, float) else ("" if v is None else str(v)[:30])


@app.command("tasks")
def tasks_cmd(world: Annotated[Path, typer.Argument(help="World folder (audited).")],
              out: Annotated[Optional[Path], typer.Option(help="Task collection folder (default WORLD/tasks).")] = None,
              max_tasks: Annotated[int, typer.Option(help="Most tasks to write.")] = 10,
              seed: Annotated[int, typer.Option(help="Subgraph sampling seed.")] = 0,
              topic: Annotated[Optional[str], typer.Option(help="Target variables about this topic first.")] = None,
              llm: Annotated[bool, typer.Option("--llm/--no-llm", help="LLM-written stakeholder requests (else templates).")] = True,
              json_out: Annotated[bool, typer.Option("--json", help="Machine-readable result.")] = False) -> None:
    """Write cause/consequence tasks (closed form + report with rubric) with verified reference solutions."""
    from worldsmith.graphs.world_tasks import write_world_tasks
    from worldsmith.llm import LLMError

    if not (world / "AUDIT.json").is_file():
        fail(f"{world}: no AUDIT.json — run `worldsmith world audit {world}` first", code=EXIT_USAGE)
    target = out or world / "tasks"

    async def go():
        rt = runtime()
        try:
            return await write_world_tasks(rt, world.resolve(), target.resolve(), max_tasks=max_tasks, seed=seed,
                                           use_llm=llm, on_event=None if json_out else _render, topic=topic)
        finally:
            await rt.sessions.close_all()

    with friendly_errors(LLMError, ValueError, OSError):
        written, dropped = asyncio.run(go())
    if json_out:
        emit_json({"tasks_dir": str(target), "tasks": written, "dropped": dropped})
        return
    for t in written:
        console.print(f"[green]✓[/] {t}")
    for d in dropped:
        console.print(f"[yellow]dropped {d['id']}[/]: {d['reason']}")
    console.print(f"{len(written)} task(s) in {target} (index: {target / 'index.jsonl'})")
    if not written:
        raise typer.Exit(EXIT_FAILED)


@app.command("show")
def show(world: Annotated[Path, typer.Argument(help="World folder.")],
         png: Annotated[Optional[Path], typer.Option(help="Where to write the DAG image (default WORLD/dag.png).")] = None) -> None:
    """Render the DAG as an image and print the observation ledger as a table."""
    from worldsmith.evolution.worlds.audit import load_contract
    from worldsmith.evolution.worlds.render import ledger_table, render_dag_png

    if not (world / "contract.json").is_file():
        fail(f"{world}: not a world folder (no contract.json)", code=EXIT_USAGE)
    target = png or world / "dag.png"
    with friendly_errors(ValueError, OSError):
        render_dag_png(load_contract(world), target)
        console.print(ledger_table(world))
    console.print(f"DAG image: {target}")
