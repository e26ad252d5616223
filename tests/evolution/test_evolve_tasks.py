"""Backward task synthesis from a scripted evolution run: withheld artifacts, the replayed reference solution,
complete answer specs, dual-evidence rubrics with a refuted criterion dropped, rejection sampling."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.evolution.evolve_kit import Player, make_data, scripted_runtime
from worldsmith.app.evolve import run_evolution
from worldsmith.app.evolve_tasks import synthesize_tasks
from worldsmith.core.answer_spec import lint_answer_spec
from worldsmith.core.evolution_schemas import EvolveBudget, EvolveConfig
from worldsmith.core.taskpkg import TaskCollection

pytest.importorskip("chromadb")


@pytest.fixture
async def evolved(tmp_path: Path):
    player = Player([("expand", [("deepen", "What is the average sale amount?")]),
                     ("expand", [("search", "Does the memo explain the south region's sales?")]),
                     ("expand", [("deepen", "Which region drives the average up?")])])
    script, rt = scripted_runtime(tmp_path, player)
    cfg = EvolveConfig(budget=EvolveBudget(steps=3, max_depth=3))
    run, summary = await run_evolution(rt, make_data(tmp_path / "data"), config=cfg, out=tmp_path / "run")
    assert summary.verified == 3
    return script, rt, run.path


async def test_tasks_from_shallow_and_deep_nodes_withhold_every_intermediate_artifact(evolved) -> None:
    _script, rt, run_dir = evolved
    summary = await synthesize_tasks(rt, run_dir, n=3, samples=1)
    written = [o for o in summary.outcomes if o.status == "written"]
    assert [(o.node, o.depth, o.kind) for o in written] == [(2, 1, "closed_form"), (3, 2, "report"),
                                                            (4, 3, "closed_form")]
    coll = TaskCollection(run_dir / "tasks")
    for o in written:
        pkg = run_dir / "tasks" / "tasks" / o.task_id
        env = sorted(p.relative_to(pkg / "environment").as_posix() for p in (pkg / "environment").rglob("*")
                     if p.is_file())
        assert env == ["Dockerfile", "data/memo_q3.md", "data/sales.csv"]  # the root's files, nothing generated
        meta = tomllib.loads((pkg / "task.toml").read_text())["metadata"]
        assert meta["evolution_depth"] == o.depth and meta["evolution"]["finding"] == f"f{o.node}"
        assert meta["evolution_path"][0] == "1" and meta["evolution_path"][-1] == str(o.node)

    deep = coll.read(written[2].task_id)
    assert "first establish, from the data, this intermediate result" in deep.instruction  # deepen → prerequisite
    # search → retrieval; over the rows as recorded, to mention, not to apply (a memo's cleaning rule would change
    # the number the spec pins)
    assert "find what the workspace's documents" in deep.instruction and "and mention" in deep.instruction
    assert "find and use" not in deep.instruction
    assert "`data/memo_q3.md`" in deep.instruction
    report = coll.read(written[1].task_id)  # its path's scripts keep every row: the report says so
    # the dual-evidence solvers' work folders stay in the run directory, one per role, with their logs
    from worldsmith.app.evolve_tasks import EVIDENCE_DIR, SOLVER_ROLES

    for role in SOLVER_ROLES:
        solver = run_dir / EVIDENCE_DIR / written[1].task_id / role
        assert (solver / "execution_result.json").is_file() and any(solver.glob("analyze_*.py")), role
    assert "over the rows of the files as recorded" in report.instruction
    assert "150.0" not in deep.instruction and "30.0" not in deep.instruction  # no intermediate result leaks
    answer = deep.answers[0]
    assert (answer.name, answer.value) == ("mean", 30.0) and lint_answer_spec(answer.spec, ["data/sales.csv"]) == []
    # the reference solution replays node 2 → 3 → 4 from data/ alone, and the shipped verifier accepts it
    pkg = run_dir / "tasks" / "tasks" / deep.id
    work = run_dir / "oracle"
    work.mkdir()
    (work / "data").symlink_to(pkg / "environment" / "data")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}  # python3 with pandas
    solved = await asyncio.to_thread(subprocess.run, ["bash", str(pkg / "solution" / "solve.sh"), str(work)], capture_output=True, text=True,
                            timeout=120, env=env, check=False)
    assert solved.returncode == 0, solved.stderr
    assert solved.stdout.strip() == "@mean[30.0]"
    graded = await asyncio.to_thread(subprocess.run, ["bash", str(pkg / "tests" / "test.sh"), str(work / "answer.md"), str(work / "r.txt")],
                            capture_output=True, text=True, timeout=120, check=False)
    assert graded.returncode == 0 and (work / "r.txt").read_text().strip() == "1.000000"


async def test_report_rubric_comes_from_dual_evidence_and_drops_the_refuted_criterion(evolved) -> None:
    script, rt, run_dir = evolved
    summary = await synthesize_tasks(rt, run_dir, n=3, samples=1)
    report = next(o for o in summary.outcomes if o.kind == "report")
    assert report.rubric_dropped == ["c3"]  # 'a total of 999' was recomputed as 150 and refuted
    task = TaskCollection(run_dir / "tasks").read(report.task_id)
    assert [c.id for c in task.rubric.criteria] == ["c1", "c2", "c4"]
    assert [c.section for c in task.rubric.criteria] == ["computation", "insight", "method"]
    assert task.rubric.criteria[0].type == "filter" and task.rubric.criteria[0].expected_value == 30.0
    assert task.deliverable.format == "markdown" and task.deliverable.filename == "answer.md"
    solvers = [r for r in script.requests if "You are a data analyst" in r.messages[0]["content"]
               and "The folder `data/` holds the files" in r.last_user]
    assert {r.role for r in solvers} == {"agent", "teacher"}  # two independent solver runs
    # both roles are one greedy scripted endpoint here: the second run samples, or the two would be one run twice
    assert {(r.role, r.temperature) for r in solvers} == {("agent", 0.0), ("teacher", 0.7)}
    # the solvers print RESULT lines: they get the task without how the report is written, the solvers of the
    # rejection sampling (the analyst) the whole instruction
    assert all("Write a Markdown report" not in r.last_user and task.instruction.split("\n\n")[0] in r.last_user
               for r in solvers)
    assert "Write a Markdown report (`answer.md`)" in task.instruction
    # each card records the data files its solver's script read, from the script itself (no memo was read)
    [asked] = [r.text for r in script.requests if "Evidence cards:" in r.text and "Write the rubric" in r.text]
    assert asked.count('"files_read": ["sales.csv"]') == 2, asked
    rubric = json.loads((run_dir / "tasks" / "tasks" / task.id / "tests" / "rubric.json").read_text())
    assert [c["id"] for c in rubric["criteria"]] == ["c1", "c2", "c4"]


async def test_rejection_sampling_keeps_passing_teacher_trajectories_with_scores(evolved) -> None:
    _, rt, run_dir = evolved
    summary = await synthesize_tasks(rt, run_dir, n=3, samples=2)
    kept = [json.loads(line) for line in (run_dir / "tasks" / "trajectories.jsonl").read_text().splitlines()]
    assert summary.kept_trajectories == len(kept) == 6  # the scripted teacher passes every task
    assert all(t["grades"][0]["passed"] and t["metadata"]["score"] == 1.0 for t in kept)
    assert summary.pass_rate_by_depth == {1: 1.0, 2: 1.0, 3: 1.0}
    task = TaskCollection(run_dir / "tasks").read(summary.outcomes[0].task_id)
    assert task.difficulty.pass_rate == 1.0 and task.difficulty.n_attempts == 2


async def test_packages_load_with_harbors_models_and_lint_clean(evolved) -> None:
    root = Path(__file__).resolve().parents[2]
    harbor_python = root / ".venv-harbor" / "bin" / "python"  # made by scripts/setup.sh --dev
    if not harbor_python.is_file():
        pytest.skip(f"no Harbor venv at {harbor_python}: run scripts/setup.sh --dev (needs Python >= 3.12)")
    _, rt, run_dir = evolved
    summary = await synthesize_tasks(rt, run_dir, n=3, samples=0)
    packages = [run_dir / "tasks" / "tasks" / o.task_id for o in summary.outcomes if o.status == "written"]
    host_env = {k: v for k, v in os.environ.items() if not k.startswith("WORLDSMITH_")}
    r = await asyncio.to_thread(subprocess.run, [str(harbor_python), str(root / "tests" / "harbor" / "harbor_check.py"),
                                                 *map(str, packages)], capture_output=True, text=True, timeout=300,
                                env=host_env, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout)
    for pkg in packages:
        got = report[str(pkg.resolve())]
        assert got["errors"] == [] and got["valid"] and got["lint"] == [], (pkg.name, got)


async def test_a_finding_no_check_of_which_ran_becomes_no_task(evolved) -> None:
    from worldsmith.app.evolve import EvolveRequest, evolve_report, summarize
    from worldsmith.core.store import write_model
    from worldsmith.graphs.evolve_ops import node_run_path, read_node_run

    _, rt, run_dir = evolved
    run = read_node_run(run_dir, 2)
    assert run is not None and run.review is not None and run.review.verdict.checked
    verdict = run.review.verdict.model_copy(update={"checked": False})
    write_model(node_run_path(run_dir, 2), run.model_copy(update={"review": run.review.model_copy(
        update={"verdict": verdict})}))
    summary = await synthesize_tasks(rt, run_dir, n=3, samples=1)
    assert summary.unchecked == [2]
    assert [o.node for o in summary.outcomes] == [3, 4]  # node 2 stood on its reproduction alone
    request = EvolveRequest(data_dir=str(run_dir))
    s = summarize(run_dir, request, {"step": 3})
    assert s.verified == 3 and s.unchecked == ["f2"]
    assert "Standing on their reproduction alone (no alternative check of theirs ran; no task is built on them): f2." \
        in evolve_report(run_dir, request, s)


async def test_a_report_whose_validated_rubric_checks_no_number_is_dropped(tmp_path: Path) -> None:
    """Every criterion with an expected value dropped: what is left grades wording alone, so there is no task."""

    class NoNumbers(Player):
        def __call__(self, req):  # the validator finds the mean criterion ungrounded (c3 is refuted anyway)
            if "You check one rubric criterion" in req.messages[0]["content"] and "Criterion c1 " in req.last_user:
                return {"grounded": False, "observable": True, "well_formed": True, "reason": "r", "code": None,
                        "revision": None}
            return super().__call__(req)

    player = NoNumbers([("expand", [("deepen", "What is the average sale amount?")]),
                        ("expand", [("search", "Does the memo explain the south region's sales?")])])
    _, rt = scripted_runtime(tmp_path, player)
    run, _ = await run_evolution(rt, make_data(tmp_path / "data"), config=EvolveConfig(
        budget=EvolveBudget(steps=2, max_depth=3)), out=tmp_path / "run")
    summary = await synthesize_tasks(rt, run.path, n=2, samples=0)
    [report] = [o for o in summary.outcomes if o.deliverable != "answer_tags" and o.kind != "closed_form"]
    assert report.status == "dropped" and "checks no number (kept c2, c4)" in report.reason
    assert report.rubric_dropped == ["c1", "c3"]


async def test_rejected_teacher_trajectories_are_kept_apart_with_their_grades(tmp_path: Path) -> None:
    """A sample that fails grading is no training data, and is kept beside it so a pass rate can be read back."""
    from tests.evolution.evolve_kit import SOLVER_SCRIPT

    class WrongTeacher(Player):
        def analyst(self, req):
            if "RESULT mean" not in req.last_user:
                return f"<think>compute</think>\n<code>\n{SOLVER_SCRIPT}</code>"
            return "<think>done</think>\n<answer>The mean sale amount is 31.50 USD. @mean[31.50]</answer>"

    _, rt = scripted_runtime(tmp_path, WrongTeacher([("expand", [("deepen", "What is the average sale amount?")])]))
    run, _ = await run_evolution(rt, make_data(tmp_path / "data"), config=EvolveConfig(
        budget=EvolveBudget(steps=1, max_depth=3)), out=tmp_path / "run")
    (run.path / "tasks").mkdir(parents=True)
    (run.path / "tasks" / "rejected.jsonl").write_text('{"stale": true}\n')  # an earlier synthesis's
    summary = await synthesize_tasks(rt, run.path, n=1, samples=2)
    assert [(o.kind, o.passed, o.scores) for o in summary.outcomes] == [("closed_form", 0, [0.0, 0.0])]
    assert not (run.path / "tasks" / "trajectories.jsonl").exists()
    rejected = [json.loads(line) for line in (run.path / "tasks" / "rejected.jsonl").read_text().splitlines()]
    assert len(rejected) == 2 and all(not t["grades"][0]["passed"] for t in rejected)
    assert all(t["metadata"]["rejected"] == "rejection sampling" and "@mean[31.50]" in t["final_answer"]
               for t in rejected)


async def test_a_finding_that_restates_its_parents_numbers_makes_no_second_task(tmp_path: Path) -> None:
    """v13: a depth-3 node recomputed its parent's r and became a second task asking for that r in other words."""

    class Restating(Player):
        def __call__(self, req):
            if ("You are a data analyst" in req.messages[0]["content"] and "RESTATE" in req.last_user
                    and "The script ran" not in req.last_user):
                self.executed -= 1  # this node's script prints its parent's numbers again
            return super().__call__(req)

    player = Restating([("expand", [("deepen", "What is the average sale amount?")]),
                        ("expand", [("deepen", "RESTATE the average sale amount, checked again")])])
    _, rt = scripted_runtime(tmp_path, player)
    run, summary = await run_evolution(rt, make_data(tmp_path / "data"), config=EvolveConfig(
        budget=EvolveBudget(steps=2, max_depth=3)), out=tmp_path / "run")
    assert summary.verified == 2
    made = await synthesize_tasks(rt, run.path, n=3, samples=0)
    assert made.restated == {3: [2]}
    assert [o.node for o in made.outcomes] == [2]
    assert json.loads((run.path / "tasks" / "synthesis.json").read_text())["restated"] == {"3": [2]}
    report = (run.path / "tasks" / "report.md").read_text()  # the readable summary beside it
    assert "1 of 1 targets written" in report and f"| 2 | 1 | deepen | closed_form | answer_tags | " \
        f"`{made.outcomes[0].task_id}` | not sampled |" in report
    assert "- node 3: every number its finding states is one node 2 stated already" in report


async def test_a_result_name_that_is_no_word_is_asked_as_a_word_tag_and_the_oracle_prints_it(tmp_path: Path) -> None:
    """v15: the first RESULT of a monthly-means node was `mean_2023-01`; `@mean_2023-01[…]` is no answer tag, and
    the synthesis of the whole run crashed on it."""
    from tests.evolution.evolve_kit import SCRIPT, SPEC

    class Monthly(Player):
        def __call__(self, req):
            if "exact specification of one number" in req.messages[0]["content"]:
                return {**SPEC, "name": "mean_2023-01"}
            return super().__call__(req)

    script = SCRIPT.replace("print(f'RESULT mean = ", "print(f'RESULT mean_2023-01 = ")
    _, rt = scripted_runtime(tmp_path, Monthly([("expand", [("deepen", "What is the average sale amount?")])],
                                               script=script))
    run, _ = await run_evolution(rt, make_data(tmp_path / "data"), config=EvolveConfig(
        budget=EvolveBudget(steps=1, max_depth=3)), out=tmp_path / "run")
    summary = await synthesize_tasks(rt, run.path, n=1, samples=0)
    [made] = summary.outcomes
    assert made.status == "written" and made.kind == "closed_form", made.reason
    task = TaskCollection(run.path / "tasks").read(made.task_id)
    assert task.deliverable.answer_names == ["mean_2023_01"] and task.answers[0].name == "mean_2023_01"
    assert "@mean_2023_01[" in task.instruction and "@mean_2023-01" not in task.instruction
    pkg = run.path / "tasks" / "tasks" / made.task_id
    work = tmp_path / "oracle"
    work.mkdir()
    (work / "data").symlink_to(pkg / "environment" / "data")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    solved = await asyncio.to_thread(subprocess.run, ["bash", str(pkg / "solution" / "solve.sh"), str(work)],
                                     capture_output=True, text=True, timeout=120, env=env, check=False)
    assert solved.returncode == 0 and solved.stdout.strip() == "@mean_2023_01[30.0]", solved.stderr


async def test_a_target_that_fails_unexpectedly_is_recorded_and_the_others_are_written(
        evolved, monkeypatch: pytest.MonkeyPatch) -> None:
    """One target's bug lost every task of v15's synthesis (the run died at its fourth target)."""
    from worldsmith.app import evolve_tasks

    _script, rt, run_dir = evolved
    real = evolve_tasks._closed_form

    async def broken(rt, node, *args, **kwargs):
        if node.id == 2:
            raise ValueError("a bug in one target")
        return await real(rt, node, *args, **kwargs)

    monkeypatch.setattr(evolve_tasks, "_closed_form", broken)
    summary = await synthesize_tasks(rt, run_dir, n=3, samples=0)
    assert [(o.node, o.status) for o in summary.outcomes] == [(2, "dropped"), (3, "written"), (4, "written")]
    assert summary.outcomes[0].reason == "synthesis failed: ValueError: a bug in one target"
    assert json.loads((run_dir / "tasks" / "synthesis.json").read_text())["outcomes"][0]["status"] == "dropped"
    # an endpoint that is not there fails every target alike: that one error reaches the caller
    from worldsmith.llm.errors import LLMUnavailableError

    async def unreachable(*args, **kwargs):
        raise LLMUnavailableError("no model endpoint at http://localhost:9")

    monkeypatch.setattr(evolve_tasks, "_closed_form", unreachable)
    with pytest.raises(LLMUnavailableError, match="no model endpoint"):
        await synthesize_tasks(rt, run_dir, n=3, samples=0)
