"""`worldsmith world new|audit|tasks|show`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from worldsmith.commands.common import (EXIT_FAILED, EXIT_USAGE, console, emit_json, fail, friendly_errors,
                                        runtime)

app = typer.Typer(help="Mechanism-first worlds: generate, audit, make tasks, show.", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="world")


def _render(event: dict) -> None:
    if event.get("type") == "world":
        console.print(f"[cyan]{event['step']:>9}[/] {event['text']}", highlight=False)


@app.command("new")
def new(out: Annotated[Optional[Path], typer.Argument(help="Folder to create the world in.")] = None,
        domain: Annotated[Optional[str], typer.Option(help="One of the 16 domains (default: by --topic, else by seed).")] = None,
        topic: Annotated[Optional[str], typer.Option(help="What the world and its tasks are about, e.g. 'churn'.")] = None,
        seed: Annotated[Optional[int], typer.Option(help="Seed: same contract + seed → byte-identical files.")] = None,
        rows: Annotated[Optional[int], typer.Option(help="Canonical rows of the main entity.")] = None,
        contract: Annotated[str, typer.Option(help="'template' (engine only), 'llm' (LLM adapts the template, "
                                              "validated) or a contract FILE of your own (.json, .yaml, .yml).")] = "template",
        tasks: Annotated[bool, typer.Option("--tasks/--no-tasks", help="Also write tasks into OUT/tasks.")] = False,
        max_tasks: Annotated[Optional[int], typer.Option(help="Most tasks to write with --tasks (default 10).")] = None,
        overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace a different or altered world in OUT "
                                                "(its tasks/ and REPORT.md too); the old one stays until the new one "
                                                "is complete.")] = False,
        resume: Annotated[Optional[Path], typer.Option(help="Continue a killed run from its run directory.")] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Machine-readable result.")] = False) -> None:
    """Generate a world: contract → canonical state → observed files → audit (and optionally tasks).

    An identical, intact world already in OUT is not rebuilt: its stored audit is reported."""
    from worldsmith.app.world import build_world_run, resume_world_run
    from worldsmith.core.store import ArtifactError
    from worldsmith.evolution.worlds.problems import ContractError
    from worldsmith.llm import LLMError

    if (out is None) == (resume is None):
        fail("give the world folder OUT, or --resume RUN_DIR (not both)", code=EXIT_USAGE)
    if contract not in ("template", "llm"):
        if domain or topic or resume is not None:
            fail("--contract FILE sets the domain itself and builds in one step; leave out --domain, --topic and "
                 "--resume", code=EXIT_USAGE)
        _new_from_file(Path(contract), out, seed, rows, overwrite, tasks, max_tasks, json_out)  # type: ignore[arg-type]
        return
    printer = None if json_out else _render

    async def go() -> tuple[Any, dict]:
        rt = runtime()
        if resume is not None:
            return await resume_world_run(rt, resume, on_event=printer)
        request = {"domain": domain, "topic": topic, "seed": seed, "rows": rows, "out_dir": str(out.resolve()),
                   "contract_source": contract, "overwrite": overwrite, "make_tasks": tasks, "max_tasks": max_tasks,
                   "use_llm": True}
        return await build_world_run(rt, request, on_event=printer)

    with friendly_errors(LLMError, ContractError, ValueError, OSError, ArtifactError):
        run, final = asyncio.run(go())
    w = final.get("world", {})
    if json_out:
        emit_json({"world": w, "provenance": final.get("provenance"), "tasks": final.get("tasks"),
                   "run_dir": str(run.path)})
    else:
        reused = " (identical world already in place, not rebuilt)" if w.get("skipped") else ""
        console.print(f"[green]world {w.get('world_id')}[/]{reused} — recoverable phenomena: "
                      f"{len(w.get('recoverable', []))}; report: {run.path / 'report.md'}")


def _new_from_file(path: Path, out: Path, seed: int | None, rows: int | None, overwrite: bool, tasks: bool,
                   max_tasks: int | None, json_out: bool) -> None:
    """`world new OUT --contract FILE`: a user-written contract, validated (every problem with its field path),
    built as written (its own row counts unless --rows) and audited; tasks as `world tasks` writes them."""
    from worldsmith.core.store import ArtifactError
    from worldsmith.evolution.worlds.contract_file import read_contract_file
    from worldsmith.evolution.worlds.problems import ContractError
    from worldsmith.evolution.worlds.world import build_world
    from worldsmith.graphs.world_ops import audit_line

    with friendly_errors(ContractError, ValueError, OSError, ArtifactError):
        c, warnings = read_contract_file(path)
        result = build_world(c, seed or 0, out, rows, produced_by=f"user:{path.name}", overwrite=overwrite)
    written: list[str] = []
    if tasks:
        from worldsmith.app.world import world_tasks_run
        from worldsmith.llm import LLMError

        with friendly_errors(LLMError, ValueError, OSError, ArtifactError):
            _, written, _ = asyncio.run(world_tasks_run(runtime(), out, out / "tasks", max_tasks=max_tasks or 10,
                                                        seed=seed or 0, on_event=None if json_out else _render))
    if json_out:
        emit_json({"world": result.model_dump(mode="json"), "contract_file": str(path),
                   "warnings": [str(w) for w in warnings], "tasks": written})
        return
    from rich.markup import escape

    for w in warnings:
        console.print(f"[yellow]{escape(str(w))}[/]", highlight=False)
    reused = " (identical world already in place, not rebuilt)" if result.skipped else ""
    audit = audit_line(result.audit_summary) if result.audit_summary else "audit: not run"
    console.print(f"[green]world {result.world_id}[/] from {path}{reused} — {audit}; recoverable phenomena: "
                  f"{len(result.recoverable)}" + (f"; {len(written)} task(s) in {out / 'tasks'}" if tasks else ""))


@app.command("audit")
def audit(world: Annotated[Path, typer.Argument(help="World folder.")],
          json_out: Annotated[bool, typer.Option("--json", help="Machine-readable result.")] = False) -> None:
    """Re-audit a world from its observed files only; exit 1 if any edge or invariant fails, or if the world no
    longer matches its manifest (then nothing is audited or written)."""
    from worldsmith.core.store import ArtifactError
    from worldsmith.evolution.worlds.audit import audit_world

    if not (world / "contract.json").is_file():
        fail(f"{world}: not a world folder (no contract.json)", code=EXIT_USAGE)
    with friendly_errors(ValueError, OSError, ArtifactError):
        report = audit_world(world)  # verifies the manifest first
    if json_out:
        emit_json(report.model_dump(mode="json"))
    else:
        from rich.table import Table

        table = Table("kind", "id", "status", "observed", "expected", "reason", title=f"audit of {world}")
        for r in report.edges + report.invariants + report.phenomena + report.claims:
            colour = {"pass": "green", "fail": "red", "skip": "yellow"}[r.status]
            table.add_row(r.kind, r.id, f"[{colour}]{r.status}[/]", _fmt(r.observed), _fmt(r.expected), r.reason[:60])
        console.print(table)
        from worldsmith.graphs.world_ops import PLURAL

        s = report.summary
        console.print(", ".join(f"{PLURAL[k]} {v['pass']} pass / {v['fail']} fail / {v['skip']} skip" for k, v in s.items()))
    if not report.passed:
        raise typer.Exit(EXIT_FAILED)


def _fmt(v: object) -> str:
    return f"{v:.4g}" if isinstance(v, float) else ("" if v is None else str(v)[:30])


@app.command("tasks")
def tasks_cmd(world: Annotated[Optional[Path], typer.Argument(help="World folder (audited).")] = None,
              out: Annotated[Optional[Path], typer.Option(help="Task collection folder (default WORLD/tasks).")] = None,
              max_tasks: Annotated[int, typer.Option(help="Most tasks to write.")] = 10,
              seed: Annotated[int, typer.Option(help="Subgraph sampling seed.")] = 0,
              topic: Annotated[Optional[str], typer.Option(help="Target variables about this topic first.")] = None,
              llm: Annotated[bool, typer.Option("--llm/--no-llm", help="LLM-written stakeholder requests (else templates).")] = True,
              resume: Annotated[Optional[Path], typer.Option(help="Continue a killed run from its run directory.")] = None,
              json_out: Annotated[bool, typer.Option("--json", help="Machine-readable result.")] = False) -> None:
    """Write cause/consequence tasks (closed form + report with rubric) with verified reference solutions; refused
    for a world that no longer matches its manifest."""
    from worldsmith.app.world import resume_world_tasks_run, world_tasks_run
    from worldsmith.core.store import ArtifactError
    from worldsmith.evolution.worlds.integrity import require_intact_world
    from worldsmith.llm import LLMError

    if (world is None) == (resume is None):
        fail("give the WORLD folder, or --resume RUN_DIR (not both)", code=EXIT_USAGE)
    if world is not None:
        with friendly_errors(ArtifactError):
            require_intact_world(world)  # before any run directory: an altered world gets no tasks
        if not (world / "AUDIT.json").is_file():
            fail(f"{world}: no AUDIT.json — run `worldsmith world audit {world}` first", code=EXIT_USAGE)
    printer = None if json_out else _render

    async def go():
        rt = runtime()
        if resume is not None:
            return await resume_world_tasks_run(rt, resume, on_event=printer)
        return await world_tasks_run(rt, world, out or world / "tasks", max_tasks=max_tasks, seed=seed, topic=topic,
                                     use_llm=llm, on_event=printer)

    with friendly_errors(LLMError, ValueError, OSError, ArtifactError):
        run, written, dropped = asyncio.run(go())
    target = json.loads((run.path / "request.json").read_text(encoding="utf-8"))["tasks_dir"]
    if json_out:
        emit_json({"tasks_dir": target, "tasks": written, "dropped": dropped, "run_dir": str(run.path)})
    else:
        for t in written:
            console.print(f"[green]✓[/] {t}")
        for d in dropped:
            console.print(f"[yellow]dropped {d['id']}[/]: {d['reason']}")
        console.print(f"{len(written)} task(s) in {target} (run: {run.path})")
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
