"""Validator: fresh re-run, one fair falsification attempt, supported / revised / unsupported; the review loop."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from worldsmith.agents.asking import Outcome
from worldsmith.agents.executor import execute
from worldsmith.agents.review import review_loop
from worldsmith.agents.validator import finding_of, validate
from worldsmith.core.evolution_schemas import ExecutionResult, GoalPackage, Verdict
from worldsmith.core.store import write_model

GOAL = GoalPackage(goal="Using sales.csv, compute the south region's total amount.")
SCRIPT = ("import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
          "print(f\"RESULT south_total = {df[df.region == 'south'].amount.sum()}\")")
def plan(description: str, code: str) -> str:
    """A falsification plan as the model writes it: the action grammar, code in a code block."""
    return f"<think>{description}</think>\n<code>\n{code}\n</code>"


CHECK = plan("the largest single south sale, to see whether one sale drives the total",
             "import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
             "print(f\"RESULT largest = {df[df.region == 'south'].amount.max()}\")")


def node(work: Path, conclusion: str, numbers: dict[str, float], script: str = SCRIPT) -> ExecutionResult:
    work.mkdir(parents=True, exist_ok=True)
    (work / "analyze_node1.py").write_text(script)
    result = ExecutionResult(node="1", status="completed", goal=GOAL.goal, conclusion=conclusion, numbers=numbers,
                             script="analyze_node1.py", log="analysis_log.md", inputs=["sales.csv"])
    write_model(work / "execution_result.json", result)
    return result


def south_total(data: Path) -> float:
    df = pd.read_csv(data / "sales.csv")
    return float(df[df.region == "south"].amount.sum())


async def test_supported(scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    script, llm = scripted_llm
    result = node(tmp_path / "n1", "South sold 70 in total.", {"south_total": south_total(data)})
    script.queue(CHECK, {"verdict": "supported", "ground_truth": "South sold 70 in total.", "issues": []})
    out = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                         sandbox=sandbox_config)
    v = out.value
    assert v.verdict == "supported" and v.reproduced and v.ground_truth == "South sold 70 in total."
    assert "RESULT largest = 50" in v.falsification  # the alternative check really ran
    assert "RESULT largest = 50" in script.requests[1].text  # and the judge saw its output
    assert len(out.calls) == 2
    f = finding_of(result, v, finding_id="f1", depends_on=["f0"])
    assert (f.node_id, f.status, f.statement, f.script) == ("1", "supported", "South sold 70 in total.",
                                                            "analyze_node1.py")
    assert f.evidence == "south_total = 70.0" and f.depends_on == ["f0"]


async def test_revised_with_condition_dependencies(scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    script, llm = scripted_llm
    result = node(tmp_path / "n1", "South sells 70 in total, the most of any region.",
                  {"south_total": south_total(data)})
    invented = {"verdict": "revised", "ground_truth": "South sold 70, 60 of it in one sale.", "issues": []}
    revised = {"verdict": "revised", "ground_truth": "South sold 70 in total; one sale of 50 makes most of it.",
               "issues": ["'the most of any region' was not computed"],
               "condition_dependencies": [{"condition": "the single sale of 50", "effect": "without it south has 20"}]}
    script.queue(CHECK, invented, revised)
    out = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                         sandbox=sandbox_config)
    v = out.value
    assert v.verdict == "revised" and v.ground_truth.startswith("South sold 70 in total; one sale of 50")
    assert v.condition_dependencies[0].condition == "the single sale of 50"
    assert out.errors == ["ground_truth states 60, which neither the script nor the check printed"]


async def test_a_claim_the_printed_numbers_contradict_is_unsupported_without_asking(
        scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    script, llm = scripted_llm
    result = node(tmp_path / "n1", "South sold 75 in total.", {"south_total": 75.0})
    out = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                         sandbox=sandbox_config)
    v = out.value
    assert v.verdict == "unsupported" and not v.reproduced and script.requests == []
    assert v.issues == ["RESULT south_total was recorded as 75.0 but the re-run printed 70.0",
                        "the conclusion states 75, which the script does not print"]


async def test_a_falsified_claim_is_unsupported(scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    script, llm = scripted_llm
    result = node(tmp_path / "n1", "South sold 70 in total, spread evenly over its sales.",
                  {"south_total": south_total(data)})
    script.queue(CHECK, {"verdict": "unsupported", "issues": ["one sale of 50 is most of the 70"]})
    out = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                         sandbox=sandbox_config)
    assert out.value.verdict == "unsupported" and out.value.reproduced
    assert out.value.issues == ["one sale of 50 is most of the 70"]


async def test_no_usable_judgement_leaves_the_claim_unsupported(scripted_llm, data: Path, tmp_path: Path,
                                                                sandbox_config) -> None:
    script, llm = scripted_llm
    result = node(tmp_path / "n1", "South sold 70 in total.", {"south_total": south_total(data)})
    script.queue(CHECK, "garbage", "garbage", "garbage", "garbage")
    out = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                         sandbox=sandbox_config, retries=1)
    assert out.value.verdict == "unsupported" and out.value.issues[0].startswith("the model gave no usable judgement")


# ------------------------------------------------------------------------------------------ review loop


async def test_a_rejected_round_is_discarded_and_the_accepted_one_promoted(tmp_path: Path) -> None:
    work = tmp_path / "node"
    seen_feedback: list[str | None] = []

    async def run_round(k: int, staging: Path, feedback: str | None) -> Outcome[ExecutionResult]:
        seen_feedback.append(feedback)
        staging.mkdir(parents=True)
        (staging / "analyze_node1.py").write_text(f"print('round {k}')")
        (staging / f"round{k}_only.csv").write_text("x\n1\n")
        return Outcome(ExecutionResult(node="1", status="completed", conclusion=f"round {k}"))

    async def check(result: ExecutionResult, staging: Path) -> Outcome[Verdict]:
        assert (staging / "analyze_node1.py").is_file()
        if result.conclusion == "round 1":
            return Outcome(Verdict(verdict="unsupported", issues=["the total ignores refunds"]))
        return Outcome(Verdict(verdict="supported", ground_truth="round 2 holds"))

    out = await review_loop(run_round, check, work, max_rounds=3)
    r = out.value
    assert r.accepted and r.result.conclusion == "round 2" and r.verdict.ground_truth == "round 2 holds"
    assert [(x.round, x.kept) for x in r.rounds] == [(1, False), (2, True)]
    assert seen_feedback == [None, "- the total ignores refunds"]
    assert sorted(p.name for p in work.iterdir()) == ["analyze_node1.py", "round2_only.csv"]
    assert (work / "analyze_node1.py").read_text() == "print('round 2')"


async def test_when_every_round_is_rejected_nothing_is_kept(tmp_path: Path) -> None:
    work = tmp_path / "node"

    async def run_round(k: int, staging: Path, feedback: str | None) -> Outcome[ExecutionResult]:
        staging.mkdir(parents=True)
        (staging / "analyze_node1.py").write_text("print(1)")
        if k == 1:
            return Outcome(ExecutionResult(node="1", status="failed", error="no RESULT lines printed"))
        return Outcome(ExecutionResult(node="1", status="completed", conclusion="c"))

    async def check(result: ExecutionResult, staging: Path) -> Outcome[Verdict]:
        return Outcome(Verdict(verdict="unsupported", issues=["wrong"]))

    out = await review_loop(run_round, check, work, max_rounds=2)
    r = out.value
    assert not r.accepted and r.result is None and r.verdict.issues == ["wrong"]
    assert [(x.execution_status, x.kept) for x in r.rounds] == [("failed", False), ("completed", False)]
    assert list(work.iterdir()) == []


async def test_review_loop_with_the_real_executor_and_validator(scripted_llm, data: Path, tmp_path: Path,
                                                                sandbox_config) -> None:
    script, llm = scripted_llm
    inputs = [data / "sales.csv"]
    mean_script = ("<think>mean</think>\n<code>\nimport pandas as pd\ndf = pd.read_csv('sales.csv')\n"
                   "print(f\"RESULT south_mean = {df[df.region == 'south'].amount.mean()}\")\n</code>")
    total_script = f"<think>total</think>\n<code>\n{SCRIPT}\n</code>"
    script.queue(mean_script, {"observations": [], "methodology": "mean", "conclusion": "South's average sale is 35."},
                 total_script, {"observations": [], "methodology": "sum", "conclusion": "South sold 70 in total."},
                 role="agent")
    script.queue(CHECK, {"verdict": "unsupported", "issues": ["the goal asks for the total, not the mean"]},
                 CHECK, {"verdict": "supported", "ground_truth": "South sold 70 in total."}, role="judge")

    async def run_round(k: int, staging: Path, feedback: str | None):
        return await execute(llm, GOAL, node=1, workdir=staging, inputs=inputs, sandbox=sandbox_config,
                             feedback=feedback)

    async def check(result: ExecutionResult, staging: Path):
        return await validate(llm, result, GOAL, workdir=staging, inputs=inputs, sandbox=sandbox_config)

    out = await review_loop(run_round, check, tmp_path / "node", max_rounds=2)
    assert out.value.accepted and out.value.result.numbers == {"south_total": south_total(data)}
    round2_script_request = [r for r in script.requests if r.role == "agent"][2]
    assert "the goal asks for the total, not the mean" in round2_script_request.text  # round 2 saw the issues
    saved = ExecutionResult.model_validate_json((tmp_path / "node" / "execution_result.json").read_text())
    assert saved.conclusion == "South sold 70 in total."
    assert [c.index for c in out.calls] == list(range(8))


def test_numbers_the_goal_states_may_be_repeated_but_no_others() -> None:
    from worldsmith.agents.executor import ResultDraft, report_problems
    from worldsmith.agents.validator import reproduction_issues
    from worldsmith.tools.sandbox import ExecResult

    goal = "How many orders were placed in 2023 and 2024 combined?"
    stdout = "RESULT orders = 968\n"
    draft = ResultDraft(observations=[], methodology="count", conclusion="In 2023 and 2024, 968 orders were placed.")
    assert report_problems(draft, stdout, goal) == []
    assert report_problems(draft, stdout) == [("the conclusion states 2023, 2024, which the script did not print; "
                                               "use the printed numbers")]
    result = ExecutionResult(node="1", status="completed", goal=goal, conclusion=draft.conclusion,
                             numbers={"orders": 968.0})
    assert reproduction_issues(result, ExecResult(stdout=stdout)) == []
    wrong = result.model_copy(update={"conclusion": "In 2025, 968 orders were placed."})
    assert reproduction_issues(wrong, ExecResult(stdout=stdout)) == [
        "the conclusion states 2025, which the script does not print"]
    # v11: a goal naming the file orders_2023.csv names the year its conclusion repeats
    named = result.model_copy(update={"goal": "How many orders does orders_2023.csv hold?",
                                      "conclusion": "The 2023 orders number 968."})
    assert reproduction_issues(named, ExecResult(stdout=stdout)) == []
    assert report_problems(draft.model_copy(update={"conclusion": "The 2023 orders number 968."}), stdout,
                           "How many orders does orders_2023.csv hold?") == []


async def test_a_check_that_does_not_run_is_asked_again_once(scripted_llm, data: Path, tmp_path: Path,
                                                              sandbox_config) -> None:
    script, llm = scripted_llm
    result = node(tmp_path / "n1", "South sold 70 in total.", {"south_total": south_total(data)})
    broken = plan("the largest sale", "import pandas as pd\nprint(f'RESULT x = {")
    script.queue(broken, CHECK, {"verdict": "supported", "ground_truth": "South sold 70 in total."})
    out = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                         sandbox=sandbox_config)
    assert out.value.verdict == "supported" and "RESULT largest = 50" in out.value.falsification
    assert "Your check did not run" in script.requests[1].last_user  # the error went back with the retry
    assert "RESULT largest = 50" in script.requests[2].text  # the judge saw the working check
    assert len(out.calls) == 3 and out.errors[0].startswith("falsification check 1 did not run")
    assert out.value.checked  # a check did run in the end
    assert "start from a copy of it" in script.requests[1].last_user  # pointed at the script that runs


async def test_a_check_that_never_runs_cannot_falsify_the_reproduced_claim(scripted_llm, data: Path, tmp_path: Path,
                                                                            sandbox_config) -> None:
    # v9: both checks of a correct, reproduced join claim crashed, and the judge then refused the claim for it
    script, llm = scripted_llm
    result = node(tmp_path / "n1", "South sold 70 in total.", {"south_total": south_total(data)})
    column = plan("the total of a column spelt otherwise", "import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
                  "print(f\"RESULT x = {df['Amount'].sum()}\")")
    cast = plan("ids as numbers", "import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
                "print(f\"RESULT x = {df.region.astype(float).sum()}\")")
    script.queue(column, cast)  # no judgement queued: none may be asked for
    out = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                         sandbox=sandbox_config)
    v = out.value
    assert v.verdict == "supported" and v.reproduced and not v.checked
    assert v.ground_truth == "South sold 70 in total." and "stands on its reproduction alone" in v.issues[0]
    assert "could not convert string to float" in v.falsification  # the last crash is on record
    assert len(out.calls) == 2 and out.errors[0].startswith("falsification check 1 did not run")
    # the retry carried the analyst's note for the error, as the analyst and the executor get it
    assert "'Amount' → 'amount'" in script.requests[1].last_user


async def test_a_check_crashing_on_an_argument_its_call_does_not_take_runs_again_without_it(
        scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    """v8, v9 and v17 left correct findings unchecked on `.corr(y, ddof=0)` and `.mean(ddof=0)`, written again after
    the note said the call takes no `ddof`."""
    from worldsmith.agents.validator import without_unknown_argument
    from worldsmith.tools.sandbox.base import ExecError

    script, llm = scripted_llm
    total = south_total(data)
    result = node(tmp_path / "n1", f"South sold {total:g} in total.", {"south_total": total})
    ddof = plan("the total from a groupby", "import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
                "print(f\"RESULT by_group = {df.groupby('region').amount.sum(ddof=1)['south']}\")  # ddof")
    script.queue(ddof)  # the repaired check lands on the claim: no retry, no judgement
    out = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                         sandbox=sandbox_config)
    assert out.value.verdict == "supported" and out.value.checked and len(out.calls) == 1
    assert "unexpected keyword argument 'ddof'; run again without that argument" in out.errors[0]
    # by hand: the argument goes from calls of that name only; other errors, or no such call, give None
    err = ExecError(type="TypeError", message="Series.corr() got an unexpected keyword argument 'ddof'")
    code = "r = a.corr(b, ddof=0, method='pearson')\nv = a.var(ddof=0)\n"
    assert without_unknown_argument(code, err) == "r = a.corr(b, method='pearson')\nv = a.var(ddof=0)"
    assert without_unknown_argument("r = a.var(ddof=0)", err) is None
    assert without_unknown_argument(code, ExecError(type="KeyError", message="'ddof'")) is None


async def test_a_check_that_misses_a_column_gets_the_datas_spelling_as_the_executor_does(
        scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    """v16: three checks looked a column up where the data spells it otherwise or holds it in another table, twice
    each, and their findings were left unchecked; the retry now carries the notes from the inputs' profile."""
    script, llm = scripted_llm
    total = south_total(data)
    result = node(tmp_path / "n1", f"South sold {total:g} in total.", {"south_total": total})
    misspelt = plan("the total by group", "import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
                    "print(f\"RESULT x = {df.groupby('Region').amount.sum()['south']}\")")
    fixed = plan("the total by group", "import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
                 "print(f\"RESULT x = {df.groupby('region').amount.sum()['south']}\")")
    script.queue(misspelt, fixed)  # the fixed check lands on the claim: no judgement
    out = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                         sandbox=sandbox_config)
    assert "'Region' → 'region'" in script.requests[1].last_user
    assert out.value.verdict == "supported" and out.value.checked


async def test_a_check_that_lands_on_the_claims_numbers_supports_it_without_a_judgement(
        scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    script, llm = scripted_llm
    total = south_total(data)
    result = node(tmp_path / "n1", f"South sold {total:g} in total.", {"south_total": total})
    groupby = plan("the total from a groupby instead of a filter",
                   "import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
                   "print(f\"RESULT by_group = {df.groupby('region').amount.sum()['south']}\")")
    script.queue(groupby)  # no judgement queued: none may be asked for
    out = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                         sandbox=sandbox_config)
    assert out.value.verdict == "supported" and out.value.ground_truth == f"South sold {total:g} in total."
    assert len(out.calls) == 1 and f"RESULT by_group = {total:g}" in out.value.falsification.replace(".0\n", "\n")


async def test_a_plan_without_a_code_block_is_asked_again_then_leaves_the_claim_unsupported(
        scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    script, llm = scripted_llm
    result = node(tmp_path / "n1", "South sold 70 in total.", {"south_total": south_total(data)})
    script.queue("I think the claim is fine.", '{"description": "x", "code": "print(1)"}')
    out = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                         sandbox=sandbox_config)
    assert out.value.verdict == "unsupported" and "no falsification check could be obtained" in out.value.issues[0]
    assert len(out.calls) == 2 and "Your check did not run" in script.requests[1].last_user


def test_a_check_next_to_the_claim_cannot_overturn_it() -> None:
    from worldsmith.agents.validator import not_overturned

    pearson = {"correlation": -0.1950}  # the embedded run: Pearson -0.195, the check's Spearman -0.2126
    assert "within 25%" in not_overturned(pearson, "RESULT correlation_spearman = -0.2126")
    assert not_overturned(pearson, "RESULT correlation_spearman = 0.2126") == ""  # the other side of zero
    assert not_overturned(pearson, "RESULT correlation_spearman = -0.30") == ""  # 54% away
    assert not_overturned(pearson, "RESULT a = -0.2\nRESULT b = 5.0") == ""  # every printed number must be near
    assert not_overturned(pearson, "no RESULT lines") == ""


async def test_an_unsupported_judgement_on_a_check_next_to_the_claim_is_overruled(
        scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    script, llm = scripted_llm
    total = south_total(data)  # 70
    result = node(tmp_path / "n1", f"South sold {total:g} in total.", {"south_total": total})
    allowance = plan("the total after a 10% returns allowance",
                     "import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
                     "print(f\"RESULT net = {df[df.region == 'south'].amount.sum() * 0.9}\")")
    script.queue(allowance, {"verdict": "unsupported", "issues": ["the net total differs from 70"]})
    out = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                         sandbox=sandbox_config)
    v = out.value
    assert v.verdict == "supported" and v.ground_truth == f"South sold {total:g} in total."
    assert v.issues[0].startswith("the judge's 'unsupported' was overruled: the check's net = 63")
    assert v.issues[1] == "the net total differs from 70"  # the judge's words stay on record


def test_a_claim_on_a_time_grain_needs_code_on_that_grain() -> None:
    from worldsmith.agents.validator import grain_issues

    daily = ("import pandas as pd\ndf = pd.read_csv('orders.csv')\n# Compute the monthly mean\n"
             "monthly_means = df.groupby('date')['amount'].mean()\nprint(monthly_means)")
    claim = "The monthly mean of amount is 67.55 for September 18 and 36.34 for September 19."
    assert grain_issues(claim, daily) == [
        "the conclusion speaks of a monthly figure, but the script never groups or parses dates by month"]
    for by_month in ("df.groupby(pd.to_datetime(df['date']).dt.month)['amount'].mean()",
                     "df.groupby(pd.to_datetime(df['date']).dt.to_period('M'))['amount'].mean()",
                     "df.set_index('date').resample('MS')['amount'].mean()",
                     "df.groupby(df['date'].str[:7])['amount'].mean()"):
        assert grain_issues(claim, "import pandas as pd\n" + by_month) == []
    assert grain_issues("The annual total is 12.", daily)[0].startswith("the conclusion speaks of a yearly figure")
    assert grain_issues("The mean amount is 30.", daily) == []  # no grain claimed


async def test_a_monthly_claim_from_a_script_without_months_is_unsupported_without_asking(
        scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    script, llm = scripted_llm
    result = node(tmp_path / "n1", "South's monthly total is 70.", {"south_total": south_total(data)})
    out = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                         sandbox=sandbox_config)
    assert out.value.verdict == "unsupported" and out.value.reproduced and script.requests == []
    assert "never groups or parses dates by month" in out.value.issues[0]


async def test_the_data_owners_notes_on_the_files_the_script_reads_reach_the_plan_and_the_judge(
        scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    """v6 verified a mean over a column whose memo says its unit changed: the validator had not read the memo."""
    memos = data / "memos"
    memos.mkdir()
    (memos / "sales.md").write_text("# Notes on sales.csv\n\n- From row 3 on, `amount` is in cents.\n"
                                    "- Regions are lower case.\n")
    (memos / "stores.md").write_text("# Notes on stores.csv\n\n- Store 9 closed.\n")
    script, llm = scripted_llm
    result = node(tmp_path / "n1", "South sold 70 in total.", {"south_total": south_total(data)})
    script.queue(CHECK, {"verdict": "unsupported", "issues": ["the memo says amount is in cents from row 3"]})
    out = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv", memos],
                         sandbox=sandbox_config)
    assert out.value.verdict == "unsupported"
    for request in script.requests:  # the plan and the judge
        assert "- memos/sales.md says: From row 3 on, `amount` is in cents." in request.last_user
        assert "Regions are lower case." in request.last_user and "Store 9" not in request.last_user
    script.queue(CHECK, {"verdict": "supported", "ground_truth": "South sold 70 in total.", "issues": []})
    await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"], sandbox=sandbox_config)
    assert "data owners' notes" not in script.requests[-1].last_user  # no notes: the prompt as before


def test_a_date_window_the_statement_does_not_name_is_found_in_the_script() -> None:
    from worldsmith.agents.validator import scope_clause

    h2 = "df = df[(df['date'] >= '2023-07-01') & (df['date'] <= '2023-12-31')]  # from '2023-01-05'"
    claim = "The correlation between basket_size and amount in the 2023 orders is 0.8323."
    assert scope_clause(claim, h2) == "over the rows dated from 2023-07-01 to 2023-12-31 only"
    assert scope_clause("In H2 2023 the correlation is 0.8323.", h2) == ""  # the statement says so
    assert scope_clause("From July 2023 on it is 0.8323.", h2) == ""
    assert scope_clause("Since 2023-07 it is 0.8323.", h2) == ""
    assert scope_clause("The correlation decreases and may be 0.8.", h2) != ""  # 'dec…', 'may' name no month
    assert scope_clause(claim, "df = df[(df.date >= '2023-01-01') & (df.date < '2024-01-01')]") == ""  # a year
    assert scope_clause(claim, "df = df[(df.date > '2022-12-31') & (df.date <= '2023-12-31')]") == ""
    assert scope_clause(claim, "df = df[df.date.between('2023-03-01', '2023-05-31')]") == \
        "over the rows dated from 2023-03-01 to 2023-05-31 only"
    assert scope_clause(claim, "df = df[pd.to_datetime(df.date) < pd.Timestamp('2023-10-01')]") == \
        "over the rows dated before 2023-10-01 only"
    assert scope_clause(claim, "df = df['2023-02-01' <= df.date]") == "over the rows dated from 2023-02-01 on only"
    assert scope_clause(claim, "df = df[df.date == '2023-07-01']") == ""  # one day is a group, not a window


async def test_a_claim_from_part_of_the_year_is_revised_to_say_which_rows(scripted_llm, tmp_path: Path,
                                                                          sandbox_config) -> None:
    # v8 and v9 verified "… in the 2023 orders is 0.8323" from the rows of July to December only
    data = tmp_path / "data"
    data.mkdir()
    dates = pd.date_range("2023-01-01", "2023-12-31", freq="7D")
    orders = pd.DataFrame({"date": dates.strftime("%Y-%m-%d"), "amount": [float(i % 9 + 1) for i in range(len(dates))]})
    orders.to_csv(data / "orders.csv", index=False)
    h2 = float(orders[orders.date >= "2023-07-01"].amount.mean())  # the half-year's mean, by plain pandas
    assert abs(h2 - orders.amount.mean()) > 0.01  # the whole year's differs
    goal = GoalPackage(goal="Using orders.csv, compute the mean amount of the 2023 orders.")
    script = ("import pandas as pd\ndf = pd.read_csv('orders.csv')\ndf = df[df['date'] >= '2023-07-01']\n"
              "print(f\"RESULT mean_amount = {df.amount.mean()}\")")
    work = tmp_path / "n1"
    work.mkdir()
    (work / "analyze_node1.py").write_text(script)
    result = ExecutionResult(node="1", status="completed", goal=goal.goal, numbers={"mean_amount": h2},
                             conclusion=f"The mean amount of the 2023 orders is {h2}.", script="analyze_node1.py",
                             log="analysis_log.md", inputs=["orders.csv"])
    scripted, llm = scripted_llm
    scripted.queue(plan("the mean of the same rows again", script))  # lands on the claim's number: no judgement
    out = await validate(llm, result, goal, workdir=work, inputs=[data / "orders.csv"], sandbox=sandbox_config)
    v = out.value
    assert v.verdict == "revised" and v.checked
    assert v.ground_truth == f"The mean amount of the 2023 orders is {h2} (over the rows dated from 2023-07-01 on only)."
    assert "which the statement did not say" in v.issues[0]


async def test_a_claim_about_a_column_the_script_never_reads_is_unsupported_without_asking(
        scripted_llm, tmp_path: Path, sandbox_config) -> None:
    # v10: "the mean discount_pct across returned orders is 14.9642" averaged every order the returns log lists;
    # over the returned ones (returned == 1) it is another number
    from worldsmith.agents.validator import unread_columns

    data = tmp_path / "data"
    data.mkdir()
    log = pd.DataFrame({"order_id": range(8), "discount_pct": [10.0, 20, 30, 40, 10, 20, 30, 40],
                        "returned": [1, 0, 1, 0, 0, 0, 1, 0]})
    log.to_csv(data / "returns.csv", index=False)
    everyone, returned = log.discount_pct.mean(), log[log.returned == 1].discount_pct.mean()
    assert (everyone, returned) == (25.0, 70 / 3)  # by hand: the claim's number is not the returned orders' mean
    wrong = ("import pandas as pd\ndf = pd.read_csv('returns.csv')\n"
             "print(f\"RESULT mean_discount_pct = {df[df.order_id.notna()].discount_pct.mean()}\")  # returned")
    right = wrong.replace("df.order_id.notna()", "df['returned'] == 1")
    claim = "The mean discount_pct across returned orders is {}."
    assert unread_columns(claim.format(25.0), wrong, [data / "returns.csv"]) == ["returned"]
    assert unread_columns(claim.format(returned), right, [data / "returns.csv"]) == []
    assert unread_columns("The mean discount across orders is 25.0.", wrong, [data / "returns.csv"]) == []
    goal = GoalPackage(goal="Using returns.csv, how does the mean discount_pct differ across returned?")
    work = tmp_path / "n1"
    work.mkdir()
    (work / "analyze_node1.py").write_text(wrong)
    result = ExecutionResult(node="1", status="completed", goal=goal.goal, numbers={"mean_discount_pct": 25.0},
                             conclusion=claim.format(25.0), script="analyze_node1.py", log="analysis_log.md",
                             inputs=["returns.csv"])
    _, llm = scripted_llm  # nothing queued: the model is not asked
    out = await validate(llm, result, goal, workdir=work, inputs=[data / "returns.csv"], sandbox=sandbox_config)
    assert out.value.verdict == "unsupported" and out.value.reproduced and not out.calls
    assert "`returned`, a column of the data the script never reads" in out.value.issues[0]


async def test_numbers_the_conclusion_states_must_be_recorded_result_lines(scripted_llm, data: Path, tmp_path: Path,
                                                                           sandbox_config) -> None:
    # v10: region means printed as a Series after one RESULT line, stated without their regions
    from worldsmith.agents.validator import unrecorded_issues

    means = pd.read_csv(data / "sales.csv").groupby("region").amount.mean()  # by plain pandas
    script = ("import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
              "print(f\"RESULT south_total = {df[df.region == 'south'].amount.sum()}\")\n"
              "print('RESULT means =', df.groupby('region').amount.mean())")
    stated = ", ".join(f"{v:g}" for v in means)
    result = node(tmp_path / "n1", f"South sold 70 in total; the mean amount by region is {stated}.",
                  {"south_total": south_total(data)}, script=script)
    issues = unrecorded_issues(result)
    assert issues and all(f"{v:g}" in issues[0] for v in means) and "70" not in issues[0].split("records")[0]
    assert unrecorded_issues(node(tmp_path / "n2", "South sold 70 in total.", {"south_total": 70.0})) == []
    _, llm = scripted_llm  # nothing queued: decided without the model
    out = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                         sandbox=sandbox_config)
    assert out.value.verdict == "unsupported" and out.value.reproduced and not out.calls
    assert "which no RESULT line records" in out.value.issues[0]


async def test_a_claim_that_misreads_its_own_numbers_is_unsupported_without_asking(
        scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    """v14 verified "the monthly mean of `amount` increased from 58.74 in July to 55.78 in December"."""
    df = pd.read_csv(data / "sales.csv")
    north, south = float(df[df.region == "north"].amount.sum()), float(df[df.region == "south"].amount.sum())
    script = ("import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
              "print(f\"RESULT north_total = {df[df.region == 'north'].amount.sum()}\")\n"
              "print(f\"RESULT south_total = {df[df.region == 'south'].amount.sum()}\")")
    result = node(tmp_path / "n1", f"The total rose from {south:g} in the south to {north:g} in the north.",
                  {"north_total": north, "south_total": south}, script=script)
    assert north < south  # by hand: 40 against 70
    _, llm = scripted_llm  # nothing queued: decided without the model
    out = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                         sandbox=sandbox_config)
    assert out.value.verdict == "unsupported" and out.value.reproduced and not out.calls
    assert f"calls the change from {south:g} to {north:g} an increase" in out.value.issues[0]


async def test_a_claim_from_rows_left_after_dropping_outliers_is_revised_to_say_so(scripted_llm, tmp_path: Path,
                                                                                   sandbox_config) -> None:
    # v14 verified "the correlation between `discount_pct` and `amount` is -0.2592" from the rows within 3 standard
    # deviations of the mean amount (-0.2546 over every row)
    data = tmp_path / "data"
    data.mkdir()
    amounts = [float(10 + i % 7) for i in range(40)] + [400.0]
    orders = pd.DataFrame({"amount": amounts})
    orders.to_csv(data / "orders.csv", index=False)
    kept = orders[(orders.amount - orders.amount.mean()).abs() / orders.amount.std() < 3]  # by plain pandas
    assert len(kept) == 40 and abs(kept.amount.mean() - orders.amount.mean()) > 1
    goal = GoalPackage(goal="Using orders.csv, compute the mean amount.")
    script = ("import numpy as np\nimport pandas as pd\ndf = pd.read_csv('orders.csv')\n"
              "z = np.abs((df['amount'] - df['amount'].mean()) / df['amount'].std())\ndf = df[z < 3]\n"
              "print(f\"RESULT mean_amount = {df.amount.mean()}\")")
    work = tmp_path / "n1"
    work.mkdir()
    (work / "analyze_node1.py").write_text(script)
    mean = float(kept.amount.mean())
    result = ExecutionResult(node="1", status="completed", goal=goal.goal, numbers={"mean_amount": mean},
                             conclusion=f"The mean amount is {mean}.", script="analyze_node1.py",
                             log="analysis_log.md", inputs=["orders.csv"])
    scripted, llm = scripted_llm
    scripted.queue(plan("the mean of the same rows again", script))  # lands on the claim's number: no judgement
    out = await validate(llm, result, goal, workdir=work, inputs=[data / "orders.csv"], sandbox=sandbox_config)
    v = out.value
    assert v.verdict == "revised" and v.ground_truth == (
        f"The mean amount is {mean} (after dropping the rows 3 or more standard deviations from the mean as outliers).")
    assert "the script drops outliers" in v.issues[0]
    # a statement that says so is left as it is; a filter that is no outlier cut adds nothing
    from worldsmith.agents.validator import outlier_clause

    assert outlier_clause("Without outliers, the mean amount is 13.", script) == ""
    assert outlier_clause("The mean amount is 13.", "df = pd.read_csv('orders.csv')\ndf = df[df.amount > 3]") == ""
    iqr = ("q1, q3 = df.amount.quantile(0.25), df.amount.quantile(0.75)\niqr = q3 - q1\n"
           "df = df[(df.amount >= q1 - 1.5 * iqr) & (df.amount <= q3 + 1.5 * iqr)]")
    assert "1.5 interquartile ranges" in outlier_clause("The mean amount is 13.", iqr)


async def test_a_script_that_never_reads_the_column_its_goal_asks_about_is_unsupported_without_asking(
        scripted_llm, tmp_path: Path, sandbox_config) -> None:
    # v14's nodes 8 and 9: asked the monthly mean of basket_size, the script averaged amount, and the conclusion
    # spoke of amount only
    data = tmp_path / "data"
    data.mkdir()
    pd.DataFrame({"basket_size": [1, 2, 3, 4], "amount": [10.0, 20, 30, 40]}).to_csv(data / "orders.csv", index=False)
    goal = GoalPackage(goal="In orders.csv, what is the mean basket_size?")
    script = "import pandas as pd\ndf = pd.read_csv('orders.csv')\nprint(f\"RESULT mean = {df['amount'].mean()}\")"
    work = tmp_path / "n1"
    work.mkdir()
    (work / "analyze_node1.py").write_text(script)
    result = ExecutionResult(node="1", status="completed", goal=goal.goal, numbers={"mean": 25.0},
                             conclusion="The mean amount is 25.0.", script="analyze_node1.py", log="analysis_log.md",
                             inputs=["orders.csv"])
    _, llm = scripted_llm  # nothing queued: the model is not asked
    out = await validate(llm, result, goal, workdir=work, inputs=[data / "orders.csv"], sandbox=sandbox_config)
    assert out.value.verdict == "unsupported" and out.value.reproduced and not out.calls
    assert "the goal asks about `basket_size`, a column of the data the script never reads" in out.value.issues[0]


async def test_a_script_mixing_two_units_a_note_documents_is_unsupported_without_asking(
        scripted_llm, tmp_path: Path, sandbox_config) -> None:
    # v17: "the correlation between date and usage_hours is 0.7003" over hours and, from 2024-05-01, minutes
    from worldsmith.agents.validator import unconverted_units

    data = tmp_path / "data"
    data.mkdir()
    usage = pd.DataFrame({"date": ["2024-03-01", "2024-04-01", "2024-05-01", "2024-06-01"],
                          "usage_hours": [2.0, 3.0, 120.0, 180.0]})  # by hand: 2, 3, 2, 3 hours
    usage.to_csv(data / "usage.csv", index=False)
    (data / "notes.md").write_text("# Notes on `usage.csv`\n\n- From 2024-05-01, `usage_hours` is recorded in minutes "
                                   "instead of hours (1 hours = 60.0 minutes).\n")
    inputs = [data / "usage.csv", data / "notes.md"]
    mixed = ("import pandas as pd\ndf = pd.read_csv('usage.csv')\n"
             "print(f\"RESULT mean_usage = {df['usage_hours'].mean()}\")  # 60 rows? no")
    fixed = mixed.replace("df = pd.read_csv('usage.csv')\n", "df = pd.read_csv('usage.csv')\n"
                          "df.loc[pd.to_datetime(df.date) >= '2024-05-01', 'usage_hours'] /= 60\n")
    assert unconverted_units(mixed, inputs) == [("usage_hours", "notes.md", "From 2024-05-01, `usage_hours` is "
                                                 "recorded in minutes instead of hours (1 hours = 60.0 minutes).")]
    assert unconverted_units(fixed, inputs) == []
    by_inverse = mixed.replace("df['usage_hours'].mean()", "(df['usage_hours'] * 0.016666666666666666).mean()")
    assert unconverted_units(by_inverse, inputs) == []  # the inverse factor converts as well
    other = "import pandas as pd\ndf = pd.read_csv('usage.csv')\nprint(f\"RESULT n = {len(df)}\")"
    assert unconverted_units(other, inputs) == []  # the changed column unused
    assert unconverted_units(mixed, [data / "usage.csv"]) == []  # no note: nothing to say
    # a table whose dates all fall before the change holds one unit: nothing to convert
    usage.iloc[:2].to_csv(data / "early.csv", index=False)
    (data / "notes.md").write_text((data / "notes.md").read_text().replace("`usage.csv`", "`usage.csv`, `early.csv`"))
    assert unconverted_units(mixed.replace("usage.csv", "early.csv"), [*inputs, data / "early.csv"]) == []
    work = tmp_path / "n1"
    work.mkdir()
    (work / "analyze_node1.py").write_text(mixed)
    mean = float(usage.usage_hours.mean())  # 76.25, hours and minutes averaged together
    result = ExecutionResult(node="1", status="completed", goal="Mean usage_hours in usage.csv.",
                             numbers={"mean_usage": mean}, conclusion=f"The mean usage_hours is {mean}.",
                             script="analyze_node1.py", log="analysis_log.md", inputs=["usage.csv"])
    _, llm = scripted_llm  # nothing queued: the model is not asked
    out = await validate(llm, result, GoalPackage(goal=result.goal), workdir=work, inputs=inputs,
                         sandbox=sandbox_config)
    assert out.value.verdict == "unsupported" and out.value.reproduced and not out.calls
    assert "uses `usage_hours` without converting those rows" in out.value.issues[0]


def test_dropped_filters_are_the_columns_the_script_keeps_rows_by_that_the_check_never_uses() -> None:
    from worldsmith.agents.validator import dropped_filters

    late = "t = pd.read_parquet('tms.parquet')\nprint(t[t['late'] == 1]['transit_days'].mean())"
    everyone = "t = pd.read_parquet('tms.parquet')\nprint(t['transit_days'].mean())"
    assert dropped_filters(late, everyone) == ["late"]
    assert dropped_filters(late, late.replace("== 1", "== 0")) == []  # the other group: it uses the column
    assert dropped_filters(SCRIPT, "print(df.amount.sum())") == ["region"]  # df.region == 'south'
    assert dropped_filters("print(df.amount.sum() > 0)\nx = df[df.units >= 3]", "df.amount") == ["units"]
    assert dropped_filters(everyone, everyone) == []  # no rows kept by value
    assert dropped_filters("# df['late'] == 1\nprint(df.x.mean())", "print(df.x.mean())") == []  # a comment


async def test_an_unsupported_judgement_on_a_check_over_other_rows_leaves_the_claim_unchecked(
        scripted_llm, data: Path, tmp_path: Path, sandbox_config) -> None:
    """v18: "the mean transit_days of late shipments is 3.77" (right) was rejected on a check over all shipments."""
    script, llm = scripted_llm
    total = south_total(data)  # 70
    result = node(tmp_path / "n1", f"South sold {total:g} in total.", {"south_total": total})
    everyone = plan("the total over every region", "import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
                                                   "print(f\"RESULT total = {df.amount.sum()}\")")
    script.queue(everyone, {"verdict": "unsupported", "issues": ["the total is 150, not 70"]})
    out = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                         sandbox=sandbox_config)
    v = out.value
    assert v.verdict == "supported" and not v.checked and v.reproduced
    assert "never uses `region`" in v.issues[0] and v.issues[1] == "the total is 150, not 70"
    # a check over the same rows keeps the judge's word
    units = "print(f\"RESULT units = {df[df.region == 'south'].units.sum()}\")"
    script.queue(plan("the south total with units", "import pandas as pd\ndf = pd.read_csv('sales.csv')\n" + units),
                 {"verdict": "unsupported", "issues": ["units are 7, not 70"]})
    again = await validate(llm, result, GOAL, workdir=tmp_path / "n1", inputs=[data / "sales.csv"],
                           sandbox=sandbox_config)
    assert again.value.verdict == "unsupported"
