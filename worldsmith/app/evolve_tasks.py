"""`worldsmith evolve tasks RUN`: backward task synthesis from an evolution run (issue 13, items 5 and 6).

For each target node (shallow and deep): trace its path to the root, turn the path into requirements, choose the
deliverable, and package a task whose environment holds only the root workspace's files.
- closed form: the path's scripts are replayed from the root files alone (the reference solution) and must
  reproduce the target's number; the task writer gives its complete answer spec, which must pass the lint.
- report: >= 2 independent solver runs from the root (different roles) → evidence cards → rubric generator →
  criterion validator (refuted / unverifiable criteria dropped, over-specified ones revised) → the grader's rubric.
Then rejection sampling: teacher trajectories (the analyst graph) on the packaged task are graded; those that pass
are kept for training with their scores, and the pass rate is recorded on the task.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from worldsmith.agents.criterion_validator import validate_criteria
from worldsmith.agents.executor import execute
from worldsmith.agents.rubric_generator import generate_rubric
from worldsmith.agents.task_writer import write_answer_spec
from worldsmith.evolution.spec_check import AS_RECORDED, recorded_population, script_method, spec_value
from worldsmith.agents.validator import SAME_NUMBER
from worldsmith.core.answer_spec import render_answer_spec, with_example
from worldsmith.core.evolution_schemas import EvidenceCard, ExecutionResult, GoalPackage
from worldsmith.core.schemas import (
    AnswerSpec,
    DeliverableSpec,
    Difficulty,
    Provenance,
    Task,
    Tolerance,
    Trajectory,
)
from worldsmith.core.store import ArtifactError, append_jsonl, atomic_write_text, read_model
from worldsmith.core.taskpkg import TaskCollection, workspace_ref
from worldsmith.core.workspace_types import Node, script_name
from worldsmith.evolution import synthesis as syn
from worldsmith.evolution.workspace import WorkspaceStore
from worldsmith.graphs.evolve_ops import open_store, read_node_run
from worldsmith.graphs.runtime import GraphRuntime
from worldsmith.llm.errors import LLMConfigError, LLMUnavailableError
from worldsmith.tools.files import profile_workspace
from worldsmith.tools.sandbox import open_sandbox

log = logging.getLogger(__name__)

TASKS_DIR = "tasks"
ROOT_EXPORT = "tasks_root"
REPORT_FILE = "report.md"  # RUN/tasks/report.md: the readable synthesis summary
#: the dual-evidence solvers' work folders (script, analysis log, result), per task and role, in the run directory
EVIDENCE_DIR = "evidence"
SOLVER_ROLES = ("agent", "teacher")  # the dual-evidence runs: two independent solvers
#: a later solver on the same greedy endpoint as an earlier one samples at this temperature
SOLVER_TEMPERATURE = 0.7


class TaskOutcome(BaseModel):
    node: int
    depth: int
    mode: str
    task_id: str | None = None
    kind: Literal["closed_form", "report"] | None = None
    deliverable: str | None = None
    status: Literal["written", "dropped"]
    reason: str = ""
    rubric_dropped: list[str] = Field(default_factory=list, description="criteria the criterion validator dropped")
    samples: int = 0
    passed: int = 0
    scores: list[float] = Field(default_factory=list)


class SynthesisSummary(BaseModel):
    run: str
    tasks_dir: str
    outcomes: list[TaskOutcome]
    pass_rate_by_depth: dict[int, float] = Field(default_factory=dict)
    kept_trajectories: int = 0
    unchecked: list[int] = Field(default_factory=list, description="verified nodes no task was built on: no "
                                                                   "alternative check of theirs ran")
    restated: dict[int, list[int]] = Field(default_factory=dict, description=(
        "verified nodes no task was built on because every number their finding states is one the listed earlier "
        "findings stated already"))


def _task_id(run_dir: Path, node: Node, kind: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", run_dir.name)[-40:].strip("-.") or "run"
    return f"evo-{stem}-n{node.id}-{kind.replace('_', '-')}"


def _level(depth: int) -> Literal["easy", "medium", "hard"]:
    return "easy" if depth <= 1 else "medium" if depth == 2 else "hard"


async def replay_path(rt: GraphRuntime, root_dir: Path, scripts: list[tuple[str, str]], name: str) -> tuple[float | None, str]:
    """Run the path's scripts from the root's files alone (the reference solution, unscaled); the value it prints."""
    code = syn.solution_code(scripts, name)
    with tempfile.TemporaryDirectory(prefix="replay-") as tmp:
        async with open_sandbox(rt.settings.sandbox, workspace=Path(tmp), inputs=[root_dir / syn.DATA]) as sb:
            run = await sb.run(code)
    found = re.search(rf"@{re.escape(syn.answer_tag(name))}\[([^\]]+)\]", run.stdout)
    if not run.ok or found is None:
        return None, run.to_observation(600)
    return float(found.group(1)), ""


async def evidence_cards(rt: GraphRuntime, goal: str, root_dir: Path, task_id: str,
                         scope: str | None = None) -> tuple[list[EvidenceCard], list[str]]:
    """Independent solver runs from the root workspace, one per role, each as an evidence card. When the roles
    resolve to one greedy endpoint (the embedded default for both), the later runs sample at SOLVER_TEMPERATURE:
    two greedy runs of one model are one run twice (both embedded solvers failed on the same SyntaxError).
    `scope`: the part of the task whose named files the solvers are shown and joined (`execute`'s scope)."""
    cards, errors = [], []
    endpoints = [rt.settings.llm.for_role(role) for role in SOLVER_ROLES]
    data_files = sorted({f.name for f in (root_dir / syn.DATA).rglob("*") if f.is_file()})
    for i, role in enumerate(SOLVER_ROLES):
        same = any(endpoints[i] == endpoints[j] for j in range(i)) and endpoints[i].temperature == 0
        work = root_dir.parent / EVIDENCE_DIR / task_id / role  # kept: why a solver failed is read from its log
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        out = await execute(rt.llm, GoalPackage(goal=goal), node=f"{task_id}-{role}", workdir=work,
                            inputs=[root_dir / syn.DATA], sandbox=rt.settings.sandbox, role=role,
                            temperature=SOLVER_TEMPERATURE if same else None, scope=scope)
        r = out.value
        script = (work / r.script).read_text(encoding="utf-8", errors="replace") \
            if r is not None and r.script and (work / r.script).is_file() else ""
        if r is None or r.status != "completed":
            errors.append(f"solver {role}: {r.error if r else 'no result'}")
            continue
        cards.append(EvidenceCard(solver=role, operations=[r.methodology or "one analysis script"] + r.observations[:4],
                                  computed_values=r.numbers, conclusions=[r.conclusion],
                                  files=[n for n in data_files if n in script], methods=syn.methods_in(script)))
    return cards, errors


#: the teacher trajectories rejection sampling did not keep, graded (beside trajectories.jsonl)
REJECTED_FILE = "rejected.jsonl"


async def rejection_sample(rt: GraphRuntime, coll: TaskCollection, task: Task, samples: int,
                           out: Path) -> tuple[int, list[float]]:
    """Teacher trajectories on the packaged task, graded; those that pass are appended to `out`
    (trajectories.jsonl, training data), the others with their grade to `rejected.jsonl` beside it (never
    trained on: kept so a pass rate can be read back to why each sample failed)."""
    from worldsmith.graphs.solve import TaskSolver
    from worldsmith.training.graders import agrade_response

    packaged = coll.read(task.id)
    solver = TaskSolver(rt, temperature=0.7, postprocess=False)
    passed, scores = 0, []
    for i in range(samples):
        traj: Trajectory = await solver(packaged, i)
        grade = await agrade_response(packaged, traj.final_answer or "", llm=rt.llm, workspace_files=traj.deliverables)
        scores.append(round(grade.score, 4))
        passed += grade.passed
        record = traj.model_copy(update={"grades": [grade], "metadata": {
            **traj.metadata, "kept" if grade.passed else "rejected": "rejection sampling", "score": grade.score}})
        append_jsonl(out if grade.passed else out.with_name(REJECTED_FILE), record.model_dump(mode="json"))
    return passed, scores


def answer_tolerance(decimals: int | None, exact: bool) -> Tolerance:
    """What a right answer rounded to `decimals` may differ by. Around the exact value (the spec recomputed from the
    files) that is half a unit in the last place, both roundings of a tie included; around a number the script
    printed already rounded, a whole unit (its rounding and the solver's add up)."""
    if decimals is None:
        return Tolerance(rel=0.01)
    return Tolerance(abs=(0.5 if exact else 1.0) * 10 ** -decimals + 1e-9)


async def _closed_form(rt: GraphRuntime, node: Node, goal: str, reqs: list[syn.Requirement], result: ExecutionResult,
                       scripts: list[tuple[str, str]], root_dir: Path, files: list[str],
                       link: str = "") -> tuple[dict[str, Any] | None, str]:
    name = next(iter(result.numbers))
    value, why = await replay_path(rt, root_dir, scripts, name)
    if value is None:
        return None, f"the path does not replay from the root files: {why}"
    if not SAME_NUMBER.numbers(result.numbers[name], value):
        return None, f"replaying the path from the root gives {name} = {value}, not the recorded {result.numbers[name]}"
    spec = await write_answer_spec(rt.llm, goal=goal, script=scripts[-1][1], name=name, value=value, files=files,
                                   root=root_dir)
    if spec.value is None:
        return None, "no answer spec passed the lint: " + "; ".join(dict.fromkeys(spec.errors[-3:]))
    f = spec.value.model_copy(update={"name": syn.answer_tag(name)})  # the tag the task asks for: a word
    exact, _ = await asyncio.to_thread(spec_value, f, root_dir)
    kept_all = syn.as_recorded([code for _, code in scripts])
    if exact is None and kept_all:
        # not recomputed here (a filter on a linked table's column), but the path kept every row as recorded: say
        # so, or a solver following a memo's "the first row counts" computes another number (v11's mean_business:
        # 3.0559 after dropping repeats against the expected 3.07)
        f = f.model_copy(update={"population": recorded_population(f.population)})
    if exact is None:
        f = script_method(f, scripts[-1][1])
    truth, tolerance = round((value if exact is None else exact) * f.factor, 9), answer_tolerance(f.decimals,
                                                                                                exact is not None)
    f = with_example(f, truth, tolerance.abs, tolerance.rel)  # a copied example must not pass
    answer = AnswerSpec(name=f.name, value=truth, tolerance=tolerance, unit=f.grading_unit,
                        description=f.aggregation, spec=f)
    recorded = kept_all or AS_RECORDED in f.population
    return {"kind": "closed_form", "instruction": syn.instruction(goal, reqs, "answer_tags", render_answer_spec(f),
                                                                  link=link, recorded=recorded),
            "deliverable": DeliverableSpec(format="answer_tags", answer_names=[f.name]), "answers": [answer],
            "solution": syn.solution_code(scripts, name, f.factor, f.decimals)}, ""


async def _report(rt: GraphRuntime, node: Node, goal: str, reqs: list[syn.Requirement], fmt: syn.Deliverable,
                  scripts: list[tuple[str, str]], root_dir: Path, task_id: str,
                  link: str = "", data: str = "") -> tuple[dict[str, Any] | None, str, list[str]]:
    how = {"recorded": syn.as_recorded([code for _, code in scripts]), "link": link, "data": data,
           "methods": syn.methods_in(scripts[-1][1]) if scripts else None}
    text = syn.instruction(goal, reqs, fmt, **how)
    # the files the question itself reads: a requirement's earlier question names others (v12: "In
    # orders_2023.csv, …" beside a question on orders_2024.csv stacked both years into the solvers' join)
    cards, errors = await evidence_cards(rt, syn.instruction(goal, reqs, fmt, format_line=False, **how), root_dir,
                                         task_id, scope=syn.instruction(goal, [], fmt, format_line=False, **how))
    if len(cards) < 2:
        return None, "dual evidence needs >= 2 successful solver runs: " + "; ".join(errors), []
    draft = await generate_rubric(rt.llm, text, node.conclusion, cards)
    if draft.value is None:
        return None, "no usable rubric draft: " + "; ".join(dict.fromkeys(draft.errors[-3:])), []
    checked = await validate_criteria(rt.llm, draft.value, task=text, ground_truth=node.conclusion, cards=cards,
                                      inputs=[root_dir / syn.DATA], sandbox=rt.settings.sandbox)
    validated = checked.value
    if validated is None or not validated.criteria:
        return None, "the criterion validator kept no criterion", validated.dropped if validated else []
    if all(c.expected_value is None for c in validated.criteria):
        # v13's amount–income report kept "Names the method it used" alone: any report naming Pearson passed
        return None, ("the validated rubric checks no number (kept " + ", ".join(c.id for c in validated.criteria)
                      + "): a report would be graded on its wording alone"), validated.dropped
    rubric = syn.to_rubric(validated, note="; ".join(validated.notes))
    return {"kind": "report", "instruction": text, "rubric": rubric,
            "deliverable": DeliverableSpec(format=fmt, filename=syn.REPORT_FILES[fmt]), "solution": None}, "", \
        validated.dropped


async def _target(rt: GraphRuntime, run_dir: Path, store: Any, coll: TaskCollection, node: Node, i: int,
                  result: ExecutionResult, profile: Any, ref: Any, root_dir: Path, files: list[str], samples: int,
                  kept_file: Path, on_event: Callable[[dict[str, Any]], None] | None) -> TaskOutcome:
    """The task of one target node (written, or dropped with the reason), rejection-sampled `samples` times."""
    path = await asyncio.to_thread(store.graph.path_to_root, node.id)
    runs = {p.id: r for p in path if (r := read_node_run(run_dir, p.id)) is not None}
    reqs = syn.requirements(path, runs)
    goal = runs[node.id].goal.goal if node.id in runs else node.goal
    scripts = [(script_name(p.id), store.read_bytes(p.id, script_name(p.id)).decode("utf-8"))
               for p in path if p.mode != "root"]
    fmt = syn.choose_deliverable(i, result.numbers)
    link = syn.link_line(profile, [code for _, code in scripts])
    base = TaskOutcome(node=node.id, depth=node.depth, mode=node.mode, status="dropped")
    dropped: list[str] = []
    made, why = None, ""
    if fmt == "answer_tags":
        made, why = await _closed_form(rt, node, goal, reqs, result, scripts, root_dir, files, link)
        if made is None:  # the number cannot be asked in closed form: ask for a report instead
            fmt = "markdown"
    if made is None:
        task_id = _task_id(run_dir, node, "report")
        # a link line names the joined files already
        data = "" if link or not scripts else syn.data_line(profile, goal, scripts[-1][1])
        made, why2, dropped = await _report(rt, node, goal, reqs, fmt, scripts, root_dir, task_id, link, data)
        why = "; ".join(w for w in (why, why2) if w)
    if made is None:
        _note(on_event, {"type": "task", "node": node.id, "status": "dropped", "reason": why})
        return base.model_copy(update={"reason": why, "rubric_dropped": dropped})
    task = Task(id=_task_id(run_dir, node, made["kind"]), kind=made["kind"], instruction=made["instruction"],
                workspace=ref, deliverable=made["deliverable"], answers=made.get("answers", []),
                rubric=made.get("rubric"), category=node.mode, tags=["evolution", f"depth{node.depth}"],
                provenance=Provenance(source="evolution", evolution_path=[str(p.id) for p in path],
                                      produced_by=["evolution",
                                                   "engine:replay" if made["solution"] else "dual-evidence"]),
                difficulty=Difficulty(level=_level(node.depth), evolution_depth=node.depth),
                metadata={"evolution": {"run": run_dir.name, "node": node.id, "finding": f"f{node.id}",
                                        "verdict": node.status, "evidence": node.conclusion, "depth": node.depth,
                                        "modes": [p.mode for p in path],
                                        "requirements": [f"{r.kind}: {r.text or 'the question'}" for r in reqs]}})
    await asyncio.to_thread(coll.add, task, files_root=root_dir, solution_code=made["solution"],
                            group=ref.content_hash, overwrite=True)
    passed, scores = (await rejection_sample(rt, coll, task, samples, kept_file)
                      if samples else (0, []))
    if samples:
        task = task.model_copy(update={"difficulty": task.difficulty.model_copy(update={
            "pass_rate": passed / samples, "n_attempts": samples})})
        await asyncio.to_thread(coll.add, task, files_root=root_dir, solution_code=made["solution"],
                                group=ref.content_hash, overwrite=True)
    _note(on_event, {"type": "task", "node": node.id, "status": "written", "task": task.id, "passed": passed})
    return base.model_copy(update={"task_id": task.id, "kind": task.kind, "deliverable": fmt, "status": "written",
                                   "reason": why, "rubric_dropped": dropped, "samples": samples, "passed": passed,
                                   "scores": scores})


async def synthesize_tasks(rt: GraphRuntime, run: str | Path, *, n: int = 6, samples: int = 2,
                           on_event: Callable[[dict[str, Any]], None] | None = None) -> SynthesisSummary:
    """Package up to ``n`` tasks from the run's verified nodes into ``RUN/tasks`` (Harbor layout + index.jsonl)."""
    run_dir = Path(run)
    store = open_store(run_dir)
    nodes = await asyncio.to_thread(store.graph.nodes)
    if not nodes:
        raise FileNotFoundError(f"{run_dir}: the run has no exploration graph yet; run `worldsmith evolve` first")
    root = nodes[0]
    tasks_dir, root_dir = run_dir / TASKS_DIR, run_dir / ROOT_EXPORT
    files = await asyncio.to_thread(syn.export_root, store, root.id, root_dir)
    ref = await asyncio.to_thread(workspace_ref, root_dir, files)
    profile = await asyncio.to_thread(profile_workspace, [root_dir / syn.DATA])  # how the root's tables link
    coll = TaskCollection(tasks_dir)
    kept_file = tasks_dir / "trajectories.jsonl"
    kept_file.unlink(missing_ok=True)  # a re-synthesis re-samples every task: no stale or doubled trajectories
    kept_file.with_name(REJECTED_FILE).unlink(missing_ok=True)
    outcomes: list[TaskOutcome] = []
    # a finding that stands on its reproduction alone never becomes a task, nor training data
    unchecked = [x.id for x in nodes
                 if x.verified and (r := read_node_run(run_dir, x.id)) is not None and r.unchecked]
    results = {x.id: r for x in nodes if x.mode != "root" and x.verified
               and (r := read_result(store, x.id)) is not None}
    # a finding that only restates numbers of earlier ones would be a second task asking the same thing
    repeats = syn.restated(nodes, {i: r.numbers for i, r in results.items()})
    for i, node in enumerate(syn.pick_targets([x for x in nodes if x.id in results and x.id not in unchecked
                                               and x.id not in repeats], n)):
        base = TaskOutcome(node=node.id, depth=node.depth, mode=node.mode, status="dropped")
        try:
            outcome = await _target(rt, run_dir, store, coll, node, i, results[node.id], profile, ref, root_dir,
                                    files, samples, kept_file, on_event)
        except (LLMUnavailableError, LLMConfigError):
            raise  # no endpoint, or a wrong configuration: every target would fail alike; the CLI says why once
        except Exception as exc:  # noqa: BLE001 - one target's bug must not lose the others: recorded, not hidden
            why = f"synthesis failed: {type(exc).__name__}: {exc}"
            log.exception("task from node %s: %s", node.id, why)
            outcome = base.model_copy(update={"reason": why})
            _note(on_event, {"type": "task", "node": node.id, "status": "dropped", "reason": why})
        outcomes.append(outcome)
    summary = SynthesisSummary(run=str(run_dir), tasks_dir=str(tasks_dir), outcomes=outcomes,
                               pass_rate_by_depth=pass_rate_by_depth(outcomes),
                               kept_trajectories=sum(o.passed for o in outcomes), unchecked=unchecked,
                               restated=repeats)
    atomic_write_text(tasks_dir / "synthesis.json", summary.model_dump_json(indent=2) + "\n")
    atomic_write_text(tasks_dir / REPORT_FILE, synthesis_report(summary))
    return summary


def synthesis_report(s: SynthesisSummary) -> str:
    """`RUN/tasks/report.md`: what synthesis wrote, what it dropped and why, and which findings it left alone."""
    written = [o for o in s.outcomes if o.status == "written"]
    rates = ", ".join(f"depth {d}: {r:.0%}" for d, r in s.pass_rate_by_depth.items()) or "not sampled"
    lines = [f"# Tasks from run {Path(s.run).name}", "",
             (f"{len(written)} of {len(s.outcomes)} targets written; {s.kept_trajectories} teacher "
              f"{'trajectory' if s.kept_trajectories == 1 else 'trajectories'} "
              f"kept for training (`trajectories.jsonl`; the rejected ones in `{REJECTED_FILE}`); teacher pass "
              f"rate {rates}. Packages in `tasks/`, index in `index.jsonl`, this summary as `synthesis.json`."), ""]
    if written:
        lines += ["| node | depth | mode | kind | deliverable | task | teacher passed | scores |",
                  "|---|---|---|---|---|---|---|---|",
                  *[f"| {o.node} | {o.depth} | {o.mode} | {o.kind} | {o.deliverable} | `{o.task_id}` | "
                    f"{f'{o.passed}/{o.samples}' if o.samples else 'not sampled'} | "
                    f"{', '.join(f'{x:.2f}' for x in o.scores) or '—'} |" for o in written], ""]
        revised = [o for o in written if o.rubric_dropped]
        if revised:
            lines += ["Rubric criteria the criterion validator dropped: "
                      + "; ".join(f"node {o.node}: {', '.join(o.rubric_dropped)}" for o in revised) + ".", ""]
    dropped = [o for o in s.outcomes if o.status == "dropped"]
    if dropped:
        lines += ["## Dropped", "", *[f"- node {o.node} (depth {o.depth}, {o.mode}): {o.reason or 'no reason recorded'}"
                                      for o in dropped], ""]
    if s.restated or s.unchecked:
        lines += ["## Findings no task was built on", ""]
        lines += [f"- node {n}: every number its finding states is one node{'s' if len(e) > 1 else ''} "
                  f"{', '.join(map(str, e))} stated already" for n, e in s.restated.items()]
        lines += [f"- node {n}: no alternative check of it ran (it stands on its reproduction alone)"
                  for n in s.unchecked]
        lines.append("")
    return "\n".join(lines)


def read_result(store: WorkspaceStore, node: int) -> ExecutionResult | None:
    """A node's committed `execution_result.json`, or None when it has none the schema reads."""
    try:
        return ExecutionResult.model_validate_json(store.read_bytes(node, "execution_result.json"))
    except (ArtifactError, ValueError):  # no result committed, or not one the schema reads
        return None


def pass_rate_by_depth(outcomes: list[TaskOutcome]) -> dict[int, float]:
    tried: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for o in outcomes:
        if o.status == "written" and o.samples:
            tried[o.depth][0] += o.passed
            tried[o.depth][1] += o.samples
    return {d: round(p / s, 4) for d, (p, s) in sorted(tried.items())}


def _note(on_event: Callable[[dict[str, Any]], None] | None, event: dict[str, Any]) -> None:
    if on_event is not None:
        on_event(event)


def read_summary(run: str | Path) -> SynthesisSummary:
    return read_model(Path(run) / TASKS_DIR / "synthesis.json", SynthesisSummary)
