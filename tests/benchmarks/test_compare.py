"""Benchmark summaries and the side-by-side table (training/bench_summary.py, benchmarks/compare.py), on
hand-made result files with hand-computed intervals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worldsmith.core.runs import RunDir
from worldsmith.core.schemas import AnswerSpec, Difficulty, Provenance, Task, Trajectory, WorkspaceRef
from worldsmith.training.bench_summary import (
    combine,
    compare_table,
    load_summary,
    stopped_report,
    summary_from_run_dir,
    wilson_interval,
)
from worldsmith.training.evaluate import evaluate

from tests.benchmarks import script


def _compare():
    return script("compare")


def test_wilson_interval_by_hand() -> None:
    # 6/24, z = 1.96: centre (0.25 + 3.8415/48) / (1 + 3.8415/24) = 0.2845,
    # half 1.96 * sqrt(0.25*0.75/24 + 3.8415/2304) / 1.16006 = 0.1645  ->  [0.1200, 0.4490]
    lo, hi = wilson_interval(6, 24)
    assert lo == pytest.approx(0.1200, abs=5e-4) and hi == pytest.approx(0.4490, abs=5e-4)
    # 0/10: the interval is [0, z²/(n+z²)] = [0, 3.8415/13.8415] = [0, 0.2775]
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=5e-4)
    with pytest.raises(ValueError, match="n >= 1"):
        wilson_interval(0, 0)


def _summary(path: Path, benchmark: str, k: float, n: int, times: list[float], guards: dict | None = None) -> Path:
    qs = [{"task_id": f"q{i}", "level": "medium", "correct": 1.0 if i < k else 0.0, "time_s": t}
          for i, t in enumerate(times)]
    path.write_text(json.dumps({"benchmark": benchmark, "samples": 1, "n_questions": n, "n_correct": k,
                                "accuracy": k / n, "guards": guards or {}, "questions": qs}))
    return path


def test_compare_table_pools_runs_and_reports_the_gap(tmp_path: Path) -> None:
    dev1 = _summary(tmp_path / "dev1.json", "dabench-dev", 6, 10, [10, 20, 30, 40, 50, 60, 70, 80, 90, 100],
                    {"example_copy": 2})
    dev2 = _summary(tmp_path / "dev2.json", "dabench-dev", 4, 10, [5] * 10, {"example_copy": 1, "no_evidence": 1})
    gen = _summary(tmp_path / "gen.json", "generated-v1", 5, 20, [30] * 20)
    table = _compare().main([str(dev1), str(gen), str(dev2), "--md", str(tmp_path / "table.md")])
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]]
            for line in table.splitlines() if line.startswith("| ") and "---" not in line}
    # dev pooled: 10/20 = 50.0%, Wilson [0.2993, 0.7007]; runs 40% and 60%; median of 20 times = (5 + 10) / 2
    assert rows["dabench-dev"] == ["dabench-dev", "2", "1", "10", "50.0%", "29.9%–70.1%", "40.0%–60.0%", "7.5",
                                   "example_copy 3, no_evidence 1"]
    # generated: 5/20 = 25.0%, Wilson: centre (0.25 + 3.8415/40) / 1.19207 = 0.2903,
    # half 1.96 * sqrt(0.009375 + 0.0024009) / 1.19207 = 0.1784  ->  [0.1119, 0.4687]
    assert rows["generated-v1"] == ["generated-v1", "1", "1", "20", "25.0%", "11.2%–46.9%", "—", "30.0", "0"]
    assert "Gap dabench-dev − generated-v1: +25.0 points" in table
    assert (tmp_path / "table.md").read_text() == table + "\n"


def test_runs_of_different_benchmarks_are_not_pooled(tmp_path: Path) -> None:
    a = load_summary(_summary(tmp_path / "a.json", "dabench-dev", 1, 2, [1, 1]))
    b = load_summary(_summary(tmp_path / "b.json", "generated-v1", 1, 2, [1, 1]))
    with pytest.raises(ValueError, match="different benchmarks"):
        combine([a, b])
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="not a benchmark summary"):
        load_summary(tmp_path / "bad.json")


def test_a_run_directory_is_summarised_with_its_guards(tmp_path: Path) -> None:
    """An eval run directory (results.json + trajectories): guards counted by kind whatever their shape; a
    trajectory without the field counts nothing."""
    run = tmp_path / "run"

    def sample(passed: bool, t: float) -> dict:
        return {"sample_index": 0, "status": "ok", "passed": passed, "score": float(passed), "time_s": t}

    results = {"samples": 1, "tasks": [{"task_id": "a", "level": "easy", "samples": [sample(True, 12.0)]},
                                       {"task_id": "b", "level": "hard", "samples": [sample(False, 30.0)]},
                                       {"task_id": "c", "level": "hard", "samples": [sample(True, 18.0)]}],
               "overall": {"n_tasks": 3, "accuracy_by_question": 2 / 3, "accuracy_by_sub_question": 0.7,
                           "proportional_accuracy": 0.7, "n_empty": 0, "n_errors": 0}}
    (run / "trajectories" / "a").mkdir(parents=True)
    (run / "trajectories" / "b").mkdir()
    (run / "trajectories" / "c").mkdir()
    (run / "results.json").write_text(json.dumps(results))
    (run / "events.jsonl").write_text(json.dumps({"event": "eval_request", "tasks": "/x/dabench-dev"}) + "\n")
    (run / "trajectories" / "a" / "0.json").write_text(json.dumps({"guards": [{"kind": "names"}, {"kind": "names"}]}))
    (run / "trajectories" / "b" / "0.json").write_text(json.dumps({"guards": ["no_evidence"]}))
    (run / "trajectories" / "c" / "0.json").write_text(json.dumps({"steps": []}))
    s = summary_from_run_dir(run)
    assert s["benchmark"] == "dabench-dev" and s["n_questions"] == 3 and s["n_correct"] == 2
    assert s["guards"] == {"names": 2, "no_evidence": 1}
    assert s["median_s"] == 18.0
    assert s["by_level"] == {"easy": {"n": 1, "correct": 1.0}, "hard": {"n": 2, "correct": 1.0}}
    assert load_summary(run)["n_correct"] == 2


def test_several_samples_are_also_scored_by_self_consistency(tmp_path: Path) -> None:
    """With 3 samples a question is answered by its largest cluster of agreeing answers (3% relative): by hand,
    q1 answers 5, 5.05, 7 → 5 (samples 0, 1 passed) → right; q2 answers 1, 2, 2 → 2 (only sample 0, the 1,
    passed) → wrong; q3 answered nothing → its first sample, which failed → wrong. Pass@1: (2 + 1 + 0) / 9."""
    run = tmp_path / "run"
    answers = {"q1": ["@x[5]", "@x[5.05]", "@x[7]"], "q2": ["@x[1]", "@x[2]", "@x[2]"], "q3": [None, None, None]}
    passed = {"q1": [True, True, False], "q2": [True, False, False], "q3": [False, False, False]}
    _sampled_run(run, answers, passed)
    s = summary_from_run_dir(run, benchmark="b")
    assert [q["voted"] for q in s["questions"]] == [True, False, False]
    assert s["n_voted_correct"] == 1 and s["voted_accuracy"] == pytest.approx(1 / 3)
    assert s["n_correct"] == pytest.approx(1.0)  # pass@1: 2/3 + 1/3 + 0
    assert s["question_s"] == 60.0 and s["median_s"] == 20.0  # 10 + 20 + 30 per question; per sample 20
    assert combine([s])["median_s"] == 60.0  # the compare table's s/question is what a question cost, all samples
    assert "accuracy is pass@1" in compare_table([[s]])  # the table says what its accuracy column then is


def _task(task_id: str, measure_files: list[str], other: dict[str, list[str]] | None = None) -> str:
    spec = {"measure": {"variable": "m", "files": measure_files}, "x": None, "other_columns": other or {}}
    return json.dumps({"id": task_id, "answers": [{"name": "a", "spec": spec}]})


def test_compare_splits_a_task_set_by_the_files_its_answers_need(tmp_path: Path) -> None:
    """g0, g1 need one file (a filter column in the measure's own file counts once); g2 and g3 need two. Run 1
    gets g0 and g2 right, run 2 only g0: one file 2/4 = 50%, several files 1/4 = 25%; dev 6/10 = 60%."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join([_task("g0", ["data/a.csv"]), _task("g1", ["data/a.csv"], {"g": ["data/a.csv"]}),
                                _task("g2", ["data/a.csv"], {"g": ["data/b.json"]}),
                                _task("g3", ["data/y1.csv", "data/y2.csv"])]) + "\n")

    def gen(path: Path, right: set[str]) -> Path:
        qs = [{"task_id": f"g{i}", "correct": 1.0 if f"g{i}" in right else 0.0, "time_s": 10.0} for i in range(4)]
        path.write_text(json.dumps({"benchmark": "generated-v1", "samples": 1, "n_questions": 4,
                                    "n_correct": len(right), "guards": {"no_evidence": 1}, "questions": qs}))
        return path

    dev = _summary(tmp_path / "dev.json", "dabench-dev", 6, 10, [10] * 10)
    table = _compare().main([str(dev), str(gen(tmp_path / "g1.json", {"g0", "g2"})),
                             str(gen(tmp_path / "g2.json", {"g0"})), "--by-files", str(tasks)])
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]]
            for line in table.splitlines() if line.startswith("| ") and "---" not in line}
    assert rows["generated-v1"][4] == "37.5%"  # 3 of 8 question-runs
    assert rows["generated-v1 (one file)"][1:5] == ["2", "1", "2", "50.0%"]
    assert rows["generated-v1 (one file)"][6] == "50.0%–50.0%"  # each run: g0 right, g1 wrong
    assert rows["generated-v1 (one file)"][8] == "—"  # guards are not recorded per question
    assert rows["generated-v1 (several files)"][4] == "25.0%"
    assert "Gap dabench-dev − generated-v1 (one file): +10.0 points." in table
    assert "Gap dabench-dev − generated-v1 (several files): +35.0 points." in table
    assert not any(k.startswith("dabench-dev (") for k in rows)  # dev's questions (q0…q9) are not in the task set
    with pytest.raises(SystemExit):
        _compare().main([str(dev), "--by-files", str(tmp_path / "missing.jsonl")])
    # a run of one stratum only (generated_bench.py --files one) is not split again
    only = tmp_path / "only.json"
    only.write_text(json.dumps({"benchmark": "generated-v1 (one file)", "samples": 1, "n_questions": 2, "n_correct": 1,
                                "questions": [{"task_id": "g0", "correct": 1.0, "time_s": 1.0},
                                              {"task_id": "g1", "correct": 0.0, "time_s": 1.0}]}))
    table = _compare().main([str(dev), str(only), "--by-files", str(tasks)])
    assert "(one file) (one file)" not in table and "By the files" not in table
    assert "Gap dabench-dev − generated-v1 (one file): +10.0 points" in table


def test_a_vote_with_no_majority_keeps_the_first_answered_sample(tmp_path: Path) -> None:
    """`eval --samples 3` decodes sample 0 greedily (eval.greedy_first): with three different answers no cluster
    is larger, so the vote keeps sample 0's (r1: 1, 2, 3 → 1, which passed → right); a sample with no answer is
    no vote, so the first answered sample leads a tie (r2: none, 2, 3 → 2, which passed → right); two agreeing
    sampled answers outvote the greedy one (r3: 1, 2, 2 → 2, which failed → wrong)."""
    run = tmp_path / "run"
    answers = {"r1": ["@x[1]", "@x[2]", "@x[3]"], "r2": [None, "@x[2]", "@x[3]"], "r3": ["@x[1]", "@x[2]", "@x[2]"]}
    passed = {"r1": [True, False, False], "r2": [False, True, False], "r3": [True, False, False]}
    _sampled_run(run, answers, passed)
    s = summary_from_run_dir(run, benchmark="b")
    assert [q["voted"] for q in s["questions"]] == [True, True, False]


def _sampled_run(run: Path, answers: dict[str, list[str | None]], passed: dict[str, list[bool]]) -> None:
    """A finished 3-sample eval run directory: each question's samples with their final answers and grades; sample
    i took 10 × (i + 1) seconds."""
    tasks = []
    for q, ans in answers.items():
        (run / "trajectories" / q).mkdir(parents=True)
        for i, a in enumerate(ans):
            rec = {"id": f"{q}-{i}", "task_id": q, "model": "m", "status": "answered" if a else "max_turns",
                   "final_answer": a}
            (run / "trajectories" / q / f"{i}.json").write_text(json.dumps(rec))
        tasks.append({"task_id": q, "level": "medium", "samples": [
            {"sample_index": i, "passed": p, "time_s": 10.0 * (i + 1), "path": f"trajectories/{q}/{i}.json"}
            for i, p in enumerate(passed[q])]})
    (run / "results.json").write_text(json.dumps({"samples": 3, "tasks": tasks, "overall": {
        "n_tasks": 3, "accuracy_by_question": 1 / 3, "accuracy_by_sub_question": 1 / 3, "proportional_accuracy": 1 / 3}}))


class Killed(BaseException):
    """Stands for the eval process being killed mid-run."""


async def test_a_stopped_run_counts_only_the_questions_whose_samples_are_all_graded(tmp_path: Path) -> None:
    """A real eval run (3 samples, expected answer 1) killed while solving q2's second sample: only q0 and q1
    count. By hand: q0 answers 1, 2, 1 → passed T, F, T; the vote (1, samples 0 and 2) is right. q1 answers 2, 2,
    1 → F, F, T; the vote (2) is wrong. Pass@1 (2 + 1) / 3 over 2 questions = 1.0 right; first sample 1; any 2."""
    folder = tmp_path / "set"
    (folder / "data").mkdir(parents=True)
    tasks = [Task(id=f"q{i}", kind="closed_form", instruction=f"question {i}", category="stats",
                  difficulty=Difficulty(level="easy"), provenance=Provenance(source="manual"),
                  answers=[AnswerSpec(name="x", value="1")], workspace=WorkspaceRef(root="data")) for i in range(3)]
    (folder / "tasks.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    script = {"q0": ["@x[1]", "@x[2]", "@x[1]"], "q1": ["@x[2]", "@x[2]", "@x[1]"], "q2": ["@x[1]"]}

    async def solve(task: Task, sample: int) -> Trajectory:
        if sample >= len(script[task.id]):
            raise Killed()
        return Trajectory(id=f"{task.id}-{sample}", task_id=task.id, model="fake", status="answered",
                          final_answer=script[task.id][sample])

    run = RunDir.create("eval", tmp_path / "runs", name="eval")
    run.event("eval_request", tasks=str(folder), n_tasks=3, samples=3)
    with pytest.raises(Killed):
        await evaluate(tasks, solve, samples=3, run_dir=run)
    assert not (run.path / "results.json").exists()
    s = load_summary(run.path)
    assert s["partial"] == {"complete": 2, "in_run": 3}
    assert [q["task_id"] for q in s["questions"]] == ["q0", "q1"] and s["n_questions"] == 2
    assert s["n_correct"] == pytest.approx(1.0)
    assert [q["voted"] for q in s["questions"]] == [True, False] and s["n_voted_correct"] == 1
    assert s["n_first_correct"] == 1 and s["n_any_correct"] == 2
    table = _compare().main([str(run.path)])
    row = next(line for line in table.splitlines() if line.startswith("| set"))
    assert row.split("|")[4].strip() == "2 (run stopped)"
    # read against another copy of the task set (the folder moved): the same figures
    moved = tmp_path / "moved"
    folder.rename(moved)
    with pytest.raises(FileNotFoundError, match="--tasks"):
        load_summary(run.path)
    assert load_summary(run.path, tasks=moved)["n_correct"] == pytest.approx(1.0)


def test_a_directory_that_is_no_eval_run_is_refused(tmp_path: Path) -> None:
    (tmp_path / "run" / "trajectories").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no eval_request event"):
        stopped_report(tmp_path / "run")
    # an eval run killed before its first grade has measured nothing yet
    folder = tmp_path / "set"
    (folder / "data").mkdir(parents=True)
    task = Task(id="q0", kind="closed_form", instruction="q", provenance=Provenance(source="manual"),
                answers=[AnswerSpec(name="x", value="1")], workspace=WorkspaceRef(root="data"))
    (folder / "tasks.jsonl").write_text(task.model_dump_json() + "\n")
    (tmp_path / "run" / "events.jsonl").write_text(json.dumps({"event": "eval_request", "tasks": str(folder),
                                                                "n_tasks": 1, "samples": 2}) + "\n")
    with pytest.raises(ValueError, match="no question has all 2 sample"):
        stopped_report(tmp_path / "run")
