"""Executor: one script run in the sandbox → analyze_node<i>.py, the analysis log and execution_result.json."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from tests.files.panel_kit import yearly_orders_and_crm
from worldsmith.agents.executor import LOG_FILE, RESULT_FILE, execute
from worldsmith.core.evolution_schemas import ExecutionResult, GoalPackage

GOAL = GoalPackage(goal="Using sales.csv, compute the total amount of the south and north regions.")
SCRIPT = """import pandas as pd
df = pd.read_csv('sales.csv')
tot = df.groupby('region')['amount'].sum()
tot.to_csv('region_totals.csv')
print(f"RESULT south_total = {tot['south']}")
print(f"RESULT north_total = {tot['north']}")"""
TURN = f"<think>\nSum the amounts by region.\n</think>\n<code>\n{SCRIPT}\n</code>"
REPORT = {"observations": ["south has the larger total"], "methodology": "group by region, sum amount",
          "conclusion": "South sold 70 in total and north 40."}


async def test_executor_writes_the_script_the_log_and_the_result(scripted_llm, data: Path, tmp_path: Path,
                                                                 sandbox_config) -> None:
    script, llm = scripted_llm
    script.queue(TURN, REPORT)
    work = tmp_path / "node3"
    out = await execute(llm, GOAL, node=3, workdir=work, inputs=[data / "sales.csv"], sandbox=sandbox_config)
    truth = pd.read_csv(data / "sales.csv").groupby("region")["amount"].sum()
    result = ExecutionResult.model_validate_json((work / RESULT_FILE).read_text())
    assert result == out.value and result.status == "completed" and result.attempts == 1
    assert result.numbers == {"south_total": truth["south"], "north_total": truth["north"]}
    assert result.conclusion == "South sold 70 in total and north 40."
    assert result.script == "analyze_node3.py" and (work / "analyze_node3.py").read_text() == SCRIPT
    assert result.generated_files == ["region_totals.csv"] and (work / "region_totals.csv").is_file()
    assert result.inputs == ["sales.csv"]
    log = (work / LOG_FILE).read_text()
    assert "RESULT south_total = 70" in log and "Status: completed" in log
    # the saved script reproduces its numbers from the persisted input alone, outside worldsmith
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "sales.csv").write_text((data / "sales.csv").read_text())
    rerun = subprocess.run([sys.executable, str(work / "analyze_node3.py")], cwd=fresh, capture_output=True,  # noqa: ASYNC221
                           text=True, check=True)
    assert "RESULT south_total = 70" in rerun.stdout
    assert [c.index for c in out.calls] == [0, 1] and out.calls[0].reply.startswith("<think>")


async def test_failing_scripts_and_unbacked_numbers_are_sent_back(scripted_llm, data: Path, tmp_path: Path,
                                                                  sandbox_config) -> None:
    script, llm = scripted_llm
    broken = "<think>x</think>\n<code>\nimport pandas as pd\nprint(pd.read_csv('sales.csv')['revenue'].sum())\n</code>"
    silent = "<think>x</think>\n<code>\nimport pandas as pd\nprint(pd.read_csv('sales.csv')['amount'].sum())\n</code>"
    invented = {**REPORT, "conclusion": "South sold 75 in total."}
    script.queue(broken, silent, TURN, invented, REPORT)
    out = await execute(llm, GOAL, node=1, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                        sandbox=sandbox_config)
    assert out.value.status == "completed" and out.value.attempts == 3 and len(out.calls) == 5
    assert "KeyError" in script.requests[1].last_user and "did not work" in script.requests[1].last_user
    assert "printed no `RESULT" in script.requests[2].last_user
    assert "they work, keep them" not in script.requests[1].last_user  # nothing ran before the error
    assert [r.temperature for r in script.requests[:3]] == [0.0, 0.0, 0.0]  # a script that ran is no void reply
    assert out.errors == ["attempt 1: the script failed: KeyError: 'revenue'", "attempt 2: no RESULT lines printed",
                          "the conclusion states 75, which the script did not print; use the printed numbers"]


async def test_a_conclusion_comparing_without_numbers_is_sent_back(scripted_llm, data: Path, tmp_path: Path,
                                                                   sandbox_config) -> None:
    """v15's node 7: "The mean income of consumer segments is higher than the mean income of business segments",
    with only the consumers' mean printed (and it is the lower one)."""
    script, llm = scripted_llm
    bare = {**REPORT, "conclusion": "South sold more in total than north."}
    script.queue(TURN, bare, REPORT)
    out = await execute(llm, GOAL, node=6, workdir=tmp_path / "n6", inputs=[data / "sales.csv"],
                        sandbox=sandbox_config)
    assert out.value.status == "completed" and out.value.conclusion == REPORT["conclusion"]
    assert out.errors == ["the conclusion compares without a number ('South sold more in total than north.'): state "
                          "the printed numbers it compares, or leave the comparison out when the output did not "
                          "print both sides"]


async def test_a_script_that_printed_its_numbers_before_failing_is_told_to_keep_them(
        scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    script, llm = scripted_llm
    partly = ("<think>x</think>\n<code>\nimport pandas as pd\ndf = pd.read_csv('sales.csv')\n"
              "print(df.groupby('region')['amount'].sum())\nprint(df.groupby('region')['amount'].corr('x'))\n</code>")
    script.queue(partly, TURN, REPORT)
    out = await execute(llm, GOAL, node=4, workdir=tmp_path / "n4", inputs=[data / "sales.csv"],
                        sandbox=sandbox_config)
    assert out.value.status == "completed" and out.value.attempts == 2
    retry = script.requests[1].last_user
    assert "did not work" in retry and "they work, keep them" in retry and "south" in retry


async def test_a_goal_that_never_runs_is_recorded_as_failed(scripted_llm, data: Path, tmp_path: Path,
                                                            sandbox_config) -> None:
    script, llm = scripted_llm
    script.queue("I cannot do this.", "<think>x</think>\n<code>\nraise ValueError('no')\n</code>")
    work = tmp_path / "n2"
    out = await execute(llm, GOAL, node=2, workdir=work, inputs=[data / "sales.csv"], sandbox=sandbox_config,
                        max_script_attempts=2)
    assert out.value.status == "failed" and out.value.error == "attempt 2: the script failed: ValueError: no"
    assert out.errors[0].startswith("attempt 1: no <code> block") and len(out.calls) == 2
    assert out.calls[0].action is None and out.calls[0].void_reason and out.calls[1].action.kind == "code"
    assert ExecutionResult.model_validate_json((work / RESULT_FILE).read_text()).status == "failed"
    assert (work / "analyze_node2.py").read_text() == "raise ValueError('no')"
    assert "Failed after 2 attempt(s)" in (work / LOG_FILE).read_text()


async def test_a_goal_naming_its_file_sees_only_that_files_tables(scripted_llm, data: Path, tmp_path: Path,
                                                                 sandbox_config) -> None:
    from worldsmith.agents.executor import named_inputs

    (data / "stores.csv").write_text("store,region\n1,north\n2,south\n")
    inputs = [data / "sales.csv", data / "stores.csv"]
    assert named_inputs(GOAL.goal, inputs) == [data / "sales.csv"]
    assert named_inputs("Compare the regions.", inputs) == inputs  # names no file: every table
    assert named_inputs("Join sales.csv with stores.csv.", inputs) == inputs
    assert named_inputs("Using big_sales.csv, …", inputs) == inputs  # a longer name is not sales.csv
    script, llm = scripted_llm
    script.queue(TURN, REPORT)
    await execute(llm, GOAL, node=1, workdir=tmp_path / "n1", inputs=inputs, sandbox=sandbox_config)
    user = script.requests[0].messages[-1]["content"]
    listed = user[user.index("Input files"):user.index("The tables to use")]
    assert "- sales.csv" in listed and "stores.csv" not in listed  # the goal's file only
    profile = user[user.index("The tables to use"):]
    assert "## sales.csv" in profile and "## stores.csv" not in profile


async def test_dt_on_text_dates_gets_the_parse_call(scripted_llm, tmp_path: Path, sandbox_config) -> None:
    """`.dt` on dates read from a CSV fails (they are text); the retry says how to parse them, and the fixed
    script's monthly means are pandas' own."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "orders.csv").write_text("date,amount\n2024-01-03,10\n2024-01-20,30\n2024-02-05,50\n")
    script, llm = scripted_llm
    cell = ("import pandas as pd\ndf = pd.read_csv('orders.csv')\n{fix}"
            "m = df.groupby(df['date'].dt.month)['amount'].mean()\n"
            "print(f'RESULT jan = {{m[1]}}')\nprint(f'RESULT feb = {{m[2]}}')")
    parse = "df['date'] = pd.to_datetime(df['date'])\n"
    script.queue(f"<think>x</think><code>{cell.format(fix='')}</code>",
                 f"<think>x</think><code>{cell.format(fix=parse)}</code>",
                 {**REPORT, "conclusion": "January averaged 20 and February 50."})
    goal = GoalPackage(goal="Using orders.csv, compute the mean amount by month.")
    out = await execute(llm, goal, node=2, workdir=tmp_path / "n2", inputs=[data / "orders.csv"],
                        sandbox=sandbox_config)
    retry = script.requests[1].last_user
    assert "AttributeError" in retry and "pd.to_datetime(" in retry and "dates as text" in retry
    assert out.value.status == "completed" and out.value.numbers == {"jan": 20.0, "feb": 50.0}  # (10+30)/2, 50


async def test_a_goal_naming_a_file_inside_a_folder_input_sees_only_that_table(scripted_llm, data: Path,
                                                                              tmp_path: Path, sandbox_config) -> None:
    """A dual-evidence solver gets the task's data/ folder as its one input: the goal's file is profiled, with
    its path as mounted (data/sales.csv), and the other tables are not (the solvers merged them and failed)."""
    (data / "stores.csv").write_text("store,region\n1,north\n2,south\n")
    script, llm = scripted_llm
    script.queue(TURN.replace("'sales.csv'", "'data/sales.csv'"), REPORT)
    await execute(llm, GOAL, node=1, workdir=tmp_path / "n1", inputs=[data], sandbox=sandbox_config)
    profile = script.requests[0].messages[-1]["content"]
    profile = profile[profile.index("The tables to use"):]
    assert 'pd.read_csv("data/sales.csv")' in profile and "stores.csv" not in profile
    script.queue(TURN.replace("'sales.csv'", "'data/sales.csv'"), REPORT)
    await execute(llm, GoalPackage(goal="Compare the regions."), node=2, workdir=tmp_path / "n2", inputs=[data],
                  sandbox=sandbox_config)
    every = script.requests[-2].messages[-1]["content"]
    assert "data/stores.csv" in every and "data/sales.csv" in every  # a goal naming no file sees every table


async def test_a_failed_script_written_again_is_called_a_repeat(scripted_llm, data: Path, tmp_path: Path,
                                                               sandbox_config) -> None:
    """Greedy decoding wrote the failed script again: it is sampled twice more, then run and called a repeat."""
    script, llm = scripted_llm
    broken = "<think>x</think>\n<code>\nimport pandas as pd\nprint(pd.read_csv('sales.csv')['revenue'].sum())\n</code>"
    script.queue(broken, broken, broken, broken, TURN, REPORT)
    out = await execute(llm, GOAL, node=1, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                        sandbox=sandbox_config)
    assert out.value.status == "completed" and out.value.attempts == 3
    assert "same script as your previous attempt" not in script.requests[1].last_user  # the first failure
    assert "same script as your previous attempt" in script.requests[4].last_user  # written again as it was
    assert [c.dropped is not None for c in out.calls[:5]] == [False, True, True, False, False]


async def test_a_failed_script_written_again_is_sampled_anew_and_the_repeat_never_runs(
        scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    """v14's node 2: the same KeyError script three times at temperature 0, the frame's columns shown each time."""
    script, llm = scripted_llm
    broken = "<think>x</think>\n<code>\nimport pandas as pd\nprint(pd.read_csv('sales.csv')['revenue'].sum())\n</code>"
    script.queue(broken, broken, TURN, REPORT)
    out = await execute(llm, GOAL, node=1, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                        sandbox=sandbox_config)
    assert out.value.status == "completed" and out.value.attempts == 2  # the repeat cost no attempt
    assert script.requests[1].temperature == 0.0 and script.requests[2].temperature == 0.7
    assert script.requests[2].messages == script.requests[1].messages  # the dropped reply never joined the talk
    dropped = [c for c in out.calls if c.dropped]
    assert len(dropped) == 1 and "the script that just failed" in dropped[0].dropped
    log = (tmp_path / "n1" / "analysis_log.md").read_text()
    assert log.count("KeyError: 'revenue'") >= 1 and "Attempt 2: a reply sampled again" in log


def orders_and_crm(tmp_path: Path, columns: str, values: Callable[[int], str]) -> Path:
    """data/orders.csv (order i: account C-0000((i % 5) + 1), amount 10 i) and data/crm.csv (CUST_k, then `columns`
    holding `values(k)`): the same accounts, their ids spelled differently."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "orders.csv").write_text("order_id,acct_ref,amount\n" + "".join(
        f"O{i},C-{(i % 5) + 1:05d},{10 * i}\n" for i in range(1, 11)))
    (data / "crm.csv").write_text(f"customer_id,{columns}\n" + "".join(f"CUST_{k},{values(k)}\n" for k in range(1, 6)))
    return data


async def test_a_goal_over_two_linked_tables_gets_their_join_at_the_top_of_its_script(
        scripted_llm, tmp_path: Path, sandbox_config) -> None:
    """The model writes only the analysis of `df`; the join (ids spelled C-00001 and CUST_1) is run once, shown
    with the columns of `df`, and put at the top of the saved script, which re-runs alone."""
    data = orders_and_crm(tmp_path, "segment", lambda k: "gold" if k % 2 else "basic")
    analysis = ("m = df.groupby('segment')['amount'].sum()\n"
                "for k, v in m.items():\n    print(f'RESULT total_{k} = {v}')")
    script, llm = scripted_llm
    script.queue(f"<think>x</think><code>{analysis}</code>",
                 {**REPORT, "conclusion": "Gold orders came to 370 and basic ones to 180."})
    goal = GoalPackage(goal="Joining orders.csv (acct_ref) to crm.csv (customer_id), matching the ids by the number "
                            "in them, how does the total amount differ across segment?")
    work = tmp_path / "n1"
    out = await execute(llm, goal, node=1, workdir=work, inputs=[data / "orders.csv", data / "crm.csv"],
                        sandbox=sandbox_config)
    user = script.requests[0].messages[-1]["content"]
    assert "already run" in user and "(10 of 10 rows matched)" in user
    assert "`df` has these columns: order_id, acct_ref, amount, customer_id, segment." in user
    # by hand: order i is account (i % 5) + 1, worth 10 i; accounts 1, 3 and 5 are gold: orders 5, 10, 2, 7, 4, 9
    # → 370; basic 2 and 4: orders 1, 6, 3, 8 → 180
    assert out.value.status == "completed" and out.value.numbers == {"total_gold": 370.0, "total_basic": 180.0}
    saved = (work / "analyze_node1.py").read_text()
    assert saved.endswith(analysis) and saved.index("pd.read_csv(\"orders.csv\")") < saved.index(analysis)
    assert "The join put at the top of the script" in (work / LOG_FILE).read_text()
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    for name in ("orders.csv", "crm.csv"):
        (fresh / name).write_text((data / name).read_text())
    rerun = subprocess.run([sys.executable, str(work / "analyze_node1.py")], cwd=fresh, capture_output=True,  # noqa: ASYNC221
                           text=True, check=True)
    assert "RESULT total_gold = 370" in rerun.stdout
    # a model that copies the join into its own script does not get it twice
    from worldsmith.agents.executor import Joined, with_join

    code = saved[: saved.index(analysis)].rstrip()
    join = Joined(code=code, columns=[], rows=10, of=10)
    assert with_join(join, analysis) == saved and with_join(join, saved) == saved
    assert with_join(None, analysis) == analysis


CENTS_MEMO = ("# Notes on the orders export\n\nFiles: `orders.csv`.\n\n- From 2024-07-01, `amount` is recorded in USD "
              "cents instead of USD (1 USD = 100.0 USD cents).\n")
SEGMENT_TOTALS = ("m = df.groupby('segment')['amount'].sum()\n"
                  "for k, v in m.items():\n    print(f'RESULT total_{k} = {v}')")


def cents_orders(data: Path, key: str, value: Callable[[int], str]) -> None:
    """orders.csv: orders 1-4 dated June 2024 in USD (10 i), orders 5-10 dated July and written in cents (1000 i);
    `key`: its second column (an account ref, a segment), `value(i)` that column for order i. And the memo."""
    (data / "orders.csv").write_text(f"order_id,{key},date,amount\n" + "".join(
        f"O{i},{value(i)},2024-0{6 if i < 5 else 7}-{i:02d},{10 * i if i < 5 else 1000 * i}\n" for i in range(1, 11)))
    (data / "memo.md").write_text(CENTS_MEMO)


async def test_a_unit_change_a_memo_documents_is_made_good_after_the_join(scripted_llm, tmp_path: Path,
                                                                          sandbox_config) -> None:
    """A memo says `amount` is in cents from 2024-07-01: the join the executor puts at the top of the script
    brings those rows back to USD, and the prompt says so (v17 verified a correlation over two units mixed)."""
    data = orders_and_crm(tmp_path, "segment", lambda k: "gold" if k % 2 else "basic")
    cents_orders(data, "acct_ref", lambda i: f"C-{(i % 5) + 1:05d}")  # the same orders, dated, July's in cents
    analysis = SEGMENT_TOTALS
    script, llm = scripted_llm
    script.queue(f"<think>x</think><code>{analysis}</code>",
                 {**REPORT, "conclusion": "Gold orders came to 370 USD and basic ones to 180 USD."})
    goal = GoalPackage(goal="Joining orders.csv (acct_ref) to crm.csv (customer_id), matching the ids by the number "
                            "in them, how does the total amount in USD differ across segment?")
    work = tmp_path / "n1"
    out = await execute(llm, goal, node=1, workdir=work, sandbox=sandbox_config,
                        inputs=[data / "orders.csv", data / "crm.csv", data / "memo.md"])
    user = script.requests[0].messages[-1]["content"]
    assert "`amount` in USD on every row" in user and "/= 100.0" in user
    # by hand, in USD: order i is account (i % 5) + 1, worth 10 i; accounts 1, 3 and 5 are gold: orders 5, 10, 2,
    # 7, 4, 9 → 370; basic 2 and 4: orders 1, 6, 3, 8 → 180 (unconverted, gold would be 30 + 31,000)
    assert out.value.status == "completed" and out.value.numbers == {"total_gold": 370.0, "total_basic": 180.0}
    assert "/= 100.0" in (work / "analyze_node1.py").read_text()


async def test_a_goal_over_one_table_with_a_documented_unit_change_starts_from_it_loaded_and_converted(
        scripted_llm, tmp_path: Path, sandbox_config) -> None:
    """v18's node 2 correlated `weight_kg` over kilograms and pounds mixed: a goal over one table whose memo says a
    column it writes changed unit gets the table loaded and those rows brought back at the top of its script."""
    data = tmp_path / "data"
    data.mkdir()
    cents_orders(data, "segment", lambda i: "gold" if i % 2 else "basic")  # odd orders gold, even basic
    analysis = SEGMENT_TOTALS
    script, llm = scripted_llm
    script.queue(f"<think>x</think><code>{analysis}</code>",
                 {**REPORT, "conclusion": "Gold orders came to 250 USD and basic ones to 300 USD."})
    goal = GoalPackage(goal="In orders.csv, how does the total amount in USD differ across segment?")
    work = tmp_path / "n1"
    out = await execute(llm, goal, node=1, workdir=work, sandbox=sandbox_config,
                        inputs=[data / "orders.csv", data / "memo.md"])
    user = script.requests[0].messages[-1]["content"]
    assert "it loads orders.csv into `df` (10 rows), with `amount` in USD on every row" in user
    # by hand, in USD: gold 10 (1 + 3 + 5 + 7 + 9) = 250, basic 10 (2 + 4 + 6 + 8 + 10) = 300
    assert out.value.status == "completed" and out.value.numbers == {"total_gold": 250.0, "total_basic": 300.0}
    saved = (work / "analyze_node1.py").read_text()
    assert saved.index("/= 100.0") < saved.index(analysis)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "orders.csv").write_text((data / "orders.csv").read_text())
    rerun = subprocess.run([sys.executable, str(work / "analyze_node1.py")], cwd=fresh, capture_output=True,  # noqa: ASYNC221
                           text=True, check=True)
    assert "RESULT total_gold = 250" in rerun.stdout
    # the same goal with no memo gets no code put in: the model loads the table itself
    script.queue(f"<think>x</think><code>import pandas as pd\ndf = pd.read_csv('orders.csv')\n{analysis}</code>",
                 {**REPORT, "conclusion": "Gold orders came to 21040 and basic ones to 24060."})
    plain = await execute(llm, goal, node=2, workdir=tmp_path / "n2", sandbox=sandbox_config,
                          inputs=[data / "orders.csv"])
    assert "into `df`" not in script.requests[-2].messages[-1]["content"]
    # by hand, unconverted: gold 10 + 30 + 5,000 + 7,000 + 9,000; basic 20 + 40 + 6,000 + 8,000 + 10,000
    assert plain.value.numbers == {"total_gold": 21040.0, "total_basic": 24060.0}


async def test_a_column_looked_up_in_one_table_that_the_join_holds_is_said_to_be_in_df(
        scripted_llm, tmp_path: Path, sandbox_config) -> None:
    """v14's node 4: `crm['amount']` three times, the crm table's columns shown after each, while `df` (the join
    at the top of the script) held amount and income both."""
    data = orders_and_crm(tmp_path, "income", lambda k: str(1000 * k * k))
    # by hand: order i (amount 10 i) belongs to account (i % 5) + 1, whose income is 1000 times its number squared
    r = pd.Series([10 * i for i in range(1, 11)]).corr(pd.Series([1000 * ((i % 5) + 1) ** 2 for i in range(1, 11)]))
    script, llm = scripted_llm
    script.queue("<think>x</think><code>print(f\"RESULT r = {crm['amount'].corr(crm['income'])}\")</code>",
                 "<think>x</think><code>print(f\"RESULT r = {df['revenue'].corr(df['income'])}\")</code>",
                 "<think>x</think><code>print(f\"RESULT r = {df['amount'].corr(df['income'])}\")</code>",
                 {**REPORT, "conclusion": f"r is {r:.4f}."})
    goal = GoalPackage(goal="Joining orders.csv (acct_ref) to crm.csv (customer_id), matching the ids by the number "
                            "in them, how strongly are amount and income correlated?")
    out = await execute(llm, goal, node=1, workdir=tmp_path / "n1", inputs=[data / "orders.csv", data / "crm.csv"],
                        sandbox=sandbox_config)
    told = script.requests[1].last_user
    assert "KeyError" in told and "`amount` is a column of `df`, the joined table" in told and "df['amount']" in told
    assert "the joined table" not in script.requests[2].last_user  # `revenue` is in no table: no such note
    assert out.value.status == "completed" and out.value.numbers["r"] == pytest.approx(r) and abs(r) > 0.05


async def test_a_conclusion_that_misreads_the_printed_numbers_is_sent_back(scripted_llm, data: Path, tmp_path: Path,
                                                                           sandbox_config) -> None:
    script, llm = scripted_llm
    code = ("import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
            "print(f\"RESULT south_total = {df[df.region == 'south'].amount.sum()}\")\n"
            "print(f\"RESULT north_total = {df[df.region == 'north'].amount.sum()}\")")
    df = pd.read_csv(data / "sales.csv")
    south, north = df[df.region == "south"].amount.sum(), df[df.region == "north"].amount.sum()
    script.queue(f"<think>x</think><code>{code}</code>",
                 {**REPORT, "conclusion": f"Totals increased from {south:g} in the south to {north:g} in the north."},
                 {**REPORT, "conclusion": f"Totals fell from {south:g} in the south to {north:g} in the north."})
    out = await execute(llm, GOAL, node=1, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                        sandbox=sandbox_config)
    assert north < south and f"calls the change from {south:g} to {north:g} an increase" in script.requests[2].last_user
    assert out.value.status == "completed" and out.value.conclusion.startswith("Totals fell")


async def test_a_failed_script_gets_the_analysts_notes_on_the_data(scripted_llm, tmp_path: Path,
                                                                   sandbox_config) -> None:
    """v14's node 6 merged the orders on `customer_id`, which only the crm table has, three times with the orders'
    columns shown: the analyst's notes (which tables hold a column, ids spelled differently) come with the error."""
    data = orders_and_crm(tmp_path, "segment", lambda k: "gold" if k % 2 else "basic")
    merge = ("orders = pd.read_csv('orders.csv')\ncrm = pd.read_csv('crm.csv')\n"
             "df = orders.merge(crm, on='{on}')\nprint(df.groupby('segment').amount.mean())")
    script, llm = scripted_llm
    script.queue(f"<think>x</think><code>import pandas as pd\n{merge.format(on='customer_id')}</code>",
                 f"<think>x</think><code>import pandas as pd\n{merge.format(on='segment')}</code>",
                 "<think>x</think><code>print('RESULT n = 10')</code>", {**REPORT, "conclusion": "10 orders."})
    out = await execute(llm, GoalPackage(goal="How does the mean amount differ across segment?"), node=1,
                        workdir=tmp_path / "n1", inputs=[data / "orders.csv", data / "crm.csv"], sandbox=sandbox_config)
    told = script.requests[1].last_user
    assert "KeyError" in told and "'customer_id' is a column of crm.csv only; orders.csv has order_id, acct_ref, " \
        "amount" in told
    assert "'segment' is a column of crm.csv only" in script.requests[2].last_user
    assert out.value.status == "completed"


async def test_a_file_read_without_its_folder_gets_its_mounted_load_call(scripted_llm, data: Path, tmp_path: Path,
                                                                          sandbox_config) -> None:
    """v14's dual-evidence solver read `orders_2023.csv` for the task's `data/orders_2023.csv`, three attempts."""
    script, llm = scripted_llm
    script.queue("<think>x</think><code>import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
                 "print(f'RESULT total = {df.amount.sum()}')</code>",
                 TURN.replace("'sales.csv'", "'data/sales.csv'"), REPORT)
    out = await execute(llm, GOAL, node=1, workdir=tmp_path / "n1", inputs=[data], sandbox=sandbox_config)
    told = script.requests[1].last_user
    assert "FileNotFoundError" in told
    assert 'Load each file exactly as the file list shows: sales.csv → pd.read_csv("data/sales.csv")' in told
    assert out.value.status == "completed"


async def test_a_script_printing_a_result_line_per_row_is_sent_back(scripted_llm, data: Path, tmp_path: Path,
                                                                    sandbox_config) -> None:
    """v14's solver printed 330 daily means for a monthly question; its draft ran past max_tokens."""
    from worldsmith.agents.executor import MAX_RESULTS

    script, llm = scripted_llm
    flood = f"<think>x</think><code>for i in range({MAX_RESULTS + 1}):\n    print(f'RESULT v{{i}} = {{i}}')</code>"
    script.queue(flood, TURN, REPORT)
    out = await execute(llm, GOAL, node=1, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                        sandbox=sandbox_config)
    told = script.requests[1].last_user
    assert f"The script printed {MAX_RESULTS + 1} RESULT lines" in told and f"(at most {MAX_RESULTS})" in told
    assert out.value.status == "completed" and out.value.attempts == 2
    assert out.errors[0] == f"attempt 1: {MAX_RESULTS + 1} RESULT lines printed (at most {MAX_RESULTS})"
    # the month grouping it is shown runs as written over text dates, and gives the months' means (by hand below)
    import re

    import pandas as pd

    call = re.search(r"`(df\.groupby\(pd\.to_datetime.+?)`", told.replace("\n", " ")).group(1)
    df = pd.DataFrame({"date": ["2024-01-03", "2024-01-20", "2024/02/01", "2024-02-28"], "col": [1.0, 3.0, 10.0, 20.0]})
    months = eval(call, {"pd": pd, "df": df})  # noqa: S307 - the prompt's own example, over a frame made here
    assert {str(k): v for k, v in months.items()} == {"2024-01": 2.0, "2024-02": 15.0}
    # the same flood printed as labelled values: rewritten as RESULT lines, it is sent back all the same
    labelled = f"<think>x</think><code>for i in range({MAX_RESULTS + 5}):\n    print(f'mean_{{i}}: {{i * 1.5}}')</code>"
    script.queue(labelled, TURN, REPORT)
    out = await execute(llm, GOAL, node=2, workdir=tmp_path / "n2", inputs=[data / "sales.csv"],
                        sandbox=sandbox_config)
    assert f"The script printed {MAX_RESULTS + 5} RESULT lines" in script.requests[-2].last_user
    assert out.value.status == "completed" and out.value.attempts == 2


async def test_a_goal_whose_columns_are_in_a_linked_file_it_does_not_name_gets_that_file_joined(
        scripted_llm, tmp_path: Path, sandbox_config) -> None:
    """v10: "the average income by region in the 2023 orders using the `orders_2023.csv` file" — income and region
    are crm's — failed on KeyError three times over. The linked table holding them is shown and joined."""
    from worldsmith.agents.executor import linked_files

    data = orders_and_crm(tmp_path, "region,income", lambda k: f"{'north' if k % 2 else 'south'},{1000 * k}")
    (data / "visits.csv").write_text("visit,region\n" + "".join(f"V{i},east\n" for i in range(1, 8)))  # unlinked
    inputs = [data / "orders.csv", data / "crm.csv", data / "visits.csv"]
    goal = GoalPackage(goal="To compute the mean amount by region in the orders, using the orders.csv file.")
    assert linked_files(goal.goal, inputs, {"orders.csv"}) == {"crm.csv": ["region"]}
    assert linked_files("The mean amount in orders.csv.", inputs, {"orders.csv"}) == {}  # its own columns
    assert linked_files("The mean amount by region.", inputs, set()) == {}  # names no file: nothing to anchor
    analysis = "for k, v in df.groupby('region')['amount'].mean().items():\n    print(f'RESULT mean_{k} = {v}')"
    script, llm = scripted_llm
    script.queue(f"<think>x</think><code>{analysis}</code>",
                 {**REPORT, "conclusion": "North orders average 61.67 and south ones 45."})
    work = tmp_path / "n1"
    out = await execute(llm, goal, node=1, workdir=work, inputs=inputs, sandbox=sandbox_config)
    user = script.requests[0].messages[-1]["content"]
    assert "- crm.csv" in user and "(10 of 10 rows matched)" in user and "visits.csv" not in user
    # by hand: order i is account (i % 5) + 1, worth 10 i; odd accounts are north: orders 5, 10, 2, 7, 4, 9
    # → 370 / 6; even accounts south: orders 1, 6, 3, 8 → 180 / 4
    assert out.value.status == "completed"
    assert out.value.numbers["mean_north"] == pytest.approx(370 / 6) and out.value.numbers["mean_south"] == 45.0
    assert "the goal's `region` is in crm.csv" in (work / LOG_FILE).read_text()


async def test_yearly_parts_and_the_table_holding_the_goals_column_are_stacked_and_joined(
        scripted_llm, tmp_path: Path, sandbox_config) -> None:
    """v11's composition named orders_2023.csv and orders_2024.csv and asked for the mean basket by segment, a crm
    column: three tables, so no join was written and the model's own merge failed on KeyError in every attempt.
    The two yearly parts are one table: stacked, then joined to crm."""
    from worldsmith.agents.executor import linked_files

    data = yearly_orders_and_crm(tmp_path)
    inputs = [data / n for n in ("orders_2023.csv", "orders_2024.csv", "crm.csv")]
    goal = GoalPackage(goal="Compute the mean basket across segment in the 2023 and 2024 orders using the "
                            "orders_2023.csv and orders_2024.csv files.")
    assert linked_files(goal.goal, inputs, {"orders_2023.csv", "orders_2024.csv"}) == {"crm.csv": ["segment"]}
    # the profile keeps the family's link on its first part: a goal naming the later part alone finds crm too
    assert linked_files("The mean basket by segment in orders_2024.csv.", inputs, {"orders_2024.csv"}) == {
        "crm.csv": ["segment"]}
    analysis = "for k, v in df.groupby('segment')['basket'].mean().items():\n    print(f'RESULT mean_{k} = {v}')"
    script, llm = scripted_llm
    script.queue(f"<think>x</think><code>{analysis}</code>", {**REPORT, "conclusion": "See the numbers."})
    out = await execute(llm, goal, node=1, workdir=tmp_path / "n1", inputs=inputs, sandbox=sandbox_config)
    user = script.requests[0].messages[-1]["content"]
    assert "(18 of 18 rows matched)" in user and "pd.concat([" in user
    # by hand: 2023 order i → account (i % 5) + 1, basket i; 2024 order i → account (i % 4) + 1, basket 2 i;
    # odd accounts are business
    rows = [((i % 5) + 1, i) for i in range(1, 11)] + [((i % 4) + 1, 2 * i) for i in range(1, 9)]
    business = [b for k, b in rows if k % 2]
    consumer = [b for k, b in rows if not k % 2]
    assert out.value.status == "completed"
    assert out.value.numbers == {"mean_business": pytest.approx(sum(business) / len(business)),
                                 "mean_consumer": pytest.approx(sum(consumer) / len(consumer))}


async def test_the_scope_picks_the_files_shown_and_joined_not_the_whole_goal(scripted_llm, tmp_path: Path,
                                                                              sandbox_config) -> None:
    """v12: a report's instruction named orders_2023.csv in the earlier question it builds on, beside its own
    question on orders_2024.csv and crm: the dual-evidence solvers got both years stacked into their join. With
    the question as the scope, only the 2024 orders are joined (a later part named alone in a folder input: the
    profile keeps the family's link on the 2023 part, which the join planning must still see)."""
    data = yearly_orders_and_crm(tmp_path)
    question = "Joining orders_2024.csv to crm.csv, what is the mean basket by segment?"
    goal = GoalPackage(goal=question + "\n- background: In orders_2023.csv, what is the mean basket?")
    analysis = "for k, v in df.groupby('segment')['basket'].mean().items():\n    print(f'RESULT mean_{k} = {v}')"
    script, llm = scripted_llm
    script.queue(f"<think>x</think><code>{analysis}</code>", {**REPORT, "conclusion": "See the numbers."})
    out = await execute(llm, goal, node=1, workdir=tmp_path / "n1", inputs=[data], sandbox=sandbox_config,
                        scope=question)
    user = script.requests[0].messages[-1]["content"]
    assert "(8 of 8 rows matched)" in user and "pd.concat([" not in user and "- orders_2023.csv" not in user
    assert "background: In orders_2023.csv" in user  # the goal itself is shown whole
    # by hand: 2024 order i → account (i % 4) + 1, basket 2 i; odd accounts are business
    business = [2 * i for i in range(1, 9) if ((i % 4) + 1) % 2]
    consumer = [2 * i for i in range(1, 9) if not ((i % 4) + 1) % 2]
    assert out.value.numbers == {"mean_business": pytest.approx(sum(business) / len(business)),
                                 "mean_consumer": pytest.approx(sum(consumer) / len(consumer))}


def test_a_table_of_the_same_grain_holding_the_goals_column_is_linked_either_way(tmp_path: Path) -> None:
    """A ledger and an HR report, one row per branch and month each (no id is unique alone): a goal naming one of
    them and a column of the other gets the other, whichever is named."""
    from tests.files.panel_kit import write_panel
    from worldsmith.agents.executor import linked_files

    data = write_panel(tmp_path)
    inputs = [data / "ledger.csv", data / "hr.csv"]
    assert linked_files("The slope of opex on headcount in ledger.csv.", inputs, {"ledger.csv"}) == {
        "hr.csv": ["headcount"]}
    assert linked_files("The slope of opex on headcount in hr.csv.", inputs, {"hr.csv"}) == {"ledger.csv": ["opex"]}
    assert linked_files("The mean opex in ledger.csv.", inputs, {"ledger.csv"}) == {}


#: the 1.5B model's reply in v13 (node 6's solver, three turns in a row), far past any token budget
LOOP = ("<think>\nThink: The script ran but printed no RESULT line.\n\nThe script is correct. "
        + "The script is running and the results are being printed correctly. " * 800)


async def test_a_reply_that_loops_to_its_budget_is_sampled_again_and_never_enters_the_conversation(
        scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    script, llm = scripted_llm
    script.queue(LOOP, TURN, REPORT)
    out = await execute(llm, GOAL, node=5, workdir=tmp_path / "n5", inputs=[data / "sales.csv"],
                        sandbox=sandbox_config)
    assert out.value.status == "completed" and out.value.attempts == 1
    first, again = script.requests[0], script.requests[1]
    assert again.messages == first.messages  # the same turn asked again, not a conversation that holds the loop
    assert first.temperature == 0 and again.temperature == 0.7  # greedy decoding would loop again
    assert [c.dropped is not None for c in out.calls] == [True, False, False]
    assert out.calls[0].finish_reason == "length" and "repeats a 67-character span" in out.calls[0].dropped
    assert "sampled again" in (tmp_path / "n5" / LOG_FILE).read_text()


async def test_a_reply_that_keeps_looping_goes_back_cut_at_its_first_copy(
        scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    script, llm = scripted_llm
    script.queue(LOOP, LOOP, LOOP, TURN, REPORT)
    out = await execute(llm, GOAL, node=6, workdir=tmp_path / "n6", inputs=[data / "sales.csv"],
                        sandbox=sandbox_config)
    assert out.value.status == "completed" and out.value.attempts == 2
    assert [c.dropped is not None for c in out.calls] == [True, True, False, False, False]
    sent_back = script.requests[3].messages[-2]["content"]  # the assistant turn before the re-ask
    assert sent_back.count("The script is running and the results are being printed correctly") == 1
    assert "ran out of tokens" in sent_back and len(sent_back) < 400
    assert out.calls[2].reply == sent_back  # the record holds the reply as the conversation holds it


async def test_a_script_that_prints_its_numbers_as_labels_is_rerun_with_result_lines(
        scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    """v13's solvers printed `segment business = 3.20` and `basket_size_amount_corr: 0.829`, were told to use
    RESULT lines, and were lost (the same script again, then prose). The prints are rewritten and re-run instead."""
    script, llm = scripted_llm
    labelled = ("<think>x</think>\n<code>\nimport pandas as pd\ndf = pd.read_csv('sales.csv')\n"
                "tot = df.groupby('region')['amount'].sum()\nfor region, total in tot.items():\n"
                "    print(f\"{region} total: {total:.1f}\")\nprint('rows:', len(df))\n</code>")
    script.queue(labelled, {**REPORT, "conclusion": "South sold 70 in total and north 40."})
    work = tmp_path / "n7"
    out = await execute(llm, GOAL, node=7, workdir=work, inputs=[data / "sales.csv"], sandbox=sandbox_config)
    df = pd.read_csv(data / "sales.csv")
    truth = df.groupby("region")["amount"].sum()
    assert out.value.status == "completed" and out.value.attempts == 1 and len(out.calls) == 2  # no second script
    assert out.value.numbers == {**{f"{r}_total": float(v) for r, v in truth.items()}, "rows": float(len(df))}
    saved = (work / "analyze_node7.py").read_text()
    assert "RESULT" in saved and "df.groupby('region')" in saved  # the saved script prints what it recorded
    rerun = subprocess.run([sys.executable, str(work / "analyze_node7.py")], cwd=data, capture_output=True,  # noqa: ASYNC221
                           text=True, check=True)
    assert f"RESULT south_total = {truth['south']}" in rerun.stdout
    assert "labelled print(s) rewritten as RESULT lines" in (work / LOG_FILE).read_text()


async def test_after_a_reply_with_no_script_the_next_turn_is_sampled(scripted_llm, data: Path, tmp_path: Path,
                                                                     sandbox_config) -> None:
    """v13's node 11: greedy decoding wrote the same tagless plan ("Think: To answer the question, …") three times."""
    script, llm = scripted_llm
    plan = "Think: join the tables and group by region. The script will print RESULT lines."
    script.queue(plan, TURN, REPORT)
    out = await execute(llm, GOAL, node=8, workdir=tmp_path / "n8", inputs=[data / "sales.csv"],
                        sandbox=sandbox_config)
    assert out.value.status == "completed" and out.value.attempts == 2
    assert [r.temperature for r in script.requests[:2]] == [0.0, 0.7]
    assert out.calls[1].sampling["temperature"] == 0.7 and out.calls[0].void_reason


async def test_a_description_inside_code_is_not_run_and_the_next_turn_is_sampled(scripted_llm, data: Path,
                                                                                 tmp_path: Path, sandbox_config) -> None:
    """v14's teacher solver wrote "The script reads the orders_2023.csv file using pandas, …" inside <code> three
    times; each ran and died on a SyntaxError, and the task lost its second solver."""
    script, llm = scripted_llm
    prose = ("<think>x</think>\n<code>\nThe script reads sales.csv using pandas, sums the amount by region and "
             "prints out the results as RESULT lines.\n</code>")
    script.queue(prose, TURN, REPORT)
    work = tmp_path / "n9"
    out = await execute(llm, GOAL, node=9, workdir=work, inputs=[data / "sales.csv"], sandbox=sandbox_config)
    assert out.value.status == "completed" and out.value.attempts == 2
    assert out.errors[0] == "attempt 1: the <code> block holds a description in words, not a script"
    assert "held a description in words, not a Python script" in script.requests[1].last_user
    assert [r.temperature for r in script.requests[:2]] == [0.0, 0.7]
    log = (work / LOG_FILE).read_text()
    assert "a description in words, not a script" in log and "SyntaxError" not in log  # never sent to the sandbox
    # the interpreter's output pasted back as the script is not run either
    echo = '<think>x</think>\n<code>\nFile "<cell-3>", line 13\n    x = df["amount"].\nSyntaxError: invalid syntax\n</code>'
    script.queue(echo, TURN, REPORT)
    out = await execute(llm, GOAL, node=11, workdir=tmp_path / "n11", inputs=[data / "sales.csv"],
                        sandbox=sandbox_config)
    assert out.errors[0] == "attempt 1: the <code> block holds the interpreter's output, not a script"
    assert out.value.status == "completed"
    # a script with one slip is code: it runs, and its error goes back as usual
    slip = "<think>x</think>\n<code>\nimport pandas as pd\ndf = pd.read_csv('sales.csv'\nprint(df)\n</code>"
    script.queue(slip, TURN, REPORT)
    out = await execute(llm, GOAL, node=10, workdir=tmp_path / "n10", inputs=[data / "sales.csv"],
                        sandbox=sandbox_config)
    assert out.errors[0].startswith("attempt 1: the script failed: SyntaxError")


async def test_a_failed_script_reading_files_its_goal_does_not_need_is_told_so(scripted_llm, data: Path,
                                                                                tmp_path: Path, sandbox_config) -> None:
    """v14's solver, asked for the mean income by region "from the crm.xlsx file", merged the yearly order files in
    on a column they lack, three attempts."""
    script, llm = scripted_llm
    (tmp_path / "stores.csv").write_text("store,city\n1,Oslo\n2,Bergen\n")
    (tmp_path / "notes.md").write_text("the sales table is in sales.csv\n")
    merged = ("<think>x</think>\n<code>\nimport pandas as pd\ns = pd.read_csv('sales.csv')\nt = pd.read_csv("
              "'stores.csv')\nprint(s.merge(t, on='store_id'))\nopen('notes.md').read()\n</code>")
    script.queue(merged, TURN, REPORT)
    inputs = [data / "sales.csv", tmp_path / "stores.csv", tmp_path / "notes.md"]
    out = await execute(llm, GOAL, node=4, workdir=tmp_path / "n4", inputs=inputs, sandbox=sandbox_config)
    told = script.requests[1].last_user
    assert out.value.status == "completed" and "KeyError" in out.errors[0]
    assert ("The goal's data is in sales.csv; the script also reads stores.csv, which the goal does not need"
            in told) and "notes.md, which" not in told
    # a script that reads only what its goal names gets no such note
    script.queue("<think>x</think>\n<code>\nimport pandas as pd\nprint(pd.read_csv('sales.csv')['nope'])\n</code>",
                 TURN, REPORT)
    await execute(llm, GOAL, node=5, workdir=tmp_path / "n5", inputs=inputs, sandbox=sandbox_config)
    assert "does not need" not in script.requests[-2].last_user


def test_a_merge_the_goal_does_not_need_gets_no_advice_on_how_to_merge(tmp_path: Path) -> None:
    """v15's node 2 merged crm into a correlation inside one order file: the note on the two names of the key
    (`acct_ref` / `customer_id`) would tell it how to do what it should not; with both files needed, it does."""
    from worldsmith.agents.executor import script_notes
    from worldsmith.tools.sandbox.base import ExecError, ExecResult

    ids = [f"C-{i:03d}" for i in range(1, 41)]
    pd.DataFrame({"order_id": [f"O-{i:04d}" for i in range(120)], "acct_ref": [ids[i % 40] for i in range(120)],
                  "amount": [float(i % 17) for i in range(120)]}).to_csv(tmp_path / "orders.csv", index=False)
    pd.DataFrame({"customer_id": ids, "segment": ["a", "b"] * 20}).to_csv(tmp_path / "crm.csv", index=False)
    inputs = [tmp_path / "orders.csv", tmp_path / "crm.csv"]
    code = "o = pd.read_csv('orders.csv')\nc = pd.read_csv('crm.csv')\ndf = o.merge(c, on='customer_id')"
    failed = ExecResult(ok=False, error=ExecError(type="KeyError", message="'customer_id'"))
    one = script_notes(failed, inputs, code, {"orders.csv"})
    assert "the script also reads crm.csv, which the goal does not need" in one and "left_on" not in one
    both = script_notes(failed, inputs, code, {"orders.csv", "crm.csv"})
    assert 'left_on="acct_ref", right_on="customer_id"' in both and "does not need" not in both
