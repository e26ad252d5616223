"""benchmarks/student.py end to end at toy scale: tiny student, a fake-server teacher, 2 + 2 world tasks, 2 SFT steps,
eval on held-out world tasks and a tiny DABench-format share, one SFT+RL step; then a rerun that skips every stage."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

from benchmarks.student import Pipeline, PipelineConfig, parse_world
from tests.fakes.fake_openai import FakeOpenAI
from tests.fakes.tiny_dabench import write_tiny_dabench


def teacher_turn(body: dict[str, Any]) -> str:
    """A teacher that looks at the files once, then answers (wrongly: world answers are not known here)."""
    last = str(body["messages"][-1].get("content", ""))
    if last.startswith("<interpreter>"):
        return "<think>Done looking.</think><answer>@answer[0]</answer>"
    return "<think>List the files.</think><code>import os\nprint(sorted(os.listdir('.')))</code>"


@pytest.mark.slow
def test_pipeline_runs_every_stage_on_a_world_disjoint_split_and_resumes(tmp_path: Path) -> None:
    bench = write_tiny_dabench(tmp_path / "bench", n=3)
    with FakeOpenAI() as fake:
        fake.responder = teacher_turn
        teacher = fake.endpoint().model_dump(exclude_none=True)
        cfg = PipelineConfig(out=tmp_path / "run", student="tiny", teacher=teacher,
                             train_worlds=("customer_pricing:11",), heldout_worlds=("customer_pricing:101",),
                             rows=500, tasks_per_world=2, dabench=bench, limit=2, max_turns=2, max_tokens=64,
                             sft_steps=2, sft_max_tokens=8192, sft_max_turn_tokens=0,  # 0: oracles' long cells too
                             rl_steps=1, rl_prompts=1, rl_generations=2, rl_turns=1, rl_tokens=16,
                             rl_expert_max_tokens=100_000)  # the byte-level tiny tokenizer: an oracle is ~10k tokens
        logs: list[str] = []
        summary = Pipeline(cfg, log=logs.append).run()
        teacher_requests = fake.request_count

    # DABench first, each set through every model before the next: a run stopped part way has whole pairs on it
    started = [line[1:].split("]")[0] for line in logs if line.startswith("[eval-") and line.endswith("…")]
    assert started == [f"eval-{m}-{s}" for s in ("dabench", "heldout") for m in ("base", "sft", "rl")]
    run = tmp_path / "run"
    stages = {p.stem for p in (run / "stages").glob("*.json")}
    assert stages == {"worlds", "teacher", "sft", "base", "export-sft", "rl", "export-rl",
                      *(f"eval-{m}-{s}" for m in ("base", "sft", "rl") for s in ("heldout", "dabench"))}
    # world-disjoint: same template, different seeds, no held-out world among the train tasks' groups
    train, held = summary["split"]["train"], summary["split"]["heldout"]
    assert len(train["tasks"]) == 2 and len(held["tasks"]) == 2
    assert train["worlds"] and held["worlds"] and not set(train["worlds"]) & set(held["worlds"])
    train_index = [json.loads(line) for line in (run / "tasks/train/index.jsonl").read_text().splitlines()]
    assert {e["group"] for e in train_index}.isdisjoint(held["worlds"])
    assert not set(train["tasks"]) & set(held["tasks"])

    assert teacher_requests >= 2  # the teacher really solved the train tasks through the eval harness
    assert summary["teacher"]["n_tasks"] == 2
    assert summary["sft"]["steps"] == 2 and summary["sft"]["data_train"] >= 2  # at least the two world oracles
    assert (run / "sft/checkpoint/config.json").is_file()
    assert summary["export"]["export-sft"]["skipped"]  # tiny has no base GGUF

    assert summary["rl"]["steps"] == 1 and (run / "rl/checkpoint/config.json").is_file()
    rl_request = json.loads((run / "rl/config.json").read_text())["request"]  # RL's own rollout budget, not eval's
    assert (rl_request["max_turns"], rl_request["max_new_tokens"], rl_request["num_generations"]) == (1, 16, 2)
    assert set(summary["eval"]) == {f"{m}-{s}" for m in ("base", "sft", "rl") for s in ("heldout", "dabench")}
    for key, e in summary["eval"].items():
        assert e["n_tasks"] == 2, key
        assert e["agent"]["provider"] == "hf"
        assert e["turns"] >= 2 and 0 <= e["void_rate"] <= 1 and 0 <= e["grammar_valid_rate"] <= 1
        assert e["grammar_valid_rate"] + e["void_rate"] <= 1
    assert summary["eval"]["sft-dabench"]["agent"]["model"].endswith("sft/checkpoint")
    assert summary["eval"]["rl-heldout"]["agent"]["model"].endswith("rl/checkpoint")
    assert set(summary["stage_seconds"]) == stages
    # each trained student against the base, question by question
    assert set(summary["paired"]) == {f"{m}-{s}" for m in ("sft", "rl") for s in ("heldout", "dabench")}
    for key, p in summary["paired"].items():
        label, _, set_name = key.partition("-")
        base_pass = round(summary["eval"][f"base-{set_name}"]["pass_at_1"] * 2)
        assert p["n"] == 2 and p["before"] == base_pass, key
        assert p["after"] == round(summary["eval"][key]["pass_at_1"] * 2), key
        assert p["after"] - p["before"] == len(p["gained"]) - len(p["lost"]) and 0 < p["p_value"] <= 1

    # held-out tasks whose question kind trained on the train world (the same template, another seed), by hand
    train_prefix, held_prefix = (w.replace("_", "-") + "-" for w in (train["worlds"][0], held["worlds"][0]))
    train_kinds = {e["id"].removeprefix(train_prefix) for e in train_index}
    kinds = summary["heldout_kinds"]
    assert kinds["seen"] == sorted(t for t in held["tasks"] if t.removeprefix(held_prefix) in train_kinds)
    assert kinds["seen"] and sorted(kinds["seen"] + kinds["unseen"]) == sorted(held["tasks"])
    assert set(kinds["passes"]) == {"base", "sft", "rl"}
    for label, p in kinds["passes"].items():
        assert p["seen"] + p["unseen"] == round(summary["eval"][f"{label}-heldout"]["pass_at_1"] * 2), label

    report = (run / "report.md").read_text()
    for needle in ("pass@1", "grammar-valid turns", "void turns", "customer_pricing", "| sft | dabench | 2 |",
                   "exact McNemar test", "| rl | heldout | ", "Held-out tasks whose question kind trained",
                   "SFT+RL from the SFT checkpoint: 1 step(s) of 1 prompts × 2 rollouts (≤ 1 turns × 16 tokens)"):
        assert needle in report
    assert json.loads((run / "summary.json").read_text())["eval"] == summary["eval"]

    # resumable: a rerun finds every marker and redoes nothing (no teacher server is even running now)
    logs.clear()
    again = Pipeline(cfg, log=logs.append).run()
    assert all("skipped" in line for line in logs) and len(logs) == len(stages)
    assert again["eval"] == summary["eval"]

    # a larger --limit extends each eval: the third DABench question is solved, the first two are not solved again
    first_two = {p: p.read_bytes() for p in (run / "eval/sft-dabench/trajectories").rglob("*.json")}
    wider = Pipeline(replace(cfg, limit=3), log=lambda _: None).run()
    assert {k: e["n_tasks"] for k, e in wider["eval"].items()} == {
        f"{m}-{s}": 3 if s == "dabench" else 2 for m in ("base", "sft", "rl") for s in ("heldout", "dabench")}
    assert all(p.read_bytes() == body for p, body in first_two.items())
    assert len(list((run / "eval/sft-dabench/trajectories").rglob("*.json"))) == 3
    assert wider["stage_seconds"]["eval-sft-dabench"] > summary["stage_seconds"]["eval-sft-dabench"]  # both legs
    # and a smaller one counts the turns of the selected questions only, not of every trajectory in the folder
    narrow = Pipeline(replace(cfg, limit=1), log=lambda _: None).run()
    first = json.loads((bench / "questions.jsonl").read_text().splitlines()[0])["id"]
    calls = len(json.loads((run / f"eval/sft-dabench/trajectories/dabench-{first}/0.json").read_text())["calls"])
    assert narrow["eval"]["sft-dabench"]["n_tasks"] == 1 and narrow["eval"]["sft-dabench"]["turns"] == calls


def test_a_stage_runs_again_under_another_scope_and_adds_its_seconds(tmp_path: Path) -> None:
    pipe = Pipeline(PipelineConfig(out=tmp_path / "run"), log=lambda _: None)
    runs: list[int] = []

    def fn() -> dict[str, Any]:
        runs.append(1)
        return {"n": len(runs)}

    assert pipe.stage("eval-x", fn, scope={"limit": 2})["result"] == {"n": 1}
    assert pipe.stage("eval-x", fn, scope={"limit": 2})["result"] == {"n": 1}  # same scope: skipped
    marker = tmp_path / "run/stages/eval-x.json"
    first = json.loads(marker.read_text())
    first["seconds"] = 100.0  # as if the first leg had taken 100 s
    marker.write_text(json.dumps(first))
    again = pipe.stage("eval-x", fn, scope={"limit": 3})
    assert again["result"] == {"n": 2} and again["scope"] == {"limit": 3} and 100.0 <= again["seconds"] < 160.0
    assert pipe.stage("eval-x", fn, scope={"limit": 3})["result"] == {"n": 2} and len(runs) == 2
    assert pipe.stage("plain", fn)["result"] == {"n": 3} and "scope" not in json.loads(
        (tmp_path / "run/stages/plain.json").read_text())


def test_a_run_whose_ggufs_are_f16_refuses_to_go_on_as_q8_0(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "stages").mkdir(parents=True)  # the base stage of a run begun before --export-type (f16, unrecorded)
    (run / "stages/base.json").write_text(json.dumps({"stage": "base", "seconds": 1.0,
                                                      "result": {"gguf": str(run / "export/base.gguf")}}))
    pipe = Pipeline(PipelineConfig(out=run, export_type="q8_0"), log=lambda _: None)
    with pytest.raises(SystemExit, match="are f16, not q8_0; give --export-type q8_0 its own --out"):
        pipe.run()
    assert sorted(p.name for p in (run / "stages").iterdir()) == ["base.json"]  # refused before any stage ran


def test_world_specs_are_template_and_seed() -> None:
    assert parse_world("finance:13") == ("finance", 13)
    with pytest.raises(ValueError, match="TEMPLATE:SEED"):
        parse_world("finance")


def test_a_world_listed_on_both_sides_is_refused(tmp_path: Path) -> None:
    cfg = PipelineConfig(out=tmp_path / "run", student="tiny", train_worlds=("finance:1",),
                         heldout_worlds=("finance:1",))
    with pytest.raises(ValueError, match="both for training and held out"):
        Pipeline(cfg, log=lambda s: None).worlds()


def test_a_killed_training_stage_resumes_and_one_that_cannot_starts_over(tmp_path: Path) -> None:
    pipe = Pipeline(PipelineConfig(out=tmp_path / "run"), log=lambda _: None)
    calls: list[tuple[str, str]] = []

    def start(out: Path) -> dict[str, Any]:
        calls.append(("start", sorted(p.name for p in out.iterdir()) if out.exists() else "absent"))
        return {"how": "start"}

    def resume(out: Path) -> dict[str, Any]:
        calls.append(("resume", out.name))
        if (out / "changed").exists():
            raise ValueError("the training data … differs")
        return {"how": "resume"}

    assert pipe.train_run("sft", start, resume) == {"how": "start"}  # no run yet
    (tmp_path / "run" / "sft").mkdir()
    (tmp_path / "run" / "sft" / "events.jsonl").write_text("{}\n")
    assert pipe.train_run("sft", start, resume) == {"how": "resume"}  # a killed run
    (tmp_path / "run" / "sft" / "changed").write_text("")
    assert pipe.train_run("sft", start, resume) == {"how": "start"}  # refused: a fresh, emptied folder
    assert calls == [("start", "absent"), ("resume", "sft"), ("resume", "sft"), ("start", "absent")]


def _trajectory_folder(folder: Path, task_ids: list[str]) -> Path:
    from worldsmith.core.schemas import Trajectory

    folder.mkdir(parents=True)
    for i, task_id in enumerate(task_ids):
        traj = Trajectory(id=f"x{i}", task_id=task_id, model="teacher", final_answer="@a[1]", status="answered")
        (folder / f"{i}.json").write_text(traj.model_dump_json(), encoding="utf-8")
    return folder


def test_extra_teacher_data_trains_unless_it_is_about_a_held_out_world(tmp_path: Path) -> None:
    stages = tmp_path / "run" / "stages"
    stages.mkdir(parents=True)
    split = {"train": {"worlds": ["finance-branches-s13"], "tasks": []},
             "heldout": {"worlds": ["customer_pricing_saas-s101"], "tasks": []}}  # as the worlds stage writes
    (stages / "worlds.json").write_text(json.dumps({"stage": "worlds", "seconds": 1, "result": split}))
    # a seed whose digits start with the held-out one is another world: s1010 is not s101
    other = _trajectory_folder(tmp_path / "other", ["customer-pricing-saas-s1010-cause-x", "edu-exams-s9-y"])
    pipe = Pipeline(PipelineConfig(out=tmp_path / "run", extra_data=(other,)), log=lambda _: None)
    pipe.check_extra_data()
    assert pipe.expert_data() == [tmp_path / "run" / "teacher", other, tmp_path / "run" / "tasks" / "train"]

    leak = _trajectory_folder(tmp_path / "leak", ["edu-exams-s9-y", "customer-pricing-saas-s101-cause-x"])
    pipe = Pipeline(PipelineConfig(out=tmp_path / "run", extra_data=(other, leak)), log=lambda _: None)
    with pytest.raises(ValueError, match="customer-pricing-saas-s101-cause-x"):
        pipe.check_extra_data()


def test_the_report_names_the_extra_teacher_data() -> None:
    from benchmarks.student import render_report

    summary = {"config": {"student": "qwen2.5-coder-0.5b", "extra_data": ["/runs/gen-v2-eval"]},
               "split": {"train": {"worlds": ["finance-branches-s13"], "tasks": ["t1"]},
                         "heldout": {"worlds": ["edu-exams-s104"], "tasks": ["h1"]}},
               "teacher": {"skipped": "no teacher"}, "teacher_sampled": [], "rl": None, "eval": {}, "stage_seconds": {},
               "sft": {"data_train": 46, "data_rejected": 103, "steps": 24, "final_loss": 0.5}}
    report = render_report(summary)
    assert "No teacher stage; SFT on 46 examples (103 rejected), 24 steps" in report
    assert "Extra SFT data (the teacher's runs on other worlds): /runs/gen-v2-eval." in report
    summary["config"]["extra_data"] = []
    assert "Extra SFT data" not in render_report(summary)
