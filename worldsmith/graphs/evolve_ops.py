"""The work behind the evolution graph's nodes: profile the root, plan a round (director → decomposer → proposer,
search retrieval), and run one node (executor ⇄ validator review loop → commit or discard).

Idempotent on purpose, so a run killed anywhere resumes without duplicate nodes: a planned item is looked up in the
exploration graph by (parents, goal) before a node is proposed, a node that already has its verdict is not run
again, and a node left ``running`` by the kill is re-run under its own id from a fresh work folder.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable
from itertools import zip_longest
from pathlib import Path
from typing import Any, TypeVar

from worldsmith.agents.asking import Outcome
from worldsmith.agents.decomposer import decompose
from worldsmith.agents.director import direct
from worldsmith.agents.executor import LOG_FILE, execute
from worldsmith.agents.profiler import profile
from worldsmith.agents.proposer import propose
from worldsmith.agents.review import review_loop
from worldsmith.agents.validator import validate
from worldsmith.core.evolution_schemas import (
    Artifact,
    Composition,
    DomainProfile,
    EvolveConfig,
    ExecutionResult,
    GoalPackage,
    NodeRun,
    ProfilerOutput,
    WorkspaceProfile,
)
from worldsmith.core.grading import normalise_text
from worldsmith.core.schemas import ModelCall
from worldsmith.core.store import ArtifactError, atomic_write_text, read_model
from worldsmith.core.workspace_types import FINAL_STATUSES, Node
from worldsmith.evolution.ideas import join_ideas, question_ideas
from worldsmith.evolution.modes import (
    OfflineWebSearch,
    node_of,
    node_records,
    search_context,
    split_objective,
    verified_findings,
)
from worldsmith.evolution.workspace import (
    GENERATED,
    SOURCES,
    WorkspaceStore,
    release,
    workspace_root,
)
from worldsmith.graphs.runtime import emit
from worldsmith.memory import RunMemory, memory_path
from worldsmith.tools.sandbox.base import SandboxError, SandboxUnavailable

NODES_DIR = "nodes"
WORK_DIR = "work"
FALLBACK_WORK_MODES = ["descriptive", "diagnostic", "comparative"]


def tokens_of(calls: list[ModelCall]) -> int:
    return sum(c.prompt_tokens + c.completion_tokens for c in calls)


T = TypeVar("T")


async def traced(agent: str, work: Awaitable[Outcome[T]], **where: Any) -> Outcome[T]:
    """Await one agent's work between two progress events (``{"type": "agent", "phase": "start" | "done"}``),
    so a run on a slow model shows what it is doing while a node is still running; the run log keeps both."""
    emit({"type": "agent", "agent": agent, "phase": "start", **where})
    t0 = time.perf_counter()
    out = await work
    emit({"type": "agent", "agent": agent, "phase": "done", **where, "s": round(time.perf_counter() - t0, 1),
          "tokens": tokens_of(out.calls), "ok": out.value is not None, "errors": [e[:300] for e in out.errors[-2:]]})
    return out


def open_store(run_dir: str | os.PathLike[str]) -> WorkspaceStore:
    return WorkspaceStore(workspace_root(run_dir))


def open_memory(run_dir: str | os.PathLike[str], llm: Any) -> RunMemory:
    return RunMemory(memory_path(run_dir), llm)


# --------------------------------------------------------------------------------------------- setup


def fallback_profile(files: Any) -> ProfilerOutput:
    """A profile from the file tools alone, when the model gives none: the run can still explore."""
    names = [t.file for t in files.tables] + [d.file for d in files.documents]
    return ProfilerOutput(
        workspace=WorkspaceProfile(overview=f"A folder of {len(names)} files: {', '.join(names[:12])}.",
                                   artifacts=[Artifact(path=n, role="data file") for n in names] or
                                   [Artifact(path="(none)", role="no readable file")]),
        domain=DomainProfile(domain="general", work_modes=FALLBACK_WORK_MODES))


def table_lines(files: Any, max_chars: int = 2500) -> str:
    """One line per table of the folder: its label, rows and column names (what the director's questions may
    compute on). Columns past the budget are counted, not listed."""
    lines = []
    budget = max_chars // max(1, len(files.tables))
    for t in files.tables:
        head = f"- {t.label} ({t.n_rows}{'' if t.n_rows_exact else '~'} rows): "
        names, shown = [c.name for c in t.columns], []
        for name in names:
            if len(head) + len(", ".join([*shown, name])) > budget:
                break
            shown.append(name)
        more = f", … (+{len(names) - len(shown)} more)" if len(shown) < len(names) else ""
        lines.append(head + ", ".join(shown) + more)
    return "\n".join(lines)


def table_columns(files: Any) -> dict[str, list[str]]:
    """Each table of the folder (its label) → its column names."""
    return {t.label: [c.name for c in t.columns] for t in files.tables}


async def profile_root(llm: Any, data_dir: Path) -> tuple[ProfilerOutput, dict[str, Any], int, list[str]]:
    """The profiler's reading of the data folder (or the fallback profile), the folder's tables
    ({"text": :func:`table_lines`, "columns": :func:`table_columns`}), its tokens and its errors."""
    from worldsmith.tools.files.profile import profile_workspace

    files = await asyncio.to_thread(profile_workspace, data_dir)
    tables = {"text": table_lines(files), "columns": table_columns(files),
              "rows": {t.label: t.n_rows for t in files.tables},
              "ideas": await asyncio.to_thread(question_ideas, files, root=data_dir),
              "join_ideas": await asyncio.to_thread(join_ideas, files, root=data_dir)}
    out = await traced("profiler", profile(llm, files))
    if out.value is None:
        return fallback_profile(files), tables, tokens_of(out.calls), [
            f"profiler: {e}" for e in out.errors[-3:]] or ["profiler gave no profile"]
    return out.value, tables, tokens_of(out.calls), []


async def ingest_documents(memory: RunMemory, data_dir: Path, docs: str | None) -> list[str]:
    """The run's document corpus: the memos and notes of the data folder, plus a user's documents folder."""
    notes = []
    for folder in [data_dir] + ([Path(docs)] if docs else []):
        report = await memory.aingest(folder)
        notes.append(f"{folder}: {report.files} documents, {report.chunks} chunks")
    return notes


# --------------------------------------------------------------------------------------------- plan


def offered_ideas(tables: dict[str, Any], nodes: list[Any], asked: Callable[[str], bool], n: int = 6) -> list[str]:
    """The director's starting points: the strongest one-table ideas not asked yet; once a node below the root is
    verified (a join deepens a verified node, never the initial workspace), join ideas alternate with them, a
    join first."""
    single = [q for q in tables.get("ideas", []) if not asked(q)]
    deep = any(node.depth > 0 and node.verified for node in nodes)
    joins = [q for q in tables.get("join_ideas", []) if not asked(q)] if deep else []
    mixed = [q for pair in zip_longest(joins, single) for q in pair if q is not None]
    return mixed[:n]


async def plan_round(llm: Any, store: WorkspaceStore, memory: RunMemory, cfg: EvolveConfig,
                     prof: ProfilerOutput, tables: dict[str, Any] | None = None, refused: list[str] | None = None
                     ) -> tuple[list[dict[str, Any]], int, list[str]]:
    """Director → (decomposer) → proposer for each direction → the round's planned nodes, tokens, errors.
    A planned node is plain data (it is checkpointed): parents, mode, question, depends_on, work_mode, goal (a
    GoalPackage dump), context and retrieved (search mode)."""
    nodes = await asyncio.to_thread(store.graph.nodes)
    overview = prof.workspace.overview
    records = node_records(nodes, overview)

    def seen(question: str) -> bool:
        return memory.is_duplicate(question, cfg.duplicate_threshold).duplicate

    asked = {normalise_text(n.goal) for n in nodes if n.goal}  # as the director's checker compares them
    ideas = offered_ideas(tables or {}, nodes, lambda q: normalise_text(q) in asked or seen(q))
    decided = await traced("director", direct(llm, records, prof.workspace, prof.domain, seen=seen, ideas=ideas,
                                              k=cfg.directions, max_depth=cfg.budget.max_depth,
                                              tables=(tables or {}).get("text", ""),
                                              columns=(tables or {}).get("columns"), rows=(tables or {}).get("rows"),
                                              refused=refused or []))
    tokens, errors = tokens_of(decided.calls), [f"director: {e}" for e in decided.errors]
    if decided.value is None:
        return [], tokens, errors or ["director: no usable decision"]
    findings = verified_findings(nodes, overview)
    decision = decided.value.decision
    items: list[dict[str, Any]] = []
    if isinstance(decision, Composition):
        parents = list(dict.fromkeys(node_of(s) for s in decision.sources))
        got = await traced("proposer", propose(llm, decision, findings, prof.workspace))
        tokens += tokens_of(got.calls)
        if got.value is None:
            return [], tokens, errors + [f"proposer: {e}" for e in got.errors[-2:]]
        items.append({"parents": parents, "mode": "compose", "question": decision.objective,
                             "depends_on": decision.sources[0], "work_mode": "joint analysis",
                             "goal": got.value.model_dump(mode="json"), "context": "", "retrieved": []})
        return items, tokens, errors
    parent = int(decision.parent)
    inherited = next((n.goal or "" for n in nodes if n.id == parent), "")  # its files may be named below it
    files = [a.path for a in prof.workspace.artifacts]
    for d in decision.directions:
        questions = [d.question]
        if d.mode == "decompose":
            parts = await traced("decomposer", decompose(llm, d.question, files))
            tokens += tokens_of(parts.calls)
            questions = parts.value.parts if parts.value is not None else split_objective(d.question)
        for q in questions:
            got = await traced("proposer", propose(llm, d.model_copy(update={"question": q}), findings,
                                                   prof.workspace, inherited=inherited))
            tokens += tokens_of(got.calls)
            if got.value is None:
                errors += [f"proposer ({q[:60]}): {e}" for e in got.errors[-2:]]
                continue
            context, retrieved = "", []
            if d.mode == "search":
                context, retrieved = await search_context(memory, q, web=OfflineWebSearch() if not cfg.web_search
                                                          else _web_search())
            items.append({"parents": [parent], "mode": d.mode, "question": q, "depends_on": d.depends_on,
                                 "work_mode": d.work_mode, "goal": got.value.model_dump(mode="json"), "context": context,
                                 "retrieved": retrieved})
    return items, tokens, errors


def _web_search() -> Any:
    raise ValueError("web_search is on but no web search backend is configured on this machine (it is offline); "
                     "turn web_search off")


# --------------------------------------------------------------------------------------------- one node


def find_node(nodes: list[Node], parents: list[int], goal: str) -> Node | None:
    """The node an earlier (killed) attempt proposed for this item, if any."""
    return next((n for n in nodes if n.parents == parents and n.goal == goal), None)


def _move_generated(workdir: Path, result: ExecutionResult) -> None:
    """A script writes its outputs in its working folder; the node keeps them under generated/ so children
    inherit them as sources."""
    for rel in result.generated_files:
        src, dst = workdir / rel, workdir / GENERATED / rel
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
            if src.parent != workdir and not any(src.parent.iterdir()):
                src.parent.rmdir()


def _keep_round_log(run_dir: Path, node_id: int, k: int, staging: Path) -> None:
    """The run's record of a review round (its analysis log: every script and its output), kept beside the node's
    summary whatever the verdict. A rejected round's files never enter the workspace; its log says why it failed."""
    log = staging / LOG_FILE
    if log.is_file():
        dst = run_dir / NODES_DIR / f"{node_id}.round{k}.{LOG_FILE}"
        dst.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(dst, log.read_text(encoding="utf-8"))


def node_run_path(run_dir: Path, node_id: int) -> Path:
    return run_dir / NODES_DIR / f"{node_id}.json"


def read_node_run(run_dir: Path, node_id: int) -> NodeRun | None:
    path = node_run_path(run_dir, node_id)
    return read_model(path, NodeRun) if path.is_file() else None


async def claim_node(store: WorkspaceStore, item: dict[str, Any]) -> Node:
    """The item's node: the one an earlier (killed) attempt proposed, else a new proposed node. Called for a
    round's items in plan order before any runs, so node ids follow the plan whatever finishes first."""
    goal = GoalPackage.model_validate(item["goal"])
    nodes = await asyncio.to_thread(store.graph.nodes)
    node = find_node(nodes, item["parents"], goal.goal)
    if node is None:
        node = await asyncio.to_thread(store.propose, item["parents"], mode=item["mode"], goal=goal.goal,
                                       depends_on=item["depends_on"], work_mode=item.get("work_mode"))
    return node


async def run_node(llm: Any, store: WorkspaceStore, sandbox: Any, cfg: EvolveConfig, run_dir: Path,
                   item: dict[str, Any], node: Node) -> NodeRun:
    """Run the review loop for a claimed node in a fresh work folder, then commit the accepted round as the node's
    snapshot with the validator's verdict — or discard it (unsupported / failed). A node that already has its
    verdict is not run again."""
    goal = GoalPackage.model_validate(item["goal"])
    if node.status in FINAL_STATUSES:
        done = read_node_run(run_dir, node.id)
        if done is not None:
            return done
    if node.status == "proposed":
        await asyncio.to_thread(store.graph.set_status, node.id, "running")
    base = {"node": node.id, "mode": item["mode"], "parents": item["parents"], "question": item["question"],
            "goal": goal, "retrieved": item.get("retrieved", [])}
    workdir = run_dir / WORK_DIR / f"node{node.id}"
    await asyncio.to_thread(release, workdir)
    await asyncio.to_thread(store.materialize, node.id, workdir, view="inputs")
    inputs = sorted((workdir / SOURCES).iterdir())
    executed = goal
    if item.get("context"):
        executed = goal.model_copy(update={"context_summary": (goal.context_summary + "\n\n" + item["context"]).strip()})

    async def run_round(k: int, staging: Path, feedback: str | None) -> Outcome[ExecutionResult]:
        ran = await traced("executor", execute(llm, executed, node=node.id, workdir=staging, inputs=inputs,
                                               sandbox=sandbox, max_script_attempts=cfg.script_attempts,
                                               timeout_s=cfg.timeout_s, feedback=feedback), node=node.id, round=k)
        await asyncio.to_thread(_keep_round_log, run_dir, node.id, k, staging)
        return ran

    async def check(result: ExecutionResult, staging: Path) -> Any:
        return await traced("validator", validate(llm, result, executed, workdir=staging, inputs=inputs,
                                                  sandbox=sandbox, timeout_s=cfg.timeout_s), node=node.id)

    try:
        reviewed = await review_loop(run_round, check, workdir, max_rounds=cfg.budget.review_rounds)
    except SandboxUnavailable:
        raise  # no node can run: stop the run with the sandbox's own message
    except SandboxError as exc:  # this node's session broke (a crash, a closed worker): the node failed, not the run
        reviewed = Outcome(None, errors=[f"sandbox: {exc}"])
    review, tokens = reviewed.value, tokens_of(reviewed.calls)
    error = None
    if review is not None and review.accepted and review.result is not None and review.verdict is not None:
        try:
            _move_generated(workdir, review.result)
            await asyncio.to_thread(store.commit, node.id, workdir)
            status = review.verdict.verdict
            await asyncio.to_thread(store.graph.set_status, node.id, status, conclusion=review.verdict.ground_truth)
        except (ArtifactError, OSError) as exc:  # e.g. the script left a link: the round cannot become a snapshot
            status, error = "failed", f"commit refused: {exc}"
            await asyncio.to_thread(store.graph.set_status, node.id, status)
    else:
        judged = review is not None and any(r.verdict is not None for r in review.rounds)
        status = "unsupported" if judged else "failed"
        error = "; ".join(reviewed.errors[-2:]) or None
        await asyncio.to_thread(store.graph.set_status, node.id, status)
    await asyncio.to_thread(release, workdir)
    run = NodeRun(**base, review=review, status=status, tokens=tokens, error=error)  # type: ignore[arg-type]
    path = node_run_path(run_dir, node.id)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, run.model_dump_json(indent=2) + "\n")
    return run


async def remember(memory: RunMemory, store: WorkspaceStore, runs: list[NodeRun]) -> None:
    """Every question asked (so the director never repeats one) and every verified finding (for search)."""
    for r in runs:
        node = await asyncio.to_thread(store.graph.get, r.node)
        await memory.aadd_question(f"q{r.node}", r.question, node=r.node, status=r.status, mode=r.mode)
        if node.verified and node.conclusion.strip():
            await memory.aadd_finding(node.finding(), depth=node.depth, mode=node.mode)


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n")
