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
