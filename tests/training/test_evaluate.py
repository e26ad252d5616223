"""The evaluation harness with a fake solver: hand-computed metrics, saved trajectories, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worldsmith.core.runs import RunDir
from worldsmith.core.schemas import (
    AnswerSpec,
    Criterion,
    Difficulty,
    Provenance,
    Rubric,
    Task,
    Trajectory,
    WorkspaceFile,
    WorkspaceRef,
)
from worldsmith.core.store import read_model
from worldsmith.training.evaluate import evaluate, render_report_md
from worldsmith.training.metrics import EvalReport, pass_at_k


def _task(id: str, names: list[str], category: str, level: str) -> Task:
    return Task(id=id, kind="closed_form", instruction=f"question {id}", category=category,
                difficulty=Difficulty(level=level), provenance=Provenance(source="manual"),
                answers=[AnswerSpec(name=n, value=str(i + 1)) for i, n in enumerate(names)])


TASKS = [
    _task("A", ["a1", "a2"], "stats", "easy"),
    _task("B", ["b1"], "stats", "medium"),
    _task("C", ["c1"], "corr", "hard"),
    _task("D", ["d1", "d2", "d3"], "corr", "easy"),
]
# What the fake agent answers, per task and sample. None = it never answered; "raise" = solve crashes.
SCRIPT: dict[str, list[str | None]] = {
    "A": ["@a1[1] @a2[2]", "@a1[1] @a2[9]", "@a1[1.0] @a2[2]"],   # right, half right, right
    "B": ["@b1[5]", "@b1[5]", "no tags at all"],                  # always wrong
    "C": ["raise", "raise", "raise"],                              # the solver crashes
    "D": ["@d1[1] @d2[2] @d3[3]", None, "@d1[1] @d2[2] @d3[0]"],  # right, unanswered, 2 of 3
}


class Killed(BaseException):
    """Stands for the process being killed mid-run (not an Exception: evaluate must not swallow it)."""


class FakeSolver:
    def __init__(self, kill_at: tuple[str, int] | None = None):
        self.calls: list[tuple[str, int]] = []
        self.kill_at = kill_at

    async def __call__(self, task: Task, sample: int) -> Trajectory:
        self.calls.append((task.id, sample))
        if (task.id, sample) == self.kill_at:
            raise Killed()
        answer = SCRIPT[task.id][sample]
        if answer == "raise":
            raise RuntimeError(f"solver crashed on {task.id}")
        status = "answered" if answer is not None else "max_turns"
        return Trajectory(id=f"{task.id}-{sample}", task_id=task.id, model="fake", final_answer=answer, status=status)


def _run(tmp_path: Path, name: str = "eval") -> RunDir:
    return RunDir.create("eval", tmp_path, name=name)


async def test_metrics_match_hand_computed_values(tmp_path: Path) -> None:
    run = _run(tmp_path)
    progress: list[tuple[int, int]] = []
    solver = FakeSolver()
    report = await evaluate(TASKS, solver, samples=3, run_dir=run, progress=lambda d, t: progress.append((d, t)))
    assert len(solver.calls) == 12
    o = report.overall
    # correct samples per task: A 2/3, B 0/3, C 0/3 (errors), D 1/3
    assert o.pass_at_1 == pytest.approx((2 / 3 + 0 + 0 + 1 / 3) / 4)           # 0.25
    assert o.pass_at_k[3] == pytest.approx(2 / 4)                              # A and D have a correct sample
    assert o.pass_at_k[2] == pytest.approx((1 + (1 - 1 / 3)) / 4)              # A: 1, D: 1 - C(2,2)/C(3,2)
    # DABench metrics per sample, averaged. By question: s0 A,D; s1 none; s2 A
    assert o.accuracy_by_question == pytest.approx((2 / 4 + 0 + 1 / 4) / 3)
    # by sub-question over 7 sub-answers: s0 2+0+0+3, s1 1+0+0+0, s2 2+0+0+2
    assert o.accuracy_by_sub_question == pytest.approx((5 / 7 + 1 / 7 + 4 / 7) / 3)
    # proportional: s0 (1+0+0+1)/4, s1 (0.5)/4, s2 (1+2/3)/4
    assert o.proportional_accuracy == pytest.approx(25 / 72)
    assert o.n_errors == 3 and o.n_tasks == 4
    # official denominators leave out empty responses: C's 3 crashes and D's unanswered s1 (4 empty samples).
    # s0 over A,B,D: by q 2/3, by sub 5/6, prop 2/3; s1 over A,B: 0, 1/3, 1/4; s2 over A,B,D: 1/3, 4/6, 5/9
    assert o.n_empty == 4
    assert o.official_accuracy_by_question == pytest.approx((2 / 3 + 0 + 1 / 3) / 3)
    assert o.official_accuracy_by_sub_question == pytest.approx((5 / 6 + 1 / 3 + 4 / 6) / 3)
    assert o.official_proportional_accuracy == pytest.approx((2 / 3 + 1 / 4 + 5 / 9) / 3)
    md = (run.path / "report.md").read_text()
    assert "## DABench accuracies under both denominators" in md
    assert f"| all | 4 | 4 | {100 / 3:.1f}% / 25.0% |" in md
    # breakdowns
    assert report.by_category["stats"].pass_at_1 == pytest.approx(1 / 3)
    assert report.by_category["corr"].pass_at_1 == pytest.approx(1 / 6)
    assert list(report.by_level) == ["easy", "medium", "hard"]
    assert report.by_level["easy"].pass_at_1 == pytest.approx(0.5)
    assert report.by_level["hard"].n_errors == 3 and report.by_level["medium"].pass_at_1 == 0.0
    # progress hook
    assert progress[-1] == (12, 12) and [d for d, _ in progress] == list(range(1, 13))


async def test_trajectories_and_reports_are_saved(tmp_path: Path) -> None:
    run = _run(tmp_path)
    report = await evaluate(TASKS, FakeSolver(), samples=3, run_dir=run)
    for t in TASKS:
        for s in range(3):
            traj = read_model(run.path / "trajectories" / t.id / f"{s}.json", Trajectory)
            assert traj.task_id == t.id and traj.sample_index == s and traj.grades[-1].grader == "closed_form"
    err = read_model(run.path / "trajectories" / "C" / "1.json", Trajectory)
    assert err.status == "error" and err.error == "RuntimeError: solver crashed on C" and not err.grades[-1].passed
    ok = read_model(run.path / "trajectories" / "A" / "0.json", Trajectory)
    assert ok.grades[-1].passed and ok.grades[-1].score == 1.0
    saved = EvalReport.model_validate_json((run.path / "results.json").read_text())
    assert saved.overall == report.overall
    md = (run.path / "report.md").read_text()
    assert md == render_report_md(report).rstrip() + "\n"
    assert "| all | 4 | 25.0% | 50.0% |" in md and "## By category" in md and "## By difficulty level" in md
    assert "`C` sample 0: RuntimeError: solver crashed on C" in md
    events = [e["event"] for e in run.events()]
    assert events.count("eval_sample") == 12 and "eval_finished" in events


async def test_resume_skips_finished_pairs(tmp_path: Path) -> None:
    run = _run(tmp_path)
    first = await evaluate(TASKS, FakeSolver(), samples=3, run_dir=run)
    again = FakeSolver()
    second = await evaluate(TASKS, again, samples=3, run_dir=RunDir.open(run.path))
    assert again.calls == []                                  # nothing re-solved, errors included
    assert second.overall == first.overall and second.n_resumed == 12 and second.n_solved_now == 0
    retry = FakeSolver()
    await evaluate(TASKS, retry, samples=3, run_dir=RunDir.open(run.path), retry_errors=True)
    assert sorted(retry.calls) == [("C", 0), ("C", 1), ("C", 2)]
    (run.path / "trajectories" / "A" / "1.json").unlink()     # a lost output is solved again
    lost = FakeSolver()
    await evaluate(TASKS, lost, samples=3, run_dir=RunDir.open(run.path))
    assert lost.calls == [("A", 1)]


async def test_a_killed_eval_resumes_without_re_solving_finished_pairs(tmp_path: Path) -> None:
    run = _run(tmp_path)
    with pytest.raises(Killed):
        await evaluate(TASKS, FakeSolver(kill_at=("D", 1)), samples=3, run_dir=run, concurrency=2)
    finished = {(p.parent.name, int(p.stem)) for p in (run.path / "trajectories").glob("*/*.json")}
    assert 0 < len(finished) < 12 and ("D", 1) not in finished
    resumed = FakeSolver()
    report = await evaluate(TASKS, resumed, samples=3, run_dir=RunDir.open(run.path), concurrency=2)
    assert set(resumed.calls) == {(t.id, s) for t in TASKS for s in range(3)} - finished
    assert len(resumed.calls) == 12 - len(finished)
    assert report.overall.pass_at_1 == pytest.approx(0.25)


async def test_concurrency_gives_the_same_metrics(tmp_path: Path) -> None:
    serial = await evaluate(TASKS, FakeSolver(), samples=3, run_dir=_run(tmp_path, "a"))
    parallel = await evaluate(TASKS, FakeSolver(), samples=3, run_dir=_run(tmp_path, "b"), concurrency=4)
    assert parallel.overall == serial.overall


async def test_a_changed_task_is_not_taken_as_finished(tmp_path: Path) -> None:
    run = _run(tmp_path)
    await evaluate(TASKS[:1], FakeSolver(), samples=1, run_dir=run)
    changed = [TASKS[0].model_copy(update={"instruction": "a new question"})]
    solver = FakeSolver()
    await evaluate(changed, solver, samples=1, run_dir=RunDir.open(run.path))
    assert solver.calls == [("A", 0)]


async def test_wrong_trajectory_and_report_tasks(tmp_path: Path) -> None:
    report_task = Task(id="R", kind="report", instruction="Summarise revenue.", provenance=Provenance(source="manual"),
                       rubric=Rubric(criteria=[Criterion(id="total", section="computation", observable="total revenue",
                                                         satisfy="states total revenue", expected_value=500.0)]))

    async def solve(task: Task, sample: int) -> Trajectory:
        if task.id == "A":
            return Trajectory(id="x", task_id="other", model="fake", final_answer="@a1[1] @a2[2]", status="answered")
        return Trajectory(id="r", task_id="R", model="fake", final_answer="Total revenue was 500.", status="answered")

    report = await evaluate([TASKS[0], report_task], solve, samples=1, run_dir=_run(tmp_path))
    a, r = report.tasks
    assert a.samples[0].status == "error" and "expected 'A'" in (a.samples[0].error or "")
    assert r.samples[0].passed and r.samples[0].score == 1.0 and r.samples[0].sub_total == 1
    assert report.overall.accuracy_by_sub_question == pytest.approx(1 / 3)  # A's 2 sub-answers wrong, R's 1 right


async def test_the_grader_sees_the_post_processed_answer_and_the_model_answer_is_kept(tmp_path: Path) -> None:
    task = _task("P", ["p1"], "stats", "easy")  # expects @p1[1]

    async def solve(task: Task, sample: int) -> Trajectory:
        rounded = sample == 0  # sample 0: the agent rounded 1.04 to the requested decimals; sample 1: it did not
        return Trajectory(id=f"P-{sample}", task_id="P", model="fake", final_answer="@p1[1.04]", status="answered",
                          graded_answer="@p1[1]" if rounded else None)

    report = await evaluate([task], solve, samples=2, run_dir=_run(tmp_path))
    assert [s.passed for s in report.tasks[0].samples] == [True, False]


async def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="samples must be >= 1"):
        await evaluate(TASKS, FakeSolver(), samples=0, run_dir=_run(tmp_path))
    with pytest.raises(ValueError, match="duplicate task ids in the eval set: A"):
        await evaluate([TASKS[0], TASKS[0]], FakeSolver(), run_dir=_run(tmp_path, "dup"))


@pytest.mark.parametrize(("n", "c", "k", "expected"), [
    (3, 0, 1, 0.0), (3, 3, 1, 1.0), (3, 1, 1, 1 / 3), (3, 1, 3, 1.0), (3, 1, 2, 2 / 3), (10, 2, 5, 1 - 56 / 252),
])
def test_pass_at_k(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(3, 1, 4)


def test_report_json_round_trip_keeps_int_keys(tmp_path: Path) -> None:
    from worldsmith.training.metrics import Metrics

    m = Metrics(n_tasks=1, samples=2, pass_at_1=0.5, pass_at_k={1: 0.5, 2: 1.0}, accuracy_by_question=0.5,
                accuracy_by_sub_question=0.5, proportional_accuracy=0.5, mean_score=0.5, n_errors=0)
    back = Metrics.model_validate(json.loads(m.model_dump_json()))
    assert back.pass_at_k == {1: 0.5, 2: 1.0}


class FatalSolver:
    """Every solve fails as against an endpoint that rejects the key."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, task: Task, sample: int) -> Trajectory:
        from worldsmith.llm.errors import LLMAuthError

        self.calls.append((task.id, sample))
        raise LLMAuthError("role 'agent': http://127.0.0.1:9/v1 rejected the API key (HTTP 401)")


async def test_a_fatal_llm_error_stops_the_batch_at_once_and_resume_solves_everything(tmp_path: Path) -> None:
    from worldsmith.llm.errors import LLMFatalError

    tasks = [_task(f"T{i}", ["x"], "stats", "easy") for i in range(10)]
    run = _run(tmp_path)
    solver = FatalSolver()
    with pytest.raises(LLMFatalError, match="HTTP 401"):
        await evaluate(tasks, solver, run_dir=run, concurrency=2)
    assert len(solver.calls) <= 2  # the two in flight, not one per task
    stopped = [e for e in run.events() if e["event"] == "eval_stopped"]
    assert len(stopped) == 1 and stopped[0]["kind"] == "auth" and stopped[0]["total"] == 10
    assert not (run.path / "trajectories").exists()
    resumed = FakeSolver()
    SCRIPT.update({t.id: ["@x[1]"] for t in tasks})
    try:
        report = await evaluate(tasks, resumed, run_dir=RunDir.open(run.path))
    finally:
        for t in tasks:
            SCRIPT.pop(t.id)
    assert len(resumed.calls) == 10 and report.overall.pass_at_1 == 1.0


async def test_llm_faults_during_the_run_are_an_event_and_a_report_section(tmp_path: Path) -> None:
    from worldsmith.llm.accounting import RoleUsage

    # what LLM.usage() would say before and after the run: only the difference belongs to this run
    snapshots = iter([
        {"agent": RoleUsage(faults={"server": 2}, empty_completions=1)},
        {"agent": RoleUsage(faults={"server": 5, "invalid_body": 1}, failures={"server": 1}, empty_completions=1),
         "judge": RoleUsage(faults={"rate_limit": 2})},
    ])
    run = _run(tmp_path)
    report = await evaluate(TASKS, FakeSolver(), run_dir=run, usage=lambda: next(snapshots))
    expected = {"agent": {"retried": {"invalid_body": 1, "server": 3}, "failed": {"server": 1}},
                "judge": {"retried": {"rate_limit": 2}}}
    assert report.llm_faults == expected
    assert [e["roles"] for e in run.events() if e["event"] == "llm_faults"] == [expected]
    md = (run.path / "report.md").read_text()
    assert "| agent | invalid_body 1, server 3 | server 1 | 0 |" in md and "| judge | rate_limit 2 | 0 | 0 |" in md
    assert "- status: partial" in md  # task C's solver crashes


def test_batch_status() -> None:
    from worldsmith.core.runs import batch_status

    assert [batch_status(0, 4), batch_status(1, 4), batch_status(4, 4), batch_status(0, 0)] == \
        ["ok", "partial", "failed", "ok"]


async def test_questions_on_one_workspace_are_solved_one_after_another(tmp_path: Path) -> None:
    """Round-robin sets (generated-v1) interleave worlds; solving a world's questions together lets a prefix cache
    reuse their shared file list. The report keeps the set's order."""
    from worldsmith.core.schemas import WorkspaceFile, WorkspaceRef

    def on(task: Task, world: str) -> Task:
        files = [WorkspaceFile(path=f"data/{world}.csv", sha256=world * 8, size=1)]
        return task.model_copy(update={"workspace": WorkspaceRef(files=files, root=f"worlds/{world}")})

    tasks = [on(TASKS[0], "w1"), on(TASKS[1], "w2"), on(TASKS[2], "w1"), on(TASKS[3], "w2")]
    solver = FakeSolver()
    report = await evaluate(tasks, solver, samples=2, run_dir=_run(tmp_path))
    assert solver.calls == [("A", 0), ("A", 1), ("C", 0), ("C", 1), ("B", 0), ("B", 1), ("D", 0), ("D", 1)]
    assert [r.task_id for r in report.tasks] == ["A", "B", "C", "D"]


def _with_files(task: Task, root: str, sha: str) -> Task:
    ws = WorkspaceRef(files=[WorkspaceFile(path="data/t.csv", sha256=sha, size=10)], root=root)
    return task.model_copy(update={"workspace": ws})


async def test_a_moved_task_folder_resumes_but_changed_data_is_solved_again(tmp_path: Path) -> None:
    # task lists resolve workspace.root to an absolute path: the same frozen set read from another checkout
    # (another absolute root, same file hashes) must find its finished pairs
    run = _run(tmp_path)
    await evaluate([_with_files(TASKS[0], "/checkout-a/worlds/w1", "aa")], FakeSolver(), samples=2, run_dir=run)
    moved = FakeSolver()
    report = await evaluate([_with_files(TASKS[0], "/elsewhere/b/worlds/w1", "aa")], moved, samples=2,
                            run_dir=RunDir.open(run.path))
    assert moved.calls == [] and report.n_resumed == 2
    edited = FakeSolver()  # same place, other bytes in the file: not the task that was solved
    await evaluate([_with_files(TASKS[0], "/elsewhere/b/worlds/w1", "bb")], edited, samples=2,
                   run_dir=RunDir.open(run.path))
    assert edited.calls == [("A", 0), ("A", 1)]


async def test_a_workspace_without_files_still_keys_on_its_root(tmp_path: Path) -> None:
    run = _run(tmp_path)
    here = TASKS[1].model_copy(update={"workspace": WorkspaceRef(root="/data/one")})
    await evaluate([here], FakeSolver(), samples=1, run_dir=run)
    other = FakeSolver()
    await evaluate([here.model_copy(update={"workspace": WorkspaceRef(root="/data/two")})], other, samples=1,
                   run_dir=RunDir.open(run.path))
    assert other.calls == [("B", 0)]


async def test_a_run_recorded_with_the_old_key_still_resumes(tmp_path: Path) -> None:
    # runs before the root left the fingerprint keyed on the whole task, root included; a ledger written that
    # way (key computed here by hand, as the old code did) counts as done from the same place
    from worldsmith.core.store import sha256_json

    task = _with_files(TASKS[1], "/checkout-a/worlds/w1", "aa")
    run = _run(tmp_path)
    await evaluate([task], FakeSolver(), samples=1, run_dir=run)
    ledger = run.path / "steps.jsonl"
    rec = json.loads(ledger.read_text().splitlines()[0])
    old = sha256_json(task.model_dump(mode="json", exclude={"split", "difficulty", "metadata"}))[:12]
    rec["key"] = f"eval:B:0:{old}"
    ledger.write_text(json.dumps(rec) + "\n")
    again = FakeSolver()
    await evaluate([task], again, samples=1, run_dir=RunDir.open(run.path))
    assert again.calls == []
