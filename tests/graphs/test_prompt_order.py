"""The analyst's opening prompt is ordered for the model's prefix cache: the system prompt and worked example are
byte-identical for every question, the file list comes next, and the question last. The trajectory records what
the model was sent, with the template versions that wrote it, and the per-turn generation budget."""

from __future__ import annotations

import os
from pathlib import Path

from tests.graphs.conftest import ANSWER_TURN, CODE_TURN
from worldsmith.agents.analyst import PRELUDE_TEMPLATE, USER_TEMPLATE, versions
from worldsmith.graphs.analyst import build_analyst_graph, initial_state

Q1 = "What is the mean amount? Answer as @mean_amount[value] rounded to one decimal place."
Q2 = "Compute the average of the amount column. Answer as @mean_amount[value]."


async def _first_request(script, rt, question: str, files: list[Path], session: str):
    # the code turn reads the given file, so the answer rests on the data and no answer guard re-asks
    script.queue(CODE_TURN.replace("sales.csv", files[0].name), ANSWER_TURN)
    n = len(script.requests)
    final = await build_analyst_graph().ainvoke(initial_state(question, [str(f) for f in files], session_id=session),
                                               {"recursion_limit": 100}, context=rt)
    await rt.sessions.close_all()
    return script.requests[n], final["trajectory"]


def _joined(messages: list[dict[str, str]]) -> str:
    return "".join(f"<{m['role']}>{m['content']}" for m in messages)


async def test_questions_on_the_same_file_share_everything_up_to_the_question(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    rt = make_rt()
    first, traj = await _first_request(script, rt, Q1, [sales_csv], "a")
    second, _ = await _first_request(script, rt, Q2, [sales_csv], "b")
    one, two = _joined(first.messages), _joined(second.messages)
    prefix = os.path.commonprefix([one, two])
    shared = len(prefix)
    # the shared prefix holds the system prompt, the worked example and the whole file list (load call included)
    assert first.messages[:-1] == second.messages[:-1]
    assert 'load: pd.read_csv("sales.csv")' in prefix and "- amount: int64; 10..30" in prefix
    assert prefix.endswith("# Task\n")  # and stops at the question
    assert one[shared:].startswith(Q1[:5]) and two[shared:].startswith(Q2[:5])
    # the trajectory records exactly these messages and which templates wrote them
    call = traj["calls"][0]
    assert [m["content"] for m in call["messages"]] == [m["content"] for m in first.messages]
    assert call["templates"][USER_TEMPLATE] == versions(USER_TEMPLATE)[USER_TEMPLATE]
    assert traj["metadata"]["prelude"] == versions(PRELUDE_TEMPLATE)
    assert call["sampling"]["max_tokens"] == 384  # analyst.max_tokens_per_turn


async def test_questions_on_different_files_share_the_system_prompt_and_example(scripted, sales_csv: Path,
                                                                                tmp_path: Path) -> None:
    script, make_rt = scripted
    rt = make_rt(analyst={"max_tokens_per_turn": 200})
    other = tmp_path / "other data.csv"
    other.write_text("region,amount\nwest,10\neast,30\n")
    first, _ = await _first_request(script, rt, Q1, [sales_csv], "a")
    second, traj = await _first_request(script, rt, Q1, [other], "b")
    assert first.messages[:-1] == second.messages[:-1]  # system prompt + worked example, byte for byte
    assert first.messages[-1]["content"] != second.messages[-1]["content"]
    assert 'load: pd.read_csv("other data.csv")' in second.messages[-1]["content"]
    assert traj["calls"][0]["sampling"]["max_tokens"] == 200


async def test_caller_hints_go_in_the_task_turn_not_the_system_prompt(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    rt = make_rt()
    plain, _ = await _first_request(script, rt, Q1, [sales_csv], "a")
    script.queue(CODE_TURN, ANSWER_TURN)
    n = len(script.requests)
    state = {**initial_state(Q1, [str(sales_csv)], session_id="b"), "hints": "Amounts are in euros."}
    await build_analyst_graph().ainvoke(state, {"recursion_limit": 100}, context=rt)
    await rt.sessions.close_all()
    hinted = script.requests[n]
    assert hinted.messages[:-1] == plain.messages[:-1]
    assert "# Method notes\nAmounts are in euros." in hinted.messages[-1]["content"]
