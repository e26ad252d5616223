"""The chat services: a request through the router, and persistent analyst threads (shared by CLI and web UI)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.graphs.conftest import ANSWER_TURN, CODE_TURN
from worldsmith.app.actions import dispatch
from worldsmith.app.chat import AnalystChat, run_request


async def test_a_question_runs_the_analyst_and_leaves_a_run_directory(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    script.queue(json.dumps({"action": "answer_question", "question": "What is the mean amount?",
                             "files": [str(sales_csv)]}), role="router")
    script.queue(CODE_TURN, ANSWER_TURN, role="agent")
    rt = make_rt()
    rt.actions = dispatch
    events: list[dict] = []
    final = await run_request(rt, f"What is the mean amount in {sales_csv}?", [], on_event=events.append)
    assert final["intent"]["action"] == "answer_question" and final["plan"]["runnable"]
    result = final["result"]
    assert result["status"] == "answered" and "@mean_amount[20.0]" in result["answer"]
    run_dir = Path(result["run_dir"])
    for name in ("trajectory.json", "report.md", "events.jsonl", "config.json"):
        assert (run_dir / name).is_file(), name
    kinds = [e["type"] for e in events]
    assert kinds.index("intent") < kinds.index("plan") < kinds.index("code") < kinds.index("answer")


async def test_an_analyst_thread_continues_from_its_checkpoint(scripted, sales_csv: Path, tmp_path: Path) -> None:
    script, make_rt = scripted
    script.queue(CODE_TURN, ANSWER_TURN, ANSWER_TURN.replace("20.0", "21.0"), role="agent")
    db, ws = tmp_path / "chat" / "threads.sqlite", tmp_path / "ws"
    chat = AnalystChat(make_rt(), db)
    try:
        assert await chat.state("t1") == {}
        first = [e async for e in chat.ask("t1", "What is the mean amount?", [str(sales_csv)], ws)]
        assert [e["type"] for e in first if e["type"] in ("code", "answer")] == ["code", "answer"]
    finally:
        await chat.aclose()
    again = AnalystChat(make_rt(), db)  # a new process: the thread comes back from the checkpointer
    try:
        state = await again.state("t1")
        assert state["files"] == [str(sales_csv)]
        follow = [e async for e in again.ask("t1", "And now?", [], ws)]
        assert any(e["type"] == "answer" and "21.0" in json.dumps(e) for e in follow)
    finally:
        await again.aclose()


async def test_ask_hands_the_request_to_the_analyst_verbatim_with_the_intent_beside_it(scripted,
                                                                                     sales_csv: Path) -> None:
    script, make_rt = scripted
    request = "What is the total of the amount column? Answer as @total[value]."
    # the router model's reading drops the format sentence; the analyst must still get the user's words
    script.queue(json.dumps({"action": "answer_question", "question": "What is the total of the amount column?"}),
                 role="router")
    script.queue("<think>Sum it.</think><code>print(pd.read_csv('sales.csv')['amount'].sum())</code>",
                 "<think>Done.</think><answer>The total is 60. @total[60]</answer>", role="agent")
    rt = make_rt()
    rt.actions = dispatch
    final = await run_request(rt, request, [str(sales_csv)])
    assert final["intent"]["question"] == request
    assert final["intent"]["reading"] == "What is the total of the amount column?"
    first = next(r for r in script.requests if r.role == "agent").messages
    assert request in first[-1]["content"]  # the task turn holds the request verbatim, format sentence included
    assert first[-1]["content"].count("@") == 2 and "# Answer format" in first[-1]["content"]
    assert "Your final <answer> must contain: @total[value]" in first[-1]["content"]  # the required names: total
    result = final["result"]
    assert result["status"] == "answered" and result["answer"] == "The total is 60. @total[60]"
    traj = json.loads(Path(result["trajectory"]).read_text())
    assert traj["metadata"]["intent"]["reading"] == "What is the total of the amount column?"
    assert traj["metadata"]["intent"]["action"] == "answer_question"
