"""Workspace evolution as the CLI, router, UI and server use it: one orchestration per flow.

- :func:`run_evolution` (`worldsmith evolve DATA_DIR`, `--resume RUN`): the evolution graph in a run directory
  with a SQLite checkpointer, then the report (graph image, findings table, verdict mix, budget, truth score).
- :func:`show_run` (`evolve show RUN`): the exploration graph's picture, counts and verified findings.
- backward task synthesis (`evolve tasks RUN`) lives in :mod:`worldsmith.app.evolve_tasks`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from worldsmith.core.evolution_schemas import EvolveBudget, EvolveConfig
from worldsmith.core.runs import RunDir
from worldsmith.core.store import read_model, write_model
from worldsmith.evolution.truth import TruthScore
from worldsmith.evolution.workspace.graph import ExplorationGraph
from worldsmith.evolution.workspace.render import (
    FindingRow,
    draw_graph,
    finding_rows,
    markdown_section,
    headline,
    status_counts,
)
from worldsmith.evolution.workspace.store import WORKSPACE_DIRNAME
from worldsmith.graphs.runtime import GraphRuntime

#: Where `show` draws the graph when no --out is given (inside the run directory, next to report.md).
GRAPH_IMAGE = "exploration_graph.png"


class EvolveView(BaseModel):
    """What `evolve show` reports about one run."""

    run: str
    nodes: int  # with the initial workspace (as status_counts)
    max_depth: int
    status_counts: dict[str, int]
    headline: str  # the analysis nodes' counts, as the report says them (render.headline)
    findings: list[FindingRow]
    image: str | None
    markdown: str


def open_graph(run: str | os.PathLike[str]) -> ExplorationGraph:
    """The exploration graph of a run directory (or of its ``workspace/`` folder); a clear error otherwise."""
    run = Path(run)
    for db in (run / WORKSPACE_DIRNAME / "graph.sqlite", run / "graph.sqlite"):
        if db.is_file():
            return ExplorationGraph(db)
    if not run.is_dir():
        raise FileNotFoundError(f"{run}: no such run directory")
    raise FileNotFoundError(f"{run}: no exploration graph ({WORKSPACE_DIRNAME}/graph.sqlite); "
                            "give the folder of an evolution run")


def show_run(run: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *, draw: bool = True) -> EvolveView:
    """Draw a run's exploration graph (to ``out``, default ``RUN/exploration_graph.png``) and collect its
    verified findings and a Markdown section for the run report."""
    graph = open_graph(run)
    nodes = graph.nodes()
    image = None
    if draw:
        target = Path(out) if out is not None else Path(run) / GRAPH_IMAGE
        image = str(draw_graph(graph, target))
    md_image = None
    if image is not None:
        md_image = os.path.relpath(image, Path(run)) if out is None else image
    return EvolveView(run=str(run), nodes=len(nodes), max_depth=max([0, *(n.depth for n in nodes)]),
                      status_counts=status_counts(nodes), headline=headline(nodes), findings=finding_rows(graph), image=image,
                      markdown=markdown_section(graph, image=md_image))


# --------------------------------------------------------------------------------------------- the run

#: The run's own record of what it was asked (a resumed run reads it back).
REQUEST_FILE = "evolve.json"
CHECKPOINTS = "checkpoints.sqlite"
THREAD_ID = "evolve"


class EvolveRequest(BaseModel):
    data_dir: str = Field(description="the folder evolution starts from (a world's data room when world_dir is set)")
    world_dir: str | None = Field(None, description="the world whose canonical truth scores the findings")
    config: EvolveConfig = Field(default_factory=EvolveConfig)


def resolve_data(path: str | os.PathLike[str]) -> tuple[Path, Path | None]:
    """(data folder, world folder): a world folder (with contract.json) evolves its data room and is scored
    against its truth; any other folder is evolved as it is."""
    from worldsmith.evolution.worlds.artifacts import CONTRACT, DATA

    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such data folder")
    if (path / CONTRACT).is_file() and (path / DATA).is_dir():
        return path / DATA, path
    return path, None


#: The default sample workspace: a world's data room (multi-file, defects, memos) with known truth.
SAMPLE_DOMAIN, SAMPLE_ROWS, SAMPLE_SEED = "commercial_growth", 2000, 0


def sample_world(runs_dir: str | os.PathLike[str], domain: str = SAMPLE_DOMAIN) -> Path:
    """Build (or reuse: same contract and seed give the same files) the sample world under ``RUNS/sample-worlds``."""
    from worldsmith.evolution.worlds import build_world, load_template

    out = Path(runs_dir) / "sample-worlds" / f"{domain}-s{SAMPLE_SEED}"
    build_world(load_template(domain, rows=SAMPLE_ROWS), seed=SAMPLE_SEED, out_dir=out, produced_by=f"sample:{domain}")
    return out


async def run_evolution(rt: GraphRuntime, data_dir: str | os.PathLike[str] | None = None, *,
                        config: EvolveConfig | None = None, resume: str | os.PathLike[str] | None = None,
                        out: str | os.PathLike[str] | None = None,
                        on_event: Callable[[dict[str, Any]], None] | None = None) -> tuple[RunDir, EvolveSummary]:
    """Evolve a data folder in a new run directory, or continue the run at ``resume`` where it stopped; then write
    its report (graph image, findings table, verdict mix, budget used, truth score for a world)."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from worldsmith.graphs.evolve import build_evolve_graph, recursion_limit

    if resume is not None:
        run = RunDir.open(resume)
        request = read_model(run.path / REQUEST_FILE, EvolveRequest)
    else:
        if data_dir is None:
            raise ValueError("evolve: give a data folder (or --resume RUN)")
        data, world = resolve_data(data_dir)
        request = EvolveRequest(data_dir=str(data.resolve()), world_dir=str(world.resolve()) if world else None,
                                config=config or EvolveConfig())
        run = RunDir.create_at("evolve", rt.settings.runs_dir, out, config=rt.settings.masked())
        write_model(run.path / REQUEST_FILE, request)
    graph_config = {"configurable": {"thread_id": THREAD_ID}, "recursion_limit": recursion_limit(request.config)}
    final: dict[str, Any] = {}
    try:
        async with AsyncSqliteSaver.from_conn_string(str(run.path / CHECKPOINTS)) as saver:
            graph = build_evolve_graph(checkpointer=saver)
            started = (await graph.aget_state(graph_config)).values
            inputs = None if started else {"data_dir": request.data_dir, "run_dir": str(run.path),
                                           "config": request.config.model_dump(mode="json")}
            async for mode, chunk in graph.astream(inputs, graph_config, context=rt,
                                                   stream_mode=["custom", "values"]):
                if mode == "custom":
                    run.event("evolve_step", **chunk)
                    if on_event is not None:
                        on_event(chunk)
                else:
                    final = chunk
            final = final or (await graph.aget_state(graph_config)).values
    except BaseException as exc:
        run.finish(status="failed", error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise
    finally:
        await rt.sessions.close_all()
    summary = summarize(run.path, request, final)
    run.write_json("summary.json", summary.model_dump(mode="json"))
    run.write_report(evolve_report(run.path, request, summary))
    run.finish(status="ok" if summary.verified or summary.nodes == 0 else "partial", nodes=summary.nodes,
               verified=summary.verified)
    return run, summary


async def evolve_request(rt: GraphRuntime, folder: Path, *, tasks: int) -> dict[str, Any]:
    """What `worldsmith ask "explore ./data and make 20 tasks"` runs: evolution sized for the request, then
    backward synthesis of up to ``tasks`` tasks."""
    from worldsmith.app.evolve_tasks import synthesize_tasks
    from worldsmith.graphs.router import evolution_budget
    from worldsmith.graphs.runtime import emit

    steps, nodes = evolution_budget(tasks)
    cfg = EvolveConfig(budget=EvolveBudget(steps=steps, max_nodes=nodes))
    run, summary = await run_evolution(rt, folder, config=cfg, on_event=emit)
    made = await synthesize_tasks(rt, run.path, n=tasks, on_event=emit)
    written = [o.task_id for o in made.outcomes if o.status == "written"]
    return {"status": "ok" if written else "failed", "run_dir": str(run.path), "tasks_dir": made.tasks_dir,
            "report": str(run.path / "report.md"), "tasks": written, "verified_findings": summary.verified,
            "dropped": [f"node {o.node}: {o.reason}" for o in made.outcomes if o.status == "dropped"]}


# --------------------------------------------------------------------------------------------- the report


class EvolveSummary(BaseModel):
    run: str
    nodes: int = Field(description="nodes besides the root")
    verified: int = Field(description="supported + revised nodes with a finding")
    status_counts: dict[str, int]
    by_mode: dict[str, int]
    max_depth: int
    steps: int
    tokens: int
    tokens_per_verified: float | None
    review_rounds: int = Field(0, description="executor → validator rounds run over all nodes")
    max_review_rounds: int = Field(0, description="the most rounds one node took")
    budget: EvolveBudget
    stop: str | None
    notes: list[str] = Field(default_factory=list)
    truth: TruthScore | None = None
    unchecked: list[str] = Field(default_factory=list, description="verified findings no alternative check of which "
                                                                   "ran: they stand on their reproduction alone")


def summarize(run_dir: Path, request: EvolveRequest, final: dict[str, Any]) -> EvolveSummary:
    from collections import Counter

    from worldsmith.evolution.truth import score_findings, truth_sheet

    graph = open_graph(run_dir)
    nodes = [n for n in graph.nodes() if n.mode != "root"]
    verified = [n for n in nodes if n.verified and n.conclusion.strip()]
    tokens = int(final.get("tokens", 0))
    from worldsmith.graphs.evolve_ops import read_node_run

    runs = {n.id: r for n in nodes if (r := read_node_run(run_dir, n.id)) is not None}
    rounds = [len(r.review.rounds) for r in runs.values() if r.review]
    unchecked = [n.finding().id for n in verified if (r := runs.get(n.id)) is not None and r.unchecked]
    truth = None
    if request.world_dir:
        truth = score_findings([(n.finding().id, n.conclusion) for n in verified], truth_sheet(request.world_dir))
    return EvolveSummary(run=str(run_dir), nodes=len(nodes), verified=len(verified), status_counts=status_counts(nodes),
                         by_mode=dict(Counter(n.mode for n in nodes)), max_depth=max([0, *(n.depth for n in nodes)]),
                         steps=int(final.get("step", 0)), tokens=tokens,
                         tokens_per_verified=round(tokens / len(verified), 1) if verified else None,
                         review_rounds=sum(rounds), max_review_rounds=max(rounds, default=0),
                         budget=request.config.budget, stop=final.get("stop"), notes=list(final.get("notes", [])),
                         truth=truth, unchecked=unchecked)


def evolve_report(run_dir: Path, request: EvolveRequest, s: EvolveSummary) -> str:
    """report.md: the exploration graph (image + verified findings), the verdict mix, the budget used and, for a
    world, the findings scored against its canonical truth."""
    graph = open_graph(run_dir)
    image = draw_graph(graph, run_dir / GRAPH_IMAGE)
    b = s.budget
    lines = [f"# Evolution run {run_dir.name}", "", f"Data: `{request.data_dir}`"
             + (f" (world `{request.world_dir}`)" if request.world_dir else ""), "",
             markdown_section(graph, image=os.path.relpath(image, run_dir)), "## Verdict mix", "",
             "| status | nodes |", "|---|---|", *[f"| {k} | {v} |" for k, v in s.status_counts.items()], "",
             "By mode: " + (", ".join(f"{k} {v}" for k, v in sorted(s.by_mode.items())) or "none"), "",
             "## Budget used", "", "| | used | limit |", "|---|---|---|",
             f"| director rounds | {s.steps} | {b.steps} |", f"| nodes | {s.nodes} | {b.max_nodes} |",
             f"| max depth | {s.max_depth} | {b.max_depth} |", f"| tokens | {s.tokens} | {b.max_tokens} |",
             (f"| review rounds per node (most used; {s.review_rounds} in all) | {s.max_review_rounds} "
              f"| {b.review_rounds} |"), "",
             (f"Stopped: {s.stop or 'not yet (resume with --resume)'}. Tokens per verified finding: "
             f"{s.tokens_per_verified if s.tokens_per_verified is not None else 'n/a (none verified)'}."), ""]
    if s.unchecked:
        lines += [(f"Standing on their reproduction alone (no alternative check of theirs ran; no task is built on "
                   f"them): {', '.join(s.unchecked)}."), ""]
    if s.truth is not None:
        t = s.truth
        prec = f"{t.precision:.0%}" if t.precision is not None else "n/a"
        rec = f"{t.recall:.0%}" if t.recall is not None else "n/a"
        lines += ["## Against the world's canonical truth", "",
                  (f"Precision {prec} ({t.correct} correct, {t.wrong} wrong, {t.unchecked} unchecked of "
                  f"{t.checked + t.unchecked} verified findings); recall {rec} ({len(t.rediscovered)} of {t.planted} "
                  f"planted effects: {', '.join(t.rediscovered) or 'none'})."), "",
                  "| finding | verdict | matched | reason |", "|---|---|---|---|",
                  *[f"| {m.finding}{' (reproduction only)' if m.finding in s.unchecked else ''} "
                    f"| {m.verdict} | {m.matched or '—'} | {m.reason} |" for m in t.matches], ""]
    if s.notes:
        lines += ["## Notes", "", *[f"- {n}" for n in s.notes[-20:]], ""]
    return "\n".join(lines)
