from __future__ import annotations

from pathlib import Path

import pytest

from tests.graphs.conftest import ANSWER_TURN, CODE_TURN
from worldsmith.graphs.analyst import build_analyst_graph, initial_state

QUESTION = "What is the mean amount? Answer as @mean_amount[value] rounded to one decimal place."


def _task(folder: Path, question: str, name: str, value: float):
    """A closed-form task over the files of `folder`, answered as @name[value]."""
    from worldsmith.core.schemas import AnswerSpec, Provenance, Task, Tolerance
    from worldsmith.core.taskpkg import workspace_ref

    return Task(id="t", kind="closed_form", instruction=question, workspace=workspace_ref(folder),
                answers=[AnswerSpec(name=name, value=value, tolerance=Tolerance(abs=0.01))],
                provenance=Provenance(source="manual"))


async def _run(rt, question: str, files: list[Path], **kw):
    graph = build_analyst_graph()
    events = []
    final = {}
    async for mode, chunk in graph.astream(initial_state(question, [str(f) for f in files], session_id="s1", **kw),
                                           {"recursion_limit": 200}, context=rt, stream_mode=["custom", "values"]):
        (events.append(chunk) if mode == "custom" else final.update(chunk))
    await rt.sessions.close_all()
    return final, events


async def test_code_then_answer_records_a_full_trajectory(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    script.queue(CODE_TURN, ANSWER_TURN)
    final, events = await _run(make_rt(), QUESTION, [sales_csv], task_id="t1")
    traj = final["trajectory"]
    assert traj["status"] == "answered"
    assert [s["action"]["kind"] for s in traj["steps"]] == ["code", "answer"]
    assert "20.0" in traj["steps"][0]["observation"]  # really executed in the sandbox
    assert traj["final_answer"].strip().endswith("@mean_amount[20.0]")
    # stop sequence: the model is never allowed to write its own interpreter output
    assert all("<interpreter>" in r.stop for r in script.requests)
    # the second request shows the model the interpreter output as its own message
    second = script.requests[1].messages
    assert second[-1]["content"].startswith("<interpreter>") and "20.0" in second[-1]["content"]
    first = script.requests[0].messages
    assert "sales.csv" in first[-1]["content"] and "amount" in first[-1]["content"]  # the profile, not raw files
    assert "<think>" in first[2]["content"] and "<code>" in first[2]["content"]  # a worked example precedes the task
    assert traj["user_prompt"] == first[-1]["content"]
    kinds = [e["type"] for e in events]
    for k in ("thought", "code", "output", "answer"):
        assert k in kinds


async def test_void_turn_is_recorded_and_the_model_is_told_why(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    script.queue("I think the mean is probably 20.", CODE_TURN, ANSWER_TURN)
    final, _ = await _run(make_rt(), QUESTION, [sales_csv])
    steps = final["trajectory"]["steps"]
    assert steps[0]["void"] is True and steps[0]["action"] is None
    assert "I could not read your reply" in script.requests[1].last_user
    assert final["trajectory"]["status"] == "answered"


async def test_an_empty_completion_is_a_void_turn_that_says_so(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    script.queue("", CODE_TURN, ANSWER_TURN)
    final, _ = await _run(make_rt(), QUESTION, [sales_csv])
    steps = final["trajectory"]["steps"]
    assert steps[0]["void"] is True and steps[0]["void_reason"] == "empty completion"
    assert "empty completion" in script.requests[1].last_user and "<think>" not in steps[0]["void_reason"]
    assert final["trajectory"]["status"] == "answered"


async def test_answer_without_requested_tags_gets_format_feedback(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    script.queue(CODE_TURN, "<think>done</think><answer>The mean is 20.</answer>", ANSWER_TURN)
    final, events = await _run(make_rt(), QUESTION, [sales_csv])
    assert "@mean_amount[value] is missing" in script.requests[2].last_user
    assert any(e["type"] == "feedback" for e in events)
    assert "@mean_amount[20.0]" in final["trajectory"]["final_answer"]


async def test_rounding_beyond_requested_decimals_is_flagged(scripted, sales_csv: Path) -> None:
    """Sampling training data (no post-processing), the model is asked to round: its trajectory ends in its own
    rounded answer."""
    script, make_rt = scripted
    script.queue(CODE_TURN, "<think>x</think><answer>@mean_amount[20.1234]</answer>", ANSWER_TURN)
    await _run(make_rt(), QUESTION, [sales_csv], postprocess=False)
    assert "more than the 1 decimal places" in script.requests[2].last_user


async def test_only_the_rounding_off_is_rounded_on_record_without_a_re_ask(scripted, sales_csv: Path) -> None:
    """Evaluating (post-processing on), a number that is right but has more decimals than asked costs no turn: the
    1.5B model's reply to that re-ask was the same rounding in 23 of 23 cases. The model's answer stays on record."""
    script, make_rt = scripted
    unrounded = "<think>x</think><answer>The mean is 20.1234. @mean_amount[20.1234]</answer>"
    script.queue(UNROUNDED_CELL, unrounded, unrounded)
    final, _ = await _run(make_rt(), QUESTION, [sales_csv])
    traj = final["trajectory"]
    assert len(script.requests) == 2 and len(traj["calls"]) == 2  # the cell and the answer: no re-ask
    assert traj["final_answer"] == "The mean is 20.1234. @mean_amount[20.1234]"
    assert traj["graded_answer"] == "The mean is 20.1234. @mean_amount[20.1]"  # 20.1234 at the one decimal asked
    [step] = traj["postprocess"]
    assert step["kind"] == "round_decimals" and "without a re-ask" in step["reason"]
    assert traj["status"] == "answered"


async def test_max_turns_stops_and_nudges_on_the_last_turn(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    script.fallback(CODE_TURN)
    rt = make_rt(analyst={"max_turns": 3})
    final, _ = await _run(rt, QUESTION, [sales_csv])
    traj = final["trajectory"]
    assert traj["status"] == "max_turns" and len(traj["steps"]) == 3
    assert "last turn" in script.requests[-1].last_user


async def test_errors_come_back_with_a_fix_nudge(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    script.queue("<think>load</think><code>df = pd.read_csv('nope.csv')</code>", CODE_TURN, ANSWER_TURN)
    final, _ = await _run(make_rt(), QUESTION, [sales_csv])
    first = final["trajectory"]["steps"][0]
    assert first["execution"]["ok"] is False and first["execution"]["error_type"] == "FileNotFoundError"
    assert "fix the code" in first["observation"]


async def test_chat_thread_resumes_from_sqlite_checkpoint_after_restart(scripted, sales_csv: Path, tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    script, make_rt = scripted
    db = str(tmp_path / "threads.sqlite")
    cfg = {"configurable": {"thread_id": "thread-1"}, "recursion_limit": 200}
    script.queue("<think>load</think><code>df = pd.read_csv('sales.csv')\ntotal = df['amount'].sum()\nprint(total)</code>",
                 "<think>done</think><answer>The total is 60.</answer>")
    rt1 = make_rt()
    async with AsyncSqliteSaver.from_conn_string(db) as saver:
        g = build_analyst_graph(checkpointer=saver)
        out1 = await g.ainvoke(initial_state("What is the total?", [str(sales_csv)]), cfg, context=rt1)
    await rt1.sessions.close_all()  # the process "dies": the sandbox and its variables are gone
    assert out1["trajectory"]["final_answer"] == "The total is 60."
    # a new process resumes the thread; `total` only exists if the earlier cell is replayed
    script.queue("<think>reuse</think><code>print(total * 2)</code>", "<think>done</think><answer>Twice is 120.</answer>")
    rt2 = make_rt()
    async with AsyncSqliteSaver.from_conn_string(db) as saver:
        g = build_analyst_graph(checkpointer=saver)
        out2 = await g.ainvoke({"question": "And twice that?"}, cfg, context=rt2)
    await rt2.sessions.close_all()
    traj2 = out2["trajectory"]
    assert "120" in traj2["steps"][0]["observation"]
    assert len(traj2["steps"]) == 2  # only this question's steps
    assert len(out2["steps"]) == 4  # the thread keeps the whole history
    # the model saw the first exchange as context
    assert any("The total is 60." in m["content"] for m in script.requests[-2].messages)


def test_empty_question_is_rejected(scripted, sales_csv: Path) -> None:
    import asyncio

    _, make_rt = scripted
    with pytest.raises(ValueError, match="non-empty question"):
        asyncio.run(build_analyst_graph().ainvoke(initial_state("  ", [str(sales_csv)]), context=make_rt()))


async def test_category_hints_go_into_the_task_turn_not_the_shared_prefix(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    script.queue(CODE_TURN, ANSWER_TURN)
    await _run(make_rt(), QUESTION, [sales_csv], categories=["Summary Statistics"])
    script.queue(CODE_TURN, ANSWER_TURN)
    await _run(make_rt(), QUESTION, [sales_csv], categories=["Correlation Analysis"])
    first, second = script.requests[0].messages, script.requests[2].messages
    assert "ddof" in first[-1]["content"] and "spearman" in second[-1]["content"]
    assert first[:-1] == second[:-1]  # system prompt + worked example identical: the KV cache prefix is shared


async def test_a_task_without_a_known_category_gets_the_notes_its_question_asks_for(scripted, sales_csv: Path) -> None:
    """World tasks carry categories such as 'cause' that name no notes section; their questions' words pick the
    method notes instead (a slope, a lag, a share in percent), and a category that names a section still wins."""
    script, make_rt = scripted
    slope = ("The ordinary least-squares slope (with intercept) of `amount` on `qty`, each record counted once, "
             "in percent. Answer as @mean_amount[value].")
    script.queue(CODE_TURN, ANSWER_TURN)
    final, _ = await _run(make_rt(), slope, [sales_csv], categories=["cause", "retail"])
    turn = script.requests[0].messages[-1]["content"]
    assert "scipy.stats.linregress(d[x], d[y]).slope" in turn and "drop_duplicates" in turn and "× 100" in turn
    assert ".shift(k)" not in turn and "pd.Timestamp" not in turn  # no lag, no date window asked for
    assert final["trajectory"]["user_prompt"] == turn  # the record is the turn the model saw
    script.queue(CODE_TURN, ANSWER_TURN)
    await _run(make_rt(), slope, [sales_csv], categories=["Summary Statistics"])
    turn = script.requests[2].messages[-1]["content"]
    assert "ddof" in turn and "linregress" not in turn
    script.queue(CODE_TURN, ANSWER_TURN)
    await _run(make_rt(), "The total of `amount`. Answer as @mean_amount[value].", [sales_csv])
    assert "# Method notes" not in script.requests[4].messages[-1]["content"]


async def test_repeating_the_same_cell_gets_a_plain_nudge(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    failing = "<think>load</think><code>df = pd.read_csv('nope.csv')</code>"
    script.queue(failing, failing, CODE_TURN, ANSWER_TURN)
    final, _ = await _run(make_rt(), QUESTION, [sales_csv])  # default: no re-sampling, the repeat runs
    steps = final["trajectory"]["steps"]
    assert "same code" not in steps[0]["observation"]
    assert "same code as in your previous turn" in steps[1]["observation"]


async def test_a_repeat_of_a_failed_cell_is_sampled_again_not_run(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    failing = "<think>load</think><code>df = pd.read_csv('nope.csv')\nprint(len(df))</code>"
    spaced = "<think>again</think><code>\ndf = pd.read_csv('nope.csv')  \n\nprint(len(df))\n</code>"
    script.queue(failing, CODE_TURN, failing, spaced, CODE_TURN, ANSWER_TURN)
    final, events = await _run(make_rt(analyst={"repeat_resamples": 2}), QUESTION, [sales_csv])
    traj = final["trajectory"]
    # failing ran once; its two repeats (one with other spacing) never ran, the third sample did
    assert [s["action"]["content"].count("nope.csv") for s in traj["steps"]] == [1, 0, 0, 0]
    assert len(script.requests) == 6
    dropped = [c for c in traj["calls"] if c["dropped"]]
    assert [c["index"] for c in dropped] == [2, 3]
    # each re-sample is asked from the very same messages, at the re-sample temperature, as a distinct sample
    assert script.requests[3].messages == script.requests[2].messages == script.requests[4].messages
    assert [r.temperature for r in script.requests[2:5]] == [0.0, 0.7, 0.7]
    assert dropped[0]["sampling"].get("temperature") in (None, 0, 0.0) and dropped[1]["sampling"]["temperature"] == 0.7
    # the conversation goes on from the kept sample: no dropped completion in what the model saw next
    assert "nope.csv" not in "".join(m["content"] for m in script.requests[5].messages[-4:])
    assert traj["steps"][2]["call"] == 4 and traj["status"] == "answered"
    assert any("repeats a code cell that already failed" in e.get("text", "") for e in events)


#: a degenerate turn: one sentence until the 384-token budget runs out (the 1.5B model's loop in the v13 run)
LOOPING = "<think>\nThe mean is printed. " + "The code is running and the output is correct. " * 300


async def test_a_looping_turn_is_sampled_again_and_a_loop_past_the_budget_goes_back_cut(scripted,
                                                                                      sales_csv: Path) -> None:
    script, make_rt = scripted
    script.queue(LOOPING, CODE_TURN, LOOPING, LOOPING, LOOPING, ANSWER_TURN)
    final, events = await _run(make_rt(), QUESTION, [sales_csv])  # on by default: nothing for a loop to lose
    traj = final["trajectory"]
    assert traj["status"] == "answered" and len(script.requests) == 6
    assert [c["index"] for c in traj["calls"] if c["dropped"]] == [0, 2, 3]
    assert script.requests[1].messages == script.requests[0].messages  # the same turn, asked again
    assert [r.temperature for r in script.requests[:2]] == [0.0, 0.7]
    assert "df = pd.read_csv" in traj["steps"][0]["action"]["content"]  # the kept sample ran
    # the third sample loops too: its turn is void, and goes back with the loop cut at its first copy
    assert traj["steps"][1]["void"] and script.requests[5].messages[-2]["role"] == "assistant"
    sent_back = script.requests[5].messages[-2]["content"]
    assert sent_back.count("The code is running") == 1 and "ran out of tokens" in sent_back
    assert traj["calls"][4]["reply"] == sent_back and traj["calls"][4]["finish_reason"] == "length"
    assert sum("sampling its turn again" in e.get("text", "") for e in events) == 3


async def test_repeats_past_the_resample_budget_run_with_the_note(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    failing = "<think>load</think><code>df = pd.read_csv('nope.csv')</code>"
    script.queue(failing, failing, failing, CODE_TURN, ANSWER_TURN)
    final, _ = await _run(make_rt(analyst={"repeat_resamples": 1}), QUESTION, [sales_csv])
    steps = final["trajectory"]["steps"]
    assert [s["action"]["content"] for s in steps[:2]] == ["df = pd.read_csv('nope.csv')"] * 2
    assert "same code as in your previous turn" in steps[1]["observation"]
    assert sum(1 for c in final["trajectory"]["calls"] if c["dropped"]) == 1


async def test_a_key_only_another_table_has_names_the_tables_that_have_it(scripted, tmp_path: Path) -> None:
    folder = tmp_path / "room"
    folder.mkdir()
    (folder / "visits.csv").write_text("patient_id,period,bp\np1,2023-01,150\np2,2023-01,140\n")
    (folder / "enrol.csv").write_text("patient_id,treated\np1,1\np2,0\n")
    script, make_rt = scripted
    merge = ("<think>merge</think><code>v = pd.read_csv('visits.csv')\ne = pd.read_csv('enrol.csv')\n"
             "m = v.merge(e, on=['patient_id', 'period'])</code>")
    fixed = ("<think>merge on the id</think><code>v = pd.read_csv('visits.csv')\ne = pd.read_csv('enrol.csv')\n"
             "print(v.merge(e, on='patient_id').groupby('treated').bp.mean())</code>")
    script.queue(merge, fixed, "<think>done</think><answer>@mean_amount[0]</answer>")
    final, _ = await _run(make_rt(), QUESTION, [folder / "visits.csv", folder / "enrol.csv"])
    first = final["trajectory"]["steps"][0]["observation"]
    assert "KeyError" in first
    assert "'period' is a column of visits.csv only; enrol.csv has patient_id, treated" in first
    assert "No such column" not in first  # an exact column elsewhere, not a misspelling
    assert "[The DataFrame it was looked up in has these columns: patient_id, treated.]" in first
    assert "is a column of" not in final["trajectory"]["steps"][1]["observation"]


# what the unmatched merge shows: pandas' NaN mean, or numpy's error when a fit gets no rows (no NaN printed)
@pytest.mark.parametrize("use, shown", [("print(m['bp'].mean())", "nan"),
                                        ("print(np.polyfit(m['treated'], m['bp'], 1)[0])", "Traceback")])
async def test_a_merge_on_ids_spelled_differently_that_matched_nothing_says_how_to_merge(scripted, tmp_path: Path,
                                                                                         use, shown) -> None:
    folder = tmp_path / "room"
    folder.mkdir()
    # by hand: visits spell patients P-00001.., the enrolment list PAT_1..: as written no row matches
    (folder / "visits.csv").write_text("patient_id,bp\n" + "".join(f"P-{i:05d},{140 + i}\n" for i in range(1, 7)))
    (folder / "enrol.csv").write_text("patient_id,treated\n" + "".join(f"PAT_{i},{i % 2}\n" for i in range(1, 7)))
    script, make_rt = scripted
    naive = ("<think>merge</think><code>v = pd.read_csv('visits.csv')\ne = pd.read_csv('enrol.csv')\n"
             f"m = v.merge(e, on='patient_id')\n{use}</code>")
    keyed = ("<think>merge on the number</think><code>for d in (v, e):\n"
             "    d['key'] = pd.to_numeric(d['patient_id'].astype(str).str.extract(r'(\\d+)', expand=False))\n"
             "m = v.merge(e, on='key')\nprint(len(m), m['bp'].mean())</code>")
    script.queue(naive, keyed, "<think>done</think><answer>@mean_amount[143.5]</answer>")
    final, _ = await _run(make_rt(), QUESTION, [folder / "visits.csv", folder / "enrol.csv"])
    first, second = (s["observation"] for s in final["trajectory"]["steps"][:2])
    assert first.startswith(shown)  # the unmatched merge, as pandas / numpy show it
    assert "merges on 'patient_id', which the tables spell differently" in first
    assert "visits.csv 'P-00001'" in first and "enrol.csv 'PAT_1'" in first
    # the note's recipe is what the second cell ran: every visit matched, mean bp 143.5 (141..146, by hand)
    assert second.startswith("6 143.5") and "spell differently" not in second


async def test_a_column_name_in_the_wrong_case_gets_the_exact_names(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    wrong = "<think>load</think><code>df = pd.read_csv('sales.csv')\nprint(df['Amount'].mean(), df['regoin'])</code>"
    other = "<think>a dict</think><code>d = {'a': 1}\nprint(d['zzz'])</code>"
    script.queue(wrong, other, CODE_TURN, ANSWER_TURN)
    final, _ = await _run(make_rt(), QUESTION, [sales_csv])
    steps = final["trajectory"]["steps"]
    # the data's own spelling, only for the key that raised (pandas stops at the first missing column)
    assert "KeyError" in steps[0]["observation"]
    assert "the data has: 'Amount' → 'amount'. Use the exact name." in steps[0]["observation"]
    assert "regoin" not in steps[0]["observation"].split("[No such column")[1]
    # a key near no column of the data is left to the error itself
    assert "KeyError" in steps[1]["observation"] and "No such column" not in steps[1]["observation"]
    # and what the model saw is what the trajectory records
    assert script.requests[1].messages[-1]["content"].count("'Amount' → 'amount'") == 1


async def test_a_file_read_with_the_wrong_reader_gets_its_exact_load_call(scripted, tmp_path: Path) -> None:
    import pandas as pd

    book = tmp_path / "in" / "sales book.xlsx"
    book.parent.mkdir()
    pd.DataFrame({"region": ["north", "south"], "amount": [10, 30]}).to_excel(book, sheet_name="q1", index=False)
    script, make_rt = scripted
    wrong = "<think>load</think><code>df = pd.read_csv('sales book.xlsx')\nprint(df.amount.mean())</code>"
    right = "<think>load</think><code>df = pd.read_excel('sales book.xlsx', sheet_name='q1')\nprint(df.amount.mean())</code>"
    script.queue(wrong, right, "<think>done</think><answer>@mean_amount[20.0]</answer>")
    final, _ = await _run(make_rt(), QUESTION, [book])
    steps = final["trajectory"]["steps"]
    assert "Load each file exactly as the file list shows: sales book.xlsx → pd.read_excel(" in steps[0]["observation"]
    assert "sheet_name=\"q1\"" in steps[0]["observation"].split("Load each file")[1]
    assert "20.0" in steps[1]["observation"] and "Load each file" not in steps[1]["observation"]
    assert final["trajectory"]["status"] == "answered"


async def test_the_wrong_reader_again_after_its_hint_is_sampled_again(scripted, tmp_path: Path) -> None:
    import pandas as pd

    book = tmp_path / "in" / "book.xlsx"
    book.parent.mkdir()
    pd.DataFrame({"amount": [10, 30]}).to_excel(book, sheet_name="q1", index=False)
    script, make_rt = scripted
    wrong = "<think>load</think><code>df = pd.read_csv('book.xlsx')\nprint(df.amount.mean())</code>"
    latin = "<think>encoding</think><code>df = pd.read_csv('book.xlsx', encoding='latin1')\nprint(df.amount.mean())</code>"
    right = "<think>load</think><code>df = pd.read_excel('book.xlsx', sheet_name='q1')\nprint(df.amount.mean())</code>"
    script.queue(wrong, latin, right, "<think>done</think><answer>@mean_amount[20.0]</answer>")
    final, _ = await _run(make_rt(analyst={"repeat_resamples": 2}), QUESTION, [book])
    traj = final["trajectory"]
    assert [s["action"]["content"].split("(")[0] for s in traj["steps"][:2]] == ["df = pd.read_csv", "df = pd.read_excel"]
    [dropped] = [c for c in traj["calls"] if c["dropped"]]
    assert "read_csv('book.xlsx', encoding='latin1')" in dropped["completion"]
    assert dropped["dropped"].startswith("reads a file with the reader it was told is wrong (book.xlsx → pd.read_excel(")
    assert traj["status"] == "answered" and "20.0" in traj["steps"][1]["observation"]


async def test_a_cell_cut_off_at_the_turn_budget_is_named_as_such(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    # long, not a loop (a cell repeating one span to the budget is sampled again: test_a_looping_turn_…)
    long_cell = ("<think>all at once</think><code>df = pd.read_csv('sales.csv')\n"
                 + " ".join(f"x{i} = {i};" for i in range(80)) + "\ny = (</code>")
    script.queue(long_cell, CODE_TURN, ANSWER_TURN)
    final, _ = await _run(make_rt(analyst={"max_tokens_per_turn": 64}), QUESTION, [sales_csv])
    traj = final["trajectory"]
    assert traj["calls"][0]["finish_reason"] == "length"
    assert "reached the 64-token limit of a turn, so this code was cut off" in traj["steps"][0]["observation"]
    assert "token limit" not in traj["steps"][1]["observation"]  # a complete cell gets no such note


#: a cell that prints a number with more decimals than the question asks for (the answers below repeat it)
UNROUNDED_CELL = "<think>x</think><code>df = pd.read_csv('sales.csv')\nprint(df['amount'].mean() + 0.1234)</code>"


async def test_a_placeholder_copied_after_its_feedback_is_cut_then_rounded_on_record(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    copied = "<think>x</think><answer>The mean is 20.1234. @mean_amount[20.1234 in units, e.g. 12.3]</answer>"
    script.queue(UNROUNDED_CELL, copied, copied, copied)
    final, _ = await _run(make_rt(), QUESTION, [sales_csv])
    traj = final["trajectory"]
    feedback = [m["content"] for m in traj["calls"][-1]["messages"] if m["content"].startswith("Your answer does not")]
    assert feedback and "repeats the placeholder's words" in feedback[0]
    assert traj["final_answer"] == "The mean is 20.1234. @mean_amount[20.1234 in units, e.g. 12.3]"  # untouched
    assert traj["graded_answer"] == "The mean is 20.1234. @mean_amount[20.1]"
    cut, rounded = traj["postprocess"]
    assert (cut["kind"], cut["after"]) == ("strip_placeholder", "The mean is 20.1234. @mean_amount[20.1234]")
    assert (rounded["kind"], rounded["before"], rounded["after"]) == ("round_decimals", cut["after"],
                                                                     traj["graded_answer"])


async def test_post_processing_is_off_when_sampling_training_data(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    unrounded = "<think>x</think><answer>The mean is 20.1234. @mean_amount[20.1234]</answer>"
    script.queue(UNROUNDED_CELL, unrounded, unrounded, unrounded)
    final, _ = await _run(make_rt(), QUESTION, [sales_csv], postprocess=False)
    traj = final["trajectory"]
    assert traj["postprocess"] == []
    assert traj["graded_answer"] == traj["final_answer"] == "The mean is 20.1234. @mean_amount[20.1234]"


async def test_the_setting_turns_post_processing_off(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    unrounded = "<think>x</think><answer>@mean_amount[20.1234]</answer>"
    script.queue(UNROUNDED_CELL, unrounded, unrounded, unrounded)
    final, _ = await _run(make_rt(analyst={"postprocess": False}), QUESTION, [sales_csv])
    assert final["trajectory"]["postprocess"] == [] and final["trajectory"]["graded_answer"] == "@mean_amount[20.1234]"


async def test_a_salvaged_turn_records_the_raw_completion_and_what_was_repaired(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    # no <think>: lenient parsing salvages it
    script.queue("Load it first.\n<code>\nprint(pd.read_csv('sales.csv')['amount'].mean())\n</code>", ANSWER_TURN)
    final, _ = await _run(make_rt(), QUESTION, [sales_csv])
    first = final["trajectory"]["calls"][0]
    cell = "print(pd.read_csv('sales.csv')['amount'].mean())"
    assert first["completion"] == f"Load it first.\n<code>\n{cell}\n"  # the stop ate </code>
    assert first["repaired"].startswith("a turn must start with <think>")
    assert first["reply"] == f"<think>\nLoad it first.\n</think>\n<code>\n{cell}\n</code>"
    assert script.requests[1].messages[-2]["content"] == first["reply"]


async def test_a_multi_file_question_gets_its_names_placed_and_rl_prompts_match(scripted, tmp_path: Path) -> None:
    from worldsmith.graphs.solve import task_files
    from worldsmith.training.rl_data import task_prompt

    folder = tmp_path / "room"
    folder.mkdir()
    (folder / "orders.csv").write_text("order_id,cust,amt\n1,1,10\n2,2,30\n")
    (folder / "customers.csv").write_text("cust,region\n1,N\n2,S\n")
    (folder / "orders.md").write_text("# Notes\n\nFiles: `orders.csv`.\n\n- `amount` is called `amt` here.\n")
    question = "The mean of `amount` where `region` is 'north'. Answer as @mean_amount[value]."
    task = _task(folder, question, "mean_amount", 10.0)
    script, make_rt = scripted
    script.queue("<think>load</think><code>print(pd.read_csv('orders.csv')['amt'].iloc[0])</code>",
                 "<think>done</think><answer>@mean_amount[10.0]</answer>")
    final, _ = await _run(make_rt(), question, task_files(task))
    turn = script.requests[0].messages[-1]["content"]
    assert final["trajectory"]["user_prompt"] == turn
    notes = turn[turn.index("# The task's names in these files"):]
    # by hand: no table has `amount` (orders.csv calls it `amt`, as its note says); region holds N and S only
    # the memo's line is placed at the name, not quoted apart: the model correlated the wrong column otherwise
    assert ("- `amount`: no table has a column by this name; orders.md says the column `amt` of orders.csv holds it:"
            " use `amt`") in notes
    assert "orders.md says: `amount` is called `amt` here." not in notes
    assert "- 'north' is not a value of `region` in customers.csv; its values: 'N', 'S'" in notes
    # RL rollouts open the same task with the same turn (one prompt path for inference and training)
    assert task_prompt(task, 4000)[-1]["content"] == turn


async def _two_cells(scripted, sales_csv: Path, first: str, second: str, answer: str = "20.0",
                     answers: int = 1) -> tuple[str, str]:
    """The observations of two cells the scripted model runs on the sales file before it answers `answer`
    (`answers` times: a guard can re-ask)."""
    script, make_rt = scripted
    script.queue(f"<think>try</think><code>{first}</code>", f"<think>fix</think><code>{second}</code>",
                 *[f"<think>done</think><answer>@mean_amount[{answer}]</answer>"] * answers)
    final, _ = await _run(make_rt(), QUESTION, [sales_csv])
    one, two = (s["observation"] for s in final["trajectory"]["steps"][:2])
    return one, two


async def test_a_filter_on_a_text_the_column_does_not_hold_gets_the_columns_values(scripted, sales_csv: Path) -> None:
    """A cell without an error that filters on a label the data spells otherwise ('North' for 'north') is told the
    column's values; the fixed cell is not."""
    first, second = await _two_cells(scripted, sales_csv, "df = pd.read_csv('sales.csv')\n"
                                     "print(df[df['region'] == 'North']['amount'].sum())",
                                     "print(df[df['region'] == 'north']['amount'].sum())", answer="10.0")
    assert first.startswith("0") and "'North' is not a value of `region` (its values: " in first
    assert all(v in first for v in ("'north'", "'south'", "'east'"))
    assert "not a value" not in second


async def test_a_frame_cut_to_one_group_and_filtered_again_gets_the_keep_it_whole_note(scripted, sales_csv: Path) -> None:
    first, second = await _two_cells(
        scripted, sales_csv, "df = pd.read_csv('sales.csv')\ndf = df[df['region'] == 'north']\n"
        "s = df[df['region'] == 'south']\nprint(df['amount'].mean() - s['amount'].mean())",
        "df = pd.read_csv('sales.csv')\nn = df[df['region'] == 'north']\n"
        "s = df[df['region'] == 'south']\nprint(n['amount'].mean() - s['amount'].mean())",
        answer="-10.0", answers=2)  # -10 is re-asked once: out of the column's range
    assert first.startswith("nan") and "`df = df[...]` kept only one group's rows" in first  # 10 - mean of nothing
    assert "The result is nan" not in first  # the note that says why replaces the general one
    assert second.startswith("-10.0") and "kept only one group" not in second


async def test_a_nan_result_gets_the_where_did_the_rows_go_note(scripted, sales_csv: Path) -> None:
    first, second = await _two_cells(scripted, sales_csv, "df = pd.read_csv('sales.csv')\n"
                                     "print('mean:', df[df['amount'] > 100]['amount'].mean())",
                                     "print('mean:', df['amount'].mean())")
    assert first.startswith("mean: nan") and "The result is nan" in first  # no amount is over 100
    assert second.startswith("mean: 20.0") and "The result is nan" not in second


async def test_a_nan_from_scipy_over_a_column_with_blanks_gets_the_dropna_call_that_runs(scripted,
                                                                                          tmp_path: Path) -> None:
    """scipy's pearsonr propagates a blank where pandas skips it: the cell printing `nan nan` is told so, with its
    own call on the filled rows, and that call gives the r of the four filled rows (numpy, by hand)."""
    script, make_rt = scripted
    data = tmp_path / "data" / "pairs.csv"
    data.parent.mkdir()
    data.write_text("x,y\n1,2\n2,1\n3,\n4,3\n5,7\n")
    cell = "df = pd.read_csv('pairs.csv')\nfrom scipy import stats\nr, p = stats.pearsonr(df['x'], df['y'])\nprint(r, p)"
    script.queue(f"<think>r</think><code>{cell}</code>", *["<think>done</think><answer>@r[0.8]</answer>"] * 3)
    final, _ = await _run(make_rt(), "What is Pearson's r of x and y? Answer as @r[value].", [data])
    seen = final["trajectory"]["steps"][0]["observation"]
    assert seen.startswith("nan nan") and "`stats.pearsonr` does not skip blank (NaN) values" in seen
    fix = "d = df[['x', 'y']].dropna()\nstats.pearsonr(d['x'], d['y'])"
    assert f"```python\n{fix}\n```" in seen and "The result is nan: it was computed over no rows" not in seen
    import numpy as np
    import pandas as pd
    from scipy import stats

    r, _ = eval(fix.splitlines()[1], {"stats": stats, "d": pd.read_csv(data).dropna()})  # noqa: S307
    assert r == pytest.approx(np.corrcoef([1, 2, 4, 5], [2, 1, 3, 7])[0, 1])


@pytest.mark.parametrize(("printed", "nan"), [("nan", True), ("gap: nan", True), ("r=nan, p=nan", True),
                                              ("PearsonRResult(statistic=np.float64(nan), pvalue=np.float64(nan))",
                                               True), ("(nan, nan)", True), ("0.83 nan", True),
                                              ("nan values: 3", False), ("Nancy", False), ("banana", False),
                                              ("mean: 20.0", False), ("nan\nmean: 20.0", False)])
def test_a_nan_value_is_read_on_the_last_printed_line(printed: str, nan: bool) -> None:
    from worldsmith.agents.analyst import nan_result

    assert nan_result(printed) is nan


@pytest.mark.parametrize(("cell", "fix"), [
    ("stats.spearmanr(df['a'].values, df['b'])", "d = df[['a', 'b']].dropna()\nstats.spearmanr(d['a'], d['b'])"),
    ("stats.ttest_ind(df[df.g == 1]['v'], b, equal_var=False)",
     "stats.ttest_ind((df[df.g == 1]['v']).dropna(), b.dropna())"),
    ("stats.shapiro(df['a'])", "stats.shapiro(df['a'].dropna())"),
    ("stats.f_oneway(*groups)", "stats.f_oneway(*[g.dropna() for g in groups])")])
def test_a_scipy_call_is_shown_again_on_its_data_without_blanks(cell: str, fix: str) -> None:
    """Paired functions drop a row with a blank in either column (one dropna over both keeps them aligned);
    sample-wise ones drop each sample's own blanks; keyword arguments are not samples."""
    from worldsmith.agents.analyst import scipy_calls

    assert scipy_calls(f"print({cell})")[-1].fix() == fix


@pytest.mark.parametrize("cell", ["print(df[df['amount'] > 1 & df['region'] == 'north'])",
                                  "print(df[(df['amount'] > 1) and (df['region'] == 'north')])"])
async def test_conditions_combined_without_parentheses_get_the_pandas_form(scripted, sales_csv: Path, cell) -> None:
    script, make_rt = scripted
    fixed = "print(df[(df['amount'] > 1) & (df['region'] == 'north')]['amount'].sum())"
    script.queue(f"<think>filter</think><code>df = pd.read_csv('sales.csv')\n{cell}</code>",
                 f"<think>parenthesise</think><code>{fixed}</code>",
                 "<think>done</think><answer>@mean_amount[10.0]</answer>")  # the fixed cell prints 10
    final, _ = await _run(make_rt(), QUESTION, [sales_csv])
    first, second = (s["observation"] for s in final["trajectory"]["steps"][:2])
    assert "wrap each one in parentheses" in first and "Error" in first  # pandas' own error, then the note
    assert "wrap each one in parentheses" not in second and "Error" not in second
    # the note shows the cell's own line as pandas wants it (v15's validator check repeated its line twice after
    # the general form alone), and that line runs: the north rows over 1, i.e. the one row of 10
    line = "print(df[(df['amount'] > 1) & (df['region'] == 'north')])"
    assert f"each condition in its own parentheses:\n```python\n{line}\n```" in first
    import contextlib
    import io

    import pandas as pd

    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        exec(line, {"df": pd.read_csv(sales_csv)})  # noqa: S102
    assert shown.getvalue().split() == ["region", "amount", "0", "north", "10"]



async def test_an_inplace_fill_on_one_column_that_pandas_applied_to_a_copy_is_assigned_back(
        scripted, tmp_path: Path) -> None:
    """Under pandas 3 the cell runs without an error and prints the unfilled mean; the note shows its line assigned
    back. The cell that assigns back prints the filled mean (10, 20 and the fill 15 → 15) and gets no note."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "loans.csv").write_text("id,amount\n1,10\n2,\n3,20\n")
    script, make_rt = scripted
    script.queue("<think>fill</think><code>df = pd.read_csv('loans.csv')\n"
                 "df['amount'].fillna(df['amount'].mean(), inplace=True)\nprint(df['amount'].isna().sum())</code>",
                 "<think>assign</think><code>df['amount'] = df['amount'].fillna(df['amount'].mean())\n"
                 "print(df['amount'].mean())</code>",
                 "<think>done</think><answer>@mean_amount[15.0]</answer>")
    final, _ = await _run(make_rt(), QUESTION, [data / "loans.csv"])
    first, second = (s["observation"] for s in final["trajectory"]["steps"][:2])
    assert first.startswith("1") and "ChainedAssignmentError" in first  # one value still missing, pandas' warning
    assert "pandas did not change your DataFrame" in first
    assert "df['amount'] = df['amount'].fillna(df['amount'].mean())" in first
    assert second.startswith("15.0") and "did not change" not in second


async def test_a_conversation_that_outgrows_the_context_ends_on_record(scripted, sales_csv: Path) -> None:
    """The embedded model refused a prompt of 8,297 tokens for its 8,192 context in a rejection sample, and the
    exception ended the whole task synthesis. Now the question ends there, with its status and the reason."""
    from worldsmith.llm.errors import LLMContextError

    def too_long(req):
        raise LLMContextError("llm.default.n_ctx: prompt too long (Requested tokens (8297) exceed context window "
                              "of 8192)")

    script, make_rt = scripted
    script.queue("<think>load</think><code>df = pd.read_csv('sales.csv')\nprint(df.amount.mean())</code>", too_long)
    final, events = await _run(make_rt(), QUESTION, [sales_csv])
    traj = final["trajectory"]
    assert traj["status"] == "context_full" and "8297" in traj["error"] and traj["final_answer"] is None
    assert len(traj["steps"]) == 1 and traj["steps"][0]["execution"]["ok"]  # the first turn is kept as it ran
    assert any(e.get("type") == "feedback" and "context" in e.get("text", "") for e in events)


def _visits_room(tmp_path: Path):
    """Two visits of each patient P-00001..P-00006, bp 141..146 and 10 more; enrolment PAT_1..PAT_6, treated =
    odd ids: the treated visits' bp are 141, 143, 145, 151, 153, 155, mean 148 (by hand). The question's turn
    shows the join as run."""
    folder = tmp_path / "room"
    folder.mkdir()
    (folder / "visits.csv").write_text("patient_id,bp\n" + "".join(f"P-{i:05d},{140 + i + r}\n" for r in (0, 10)
                                                                   for i in range(1, 7)))
    (folder / "enrol.csv").write_text("patient_id,treated\n" + "".join(f"PAT_{i},{i % 2}\n" for i in range(1, 7)))
    question = ("Mean `bp` in `visits.csv` of the patients `treated` in `enrol.csv`. Answer as @mean_bp[value].")
    return question, _task(folder, question, "mean_bp", 148.0)


async def test_the_join_the_turn_shows_has_run_before_the_models_first_cell(scripted, tmp_path: Path) -> None:
    """The 1.5B model, shown the join as a cell to copy, copied it and ran on past the turn's budget; now the
    session runs it and the model starts from `df`. RL rows carry the same setup for their rollouts."""
    from worldsmith.graphs.solve import task_files
    from worldsmith.training.rl_data import rl_rows

    question, task = _visits_room(tmp_path)
    script, make_rt = scripted
    script.queue("<think>df is the join</think><code>print(df[df['treated'] == 1]['bp'].mean())</code>",
                 "<think>done</think><answer>@mean_bp[148.0]</answer>")
    final, _ = await _run(make_rt(), question, task_files(task))
    traj = final["trajectory"]
    assert "has already run in your\nsession" in traj["user_prompt"]
    assert traj["steps"][0]["observation"].startswith("148.0")  # with no join of its own
    assert traj["status"] == "answered" and not traj["guards"]  # the setup's read counts as evidence
    assert traj["metadata"]["setup"] and traj["metadata"]["setup"] in traj["user_prompt"]
    [row], _ = rl_rows([task])
    assert row["setup"] == traj["metadata"]["setup"] and row["prompt"][-1]["content"] == traj["user_prompt"]


async def test_a_cell_reading_the_joined_files_again_into_df_gets_the_setup_back(scripted, tmp_path: Path) -> None:
    """With the setup said in words (3750f22) the 1.5B model began every cell of its first seven setup questions by
    reading the ledger again into `df`, losing the joined columns; after such a cell the setup runs again and
    the observation says which columns came back, so the next cell can start from the join."""
    from worldsmith.graphs.solve import task_files

    question, task = _visits_room(tmp_path)
    script, make_rt = scripted
    script.queue("<think>load</think><code>df = pd.read_csv('visits.csv')\nprint(len(df))</code>",
                 "<think>from df</think><code>print(df[df['treated'] == 1]['bp'].mean())</code>",
                 "<think>done</think><answer>@mean_bp[148.0]</answer>")
    final, _ = await _run(make_rt(), question, task_files(task))
    traj = final["trajectory"]
    first, second = traj["steps"][:2]
    assert first["observation"].startswith("12")  # the cell ran as written: 12 visits, by hand
    lost = first["observation"].split("lost the columns ")[1].split(". ")[0]
    assert "`treated`" in lost and "`bp`" not in lost  # enrol.csv's column, joined in by the setup
    assert second["observation"].startswith("148.0")  # the join is back: treated bp 141..155, by hand
    assert traj["status"] == "answered"
    assert [(g["kind"], g["step"]) for g in traj["guards"]] == [("setup_restored", 0)]
    assert "lost the columns" in script.requests[1].messages[-1]["content"]  # what the model saw, as recorded


async def test_a_faithful_copy_of_the_setup_is_left_alone_and_restoring_can_be_off(scripted, tmp_path: Path) -> None:
    from worldsmith.agents.analyst import opening
    from worldsmith.graphs.solve import task_files

    question, task = _visits_room(tmp_path)
    setup = opening(question, [str(f) for f in task_files(task)], 1300, ["mean_bp"]).setup
    assert "merge(" in setup
    script, make_rt = scripted
    done = "<think>done</think><answer>@mean_bp[148.0]</answer>"
    script.queue(f"<think>copy</think><code>{setup}\nprint(df[df['treated'] == 1]['bp'].mean())</code>", done)
    final, _ = await _run(make_rt(), question, task_files(task))
    traj = final["trajectory"]
    assert "148.0" in traj["steps"][0]["observation"] and "setup ran again" not in traj["steps"][0]["observation"]
    assert traj["guards"] == []
    script.queue("<think>load</think><code>df = pd.read_csv('visits.csv')\nprint(len(df))</code>",
                 "<think>cols</think><code>print(list(df.columns))</code>", done, done)
    final, _ = await _run(make_rt(analyst={"restore_setup": False}), question, task_files(task))
    assert final["trajectory"]["steps"][1]["observation"].startswith("['patient_id', 'bp']")  # left as the cell made it


async def test_a_copy_of_the_setup_that_keeps_some_rows_is_left_alone(scripted, tmp_path: Path) -> None:
    """At f4ca853 the model copied the setup and then filtered rows (`df = df[df["score"] < 100]`); the setup ran
    again after each such cell and undid its filter. The setup's columns and values on the rows kept are its
    work, so such a cell is left alone; a load of the model's own whose join matched nothing still gets the setup
    back."""
    from worldsmith.agents.analyst import opening
    from worldsmith.graphs.solve import task_files

    question, task = _visits_room(tmp_path)
    setup = opening(question, [str(f) for f in task_files(task)], 1300, ["mean_bp"]).setup
    script, make_rt = scripted
    done = "<think>done</think><answer>@mean_bp[143.0]</answer>"
    script.queue(f"<think>copy</think><code>{setup}\ndf = df[df['bp'] < 150]\nprint(len(df))</code>",
                 "<think>treated</think><code>print(df[df['treated'] == 1]['bp'].mean())</code>", done)
    final, _ = await _run(make_rt(), question, task_files(task))
    traj = final["trajectory"]
    first, second = traj["steps"][:2]
    assert first["observation"].rstrip().endswith("\n6")  # after the copy's own "joined:" line: 6 visits under 150
    assert "setup ran again" not in first["observation"] and traj["guards"] == []
    assert second["observation"].startswith("143.0")  # treated visits under 150: 141, 143, 145 (by hand)
    naive = ("<think>join</think><code>df = pd.read_csv('visits.csv').merge(pd.read_csv('enrol.csv'), "
             "on='patient_id')\nprint(len(df))</code>")
    script.queue(naive, "<think>count</think><code>print(len(df))</code>", done, done)
    final, _ = await _run(make_rt(), question, task_files(task))
    first, second = final["trajectory"]["steps"][:2]
    assert first["observation"].startswith("0") and "setup ran again" in first["observation"]
    assert second["observation"].startswith("12")  # the setup's join: every visit (12, by hand)


async def test_a_setup_question_gets_room_to_copy_its_setup_in_each_turn(scripted, tmp_path: Path,
                                                                         sales_csv: Path) -> None:
    """At f4ca853 every cell cut at the 384-token budget began with a copy of the session's setup; with a setup, a
    turn's budget grows by the setup's length at 3 characters a token, and the cut-off note names that budget."""
    from worldsmith.graphs.solve import task_files

    question, task = _visits_room(tmp_path)
    script, make_rt = scripted
    script.queue("<think>from df</think><code>print(df[df['treated'] == 1]['bp'].mean())</code>",
                 "<think>done</think><answer>@mean_bp[148.0]</answer>")
    final, _ = await _run(make_rt(analyst={"max_tokens_per_turn": 100}), question, task_files(task))
    setup = final["trajectory"]["metadata"]["setup"]
    room = 100 + (len(setup) + 2) // 3  # ceil(len / 3), written another way
    assert len(setup) > 300 and [r.max_tokens for r in script.requests] == [room, room]
    script.requests.clear()
    script.queue(CODE_TURN, ANSWER_TURN)
    await _run(make_rt(analyst={"max_tokens_per_turn": 100}), QUESTION, [sales_csv])  # no setup: the plain budget
    assert [r.max_tokens for r in script.requests] == [100, 100]
    script.requests.clear()
    script.queue("<think>from df</think><code>print(df[df['treated'] == 1]['bp'].mean())</code>",
                 "<think>done</think><answer>@mean_bp[148.0]</answer>")
    await _run(make_rt(analyst={"max_tokens_per_turn": 100, "setup_copy_room": False}), question, task_files(task))
    assert [r.max_tokens for r in script.requests] == [100, 100]  # the room can be turned off


async def test_the_joined_df_cut_to_one_group_is_made_whole_again(scripted, tmp_path: Path) -> None:
    """A joined `df` cut to the treated rows and then filtered for the untreated ones comes out empty; the model
    cannot remake the join by a load call, so the session runs its setup again and says so."""
    from worldsmith.graphs.solve import task_files

    question, task = _visits_room(tmp_path)
    script, make_rt = scripted
    cut = ("<think>split</think><code>df = df[df['treated'] == 1]\n"
           "print(df['bp'].mean() - df[df['treated'] == 0]['bp'].mean())</code>")
    done = "<think>done</think><answer>@mean_bp[148.0]</answer>"
    script.queue(cut, "<think>count</think><code>print(len(df))</code>", done, done)
    final, _ = await _run(make_rt(), question, task_files(task))
    first, second = final["trajectory"]["steps"][:2]
    assert first["observation"].startswith("nan")
    assert "kept only one group's rows" in first["observation"]
    assert "setup ran again, so `df` holds every row once more" in first["observation"]
    assert second["observation"].startswith("12")  # every visit again (12, by hand), not the 6 treated ones
    assert [g["kind"] for g in final["trajectory"]["guards"]][:1] == ["setup_restored"]


async def test_a_report_naming_no_data_file_is_sent_back_once(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    question = ("What is the mean amount?\n\nWrite a Markdown report (`answer.md`) that answers the question: state "
                "each number you computed with its definition, explain how you computed it, and say what it means "
                "and which caveats apply.")
    bare = "<think>done</think><answer>The mean amount is 20.0.</answer>"
    sourced = ("<think>name the file</think><answer>The mean amount in sales.csv is 20.0: the arithmetic mean of "
               "the amount column over every row.</answer>")
    script.queue(CODE_TURN, bare, sourced)
    final, _ = await _run(make_rt(), question, [sales_csv])
    traj = final["trajectory"]
    assert traj["status"] == "answered" and "in sales.csv is 20.0" in traj["final_answer"]
    assert [(x["kind"], x["reasked"], x["detail"]) for x in traj["guards"]] == [("report_sources", True, "sales.csv")]
    assert "name the data files your code read (sales.csv)" in script.requests[2].last_user
    # a second bare report is kept (the guard does not block), on record, with no further re-ask
    script.queue(CODE_TURN, bare, bare)
    final, _ = await _run(make_rt(), question, [sales_csv])
    traj = final["trajectory"]
    assert traj["status"] == "answered" and traj["final_answer"] == "The mean amount is 20.0."
    assert [(x["kind"], x["reasked"]) for x in traj["guards"]] == [("report_sources", True), ("report_sources", False)]
