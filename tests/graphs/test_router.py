from __future__ import annotations

import json
from pathlib import Path

import pytest

from worldsmith.agents.router import heuristic_intent
from worldsmith.graphs.router import build_router_graph, make_plan


@pytest.mark.parametrize("request_text, action, extra", [
    ("make 30 hard tasks about churn from ./crm", "make_tasks", {"count": 30, "difficulty": "hard", "topic": "churn"}),
    ("what drives cancellations in bookings.csv?", "answer_question", {"files": ["bookings.csv"]}),
    ("train on last night's tasks", "train", {"since": "last night"}),
    ("evaluate the analyst on ./tasks", "evaluate", {"files": ["./tasks"]}),
    ("create a new world about energy usage", "make_world", {"domain": "energy_iot"}),
    ("what can you do? help", "help", {}),
    ("bananas", "unknown", {}),
])
def test_heuristic_intents(request_text: str, action: str, extra: dict) -> None:
    intent = heuristic_intent(request_text)
    assert intent.action == action
    for key, value in extra.items():
        assert getattr(intent, key) == value, key


def test_a_bare_name_of_an_attached_file_means_the_attachment(sales_csv: Path) -> None:
    intent = heuristic_intent("What is the mean amount in sales.csv?", [str(sales_csv)])
    assert intent.files == [str(sales_csv)]
    assert make_plan(intent, None)["runnable"]


def test_plans_say_precisely_what_is_missing(tmp_path: Path) -> None:
    no_file = make_plan(heuristic_intent("what is the mean of x in missing.csv?"), None)
    assert not no_file["runnable"]
    assert any("missing.csv does not exist" in m for m in no_file["missing"])
    train = make_plan(heuristic_intent("train on last night's tasks"), None)
    assert not train["runnable"] and "not available" in train["missing"][0]
    own_files = make_plan(heuristic_intent(f"make 30 hard tasks about churn from {tmp_path}"), None)
    assert own_files["runnable"] and own_files["command"].startswith(f"worldsmith evolve {tmp_path} ")
    assert "--tasks 30" in own_files["command"] and "workspace" not in " ".join(own_files["missing"])
    (tmp_path / "x.csv").write_text("a\n1\n")
    one_file = make_plan(heuristic_intent(f"make 3 tasks from {tmp_path / 'x.csv'}"), None)
    assert not one_file["runnable"] and "name the folder" in one_file["missing"][0]
    ok = make_plan(heuristic_intent("make 5 tasks about pricing"), None)
    assert ok["runnable"] and "--max-tasks 5" in ok["command"]
    assert "--topic pricing" in ok["command"]
    by_topic = make_plan(heuristic_intent("make 5 tasks about support tickets"), None)
    assert "best matches 'support tickets'" in by_topic["steps"][0]
    assert "--topic 'support tickets'" in by_topic["command"]


@pytest.mark.parametrize(("request_text", "count"), [
    ("make 7 tasks about churn", 7),
    ("make tasks about churn from /data/run7/crm", None),  # a digit inside a path is not a count
    ("make tasks about churn", None),  # the model's number is not in the request
])
async def test_the_models_count_is_kept_only_when_the_request_states_it(scripted, request_text: str, count) -> None:
    from worldsmith.agents.router import classify

    script, make_rt = scripted
    script.on(".*", json.dumps({"action": "make_tasks", "count": 7, "topic": "churn"}), role="router")
    intent = await classify(make_rt().llm, request_text)
    assert intent.action == "make_tasks" and intent.count == count


async def test_router_runs_a_runnable_plan_with_the_runtimes_actions(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    script.queue(json.dumps({"action": "answer_question", "question": "What is the mean amount?",
                             "files": [str(sales_csv)], "count": 7}), role="router")
    rt = make_rt()
    calls = []

    async def actions(intent, plan, got_rt):
        calls.append((intent.action, intent.question, intent.reading, intent.files, plan["runnable"], got_rt is rt))
        return {"status": "ok", "echo": intent.question}

    rt.actions = actions
    request = f"What is the mean amount in {sales_csv}?"
    out = await build_router_graph().ainvoke({"request": request}, context=rt)
    # the question is the request verbatim (issue 11); the model's reading of it travels beside it
    assert calls == [("answer_question", request, "What is the mean amount?", [str(sales_csv)], True, True)]
    assert out["result"] == {"status": "ok", "echo": request}
    assert out["intent"]["count"] is None  # "7" is not in the request: the model's number is not trusted
    assert set(out) == {"intent", "plan", "result"}  # the output schema: no input keys echoed back


async def test_router_plans_without_running_when_execute_is_false(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    rt = make_rt()  # no actions: a plan-only request must not need them
    out = await build_router_graph().ainvoke({"request": f"What is the mean amount in {sales_csv}?",
                                              "execute": False}, context=rt)
    assert out["plan"]["runnable"] and "result" not in out


async def test_router_without_actions_says_how_to_get_them(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    with pytest.raises(RuntimeError, match="no actions.*make_runtime"):
        await build_router_graph().ainvoke({"request": f"What is the mean amount in {sales_csv}?"}, context=make_rt())


async def test_router_falls_back_to_heuristics_when_the_model_fails(scripted) -> None:
    script, make_rt = scripted
    script.on(".*", "this is not json", role="router")
    rt = make_rt()
    out = await build_router_graph().ainvoke({"request": "train on last night's tasks", "files": []}, context=rt)
    assert out["intent"]["action"] == "train" and out["intent"]["source"] == "heuristic"
    assert not out["plan"]["runnable"] and "result" not in out
