from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.graphs.conftest import ANSWER_TURN, CODE_TURN
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
    assert not own_files["runnable"] and "workspace evolution" in own_files["missing"][0]
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


async def test_router_runs_the_analyst_for_a_question(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    script.queue(json.dumps({"action": "answer_question", "question": "What is the mean amount?",
                             "files": [str(sales_csv)], "count": 7}), role="router")
    script.queue(CODE_TURN, ANSWER_TURN, role="agent")
    rt = make_rt()
    graph = build_router_graph(rt)
    events, final = [], {}
    async for mode, chunk in graph.astream({"request": f"What is the mean amount in {sales_csv}?", "files": []},
                                           stream_mode=["custom", "values"]):
        (events.append(chunk) if mode == "custom" else final.update(chunk))
    await rt.sessions.close_all()
    assert final["intent"]["action"] == "answer_question"
    assert final["intent"]["count"] is None  # "7" is not in the request: the model's number is not trusted
    assert final["plan"]["runnable"]
    result = final["result"]
    assert result["status"] == "answered" and "@mean_amount[20.0]" in result["answer"]
    run_dir = Path(result["run_dir"])
    for name in ("trajectory.json", "report.md", "events.jsonl", "config.json"):
        assert (run_dir / name).is_file(), name
    kinds = [e["type"] for e in events]
    assert kinds.index("intent") < kinds.index("plan") < kinds.index("code") < kinds.index("answer")


async def test_router_falls_back_to_heuristics_when_the_model_fails(scripted) -> None:
    script, make_rt = scripted
    script.on(".*", "this is not json", role="router")
    rt = make_rt()
    out = await build_router_graph(rt).ainvoke({"request": "train on last night's tasks", "files": []})
    assert out["intent"]["action"] == "train" and out["intent"]["source"] == "heuristic"
    assert not out["plan"]["runnable"] and "result" not in out
