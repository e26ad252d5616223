"""The answer guards in the analyst graph, with the scripted model: each re-asks at most once within the turn limit,
is recorded on the trajectory and in the conversation, and the eval grades and counts what they found."""

from __future__ import annotations

from pathlib import Path

import pytest

from worldsmith.core.runs import RunDir
from worldsmith.core.schemas import AnswerSpec, Provenance, Task, Trajectory
from worldsmith.graphs.analyst import build_analyst_graph, initial_state
from worldsmith.training.data import accept
from worldsmith.training.evaluate import evaluate

TOTAL = "What is the total of the amount column? Answer as @total[value]."
READ_TOTAL = "<think>Load and sum.</think><code>df = pd.read_csv('sales.csv')\nprint(df['amount'].sum())</code>"
FAILING = "<think>Load.</think><code>df = pd.read_csv('nope.csv')</code>"
COPY = ("<think>Answer.</think><answer>The average age is 41.27 and 18 people are older than 60.\n"
        "@mean_age[41.27]\n@n_over_60[18]</answer>")


def answer(text: str) -> str:
    return f"<think>Answer.</think><answer>{text}</answer>"


@pytest.fixture
def shop_csv(tmp_path: Path) -> Path:
    p = tmp_path / "shop" / "shop.csv"
    p.parent.mkdir()
    p.write_text("price,quantity,revenue\n2,10,20\n4,12,48\n6,20,120\n8,25,200\n")
    return p


async def _solve(rt, question: str, files: list[Path], task_id: str = "t1") -> Trajectory:
    state = initial_state(question, [str(f) for f in files], task_id=task_id, session_id=f"s-{task_id}")
    try:
        out = await build_analyst_graph().ainvoke(state, {"recursion_limit": 200}, context=rt)
    finally:
        await rt.sessions.close_all()
    return Trajectory.model_validate(out["trajectory"])


async def _evaluate_total(rt, task_id: str, data: Path, tmp_path: Path):  # noqa: ANN001, ANN202
    """The eval harness on one TOTAL task (answer 60): its run directory, report and recorded trajectory."""
    task = Task(id=task_id, kind="closed_form", instruction=TOTAL, provenance=Provenance(source="manual"),
                answers=[AnswerSpec(name="total", value=60)])
    run = RunDir.create("eval", tmp_path / "runs")
    report = await evaluate([task], lambda t, s: _solve(rt, TOTAL, [data], t.id), run_dir=run)
    return run, report, Trajectory.model_validate_json((run.path / "trajectories" / task_id / "0.json").read_text())


def fired(traj: Trajectory) -> list[tuple[str, bool]]:
    return [(g.kind, g.reasked) for g in traj.guards]


def guard_messages(traj: Trajectory) -> list[str]:
    """Sources of the guard re-asks in the conversation exactly as the model received it."""
    return [m.source for m in traj.messages() if m.source.startswith("guard:")]


async def test_a_worked_example_copy_is_reasked_and_cannot_pass(scripted, sales_csv: Path, tmp_path: Path) -> None:
    script, make_rt = scripted
    # the model computes 60, then answers with the worked example's sentence and numbers, and keeps doing so
    script.queue(READ_TOTAL)
    script.fallback(COPY)
    rt = make_rt()
    task = Task(id="copy", kind="closed_form", instruction=TOTAL, provenance=Provenance(source="manual"),
                answers=[AnswerSpec(name="total", value=60)])
    report = await evaluate([task], lambda t, s: _solve(rt, TOTAL, [sales_csv], t.id), run_dir=RunDir.create(
        "eval", tmp_path / "runs"))
    traj = Trajectory.model_validate_json((tmp_path / "runs").glob("*/trajectories/copy/0.json").__next__().read_text())
    assert fired(traj)[0] == ("example_copy", True)
    assert "copies an example" in script.requests[2].last_user
    assert guard_messages(traj)[0] == "guard:example_copy"
    assert traj.status == "unsupported" and not traj.grades[-1].passed
    assert ("example_copy", False) in fired(traj)  # still a copy once its re-ask was spent: kept, on record
    assert report.overall.n_unsupported == 1 and report.overall.guards["example_copy"].reasked == 1
    assert accept(traj) == "status unsupported"  # never a teacher trajectory


async def test_the_right_number_under_the_examples_sentence_still_cannot_pass(scripted, sales_csv: Path,
                                                                             tmp_path: Path) -> None:
    script, make_rt = scripted
    script.queue(READ_TOTAL)
    script.fallback(answer("The average age is 41.27 and 18 people are older than 60.\n@total[60]"))
    rt = make_rt()
    task = Task(id="sentence", kind="closed_form", instruction=TOTAL, provenance=Provenance(source="manual"),
                answers=[AnswerSpec(name="total", value=60)])
    report = await evaluate([task], lambda t, s: _solve(rt, TOTAL, [sales_csv], t.id),
                            run_dir=RunDir.create("eval", tmp_path / "runs"))
    assert report.overall.pass_at_1 == 0.0 and report.overall.n_unsupported == 1


async def test_an_answer_after_every_cell_failed_is_reasked_then_recorded_unsupported(scripted, sales_csv: Path,
                                                                                      tmp_path: Path) -> None:
    script, make_rt = scripted
    script.queue(FAILING, answer("@total[60]"), answer("@total[60]"))  # a right guess, twice
    run, report, traj = await _evaluate_total(make_rt(), "guess", sales_csv, tmp_path)
    assert [s.action.kind for s in traj.steps] == ["code", "answer", "answer"]
    assert fired(traj) == [("no_evidence", True), ("no_evidence", False)]
    assert traj.guards[0].detail == "every code cell failed"
    assert "not based on the data yet: every code cell failed" in script.requests[2].last_user
    assert guard_messages(traj) == ["guard:no_evidence"]
    assert traj.status == "unsupported" and traj.final_answer == "@total[60]"
    grade = traj.grades[-1]
    assert not grade.passed and grade.score == 0.0 and "on its own it passed" in grade.note
    assert report.overall.pass_at_1 == 0.0
    md = (run.path / "report.md").read_text()
    assert "## Answer guards" in md and "| no_evidence | 2 | 1 | 1 |" in md
    assert "Unsupported answers (a blocking guard still fired; graded wrong): 1 of 1" in md


async def test_the_eval_counts_turns_sampled_again_and_trains_on_none_of_them(scripted, sales_csv: Path,
                                                                               tmp_path: Path) -> None:
    script, make_rt = scripted
    script.queue(FAILING, FAILING, READ_TOTAL, answer("@total[60]"))
    run, report, traj = await _evaluate_total(make_rt(analyst={"repeat_resamples": 2}), "loop", sales_csv, tmp_path)
    assert report.overall.n_resampled == 1 and report.overall.pass_at_1 == 1.0
    assert "repeated a failed code cell: 1." in (run.path / "report.md").read_text()
    # the training conversation holds the failing cell once (it ran once) and no dropped completion
    trained = [m.content for m in traj.messages() if m.trainable]
    assert sum("nope.csv" in c for c in trained) == 1 and len(trained) == 3


async def test_the_turn_limit_holds_a_reask_back(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    script.queue(FAILING, answer("@total[60]"))
    traj = await _solve(make_rt(analyst={"max_turns": 2}), TOTAL, [sales_csv])
    assert len(traj.steps) == 2 and fired(traj) == [("no_evidence", False)]
    assert traj.status == "unsupported" and guard_messages(traj) == []


async def test_turns_running_out_after_a_reask_keep_the_answer_unsupported(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    # re-asked, it runs (other failing) code again and the turns are spent
    script.queue(FAILING, answer("@total[60]"), FAILING.replace("nope", "nope2"))
    traj = await _solve(make_rt(analyst={"max_turns": 3}), TOTAL, [sales_csv])
    assert [s.action.kind for s in traj.steps] == ["code", "answer", "code"]
    assert traj.status == "unsupported" and traj.final_answer == "@total[60]"


async def test_names_outside_the_request_are_reasked_once(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    script.queue(READ_TOTAL, answer("@total[60] @mean[20]"), answer("@total[60]"))
    traj = await _solve(make_rt(), TOTAL, [sales_csv])
    assert fired(traj) == [("names", True)]
    assert "writes @mean, which the question did not ask for" in script.requests[2].last_user
    assert "exactly these names and no others: @total[value]" in script.requests[2].last_user
    assert traj.status == "answered" and traj.final_answer == "@total[60]"


async def test_a_self_correlation_answer_gets_one_corrective_reask(scripted, shop_csv: Path) -> None:
    script, make_rt = scripted
    q = "Which column is most strongly correlated with revenue? Answer as @column[name]."
    corr = "<think>Correlate.</think><code>df = pd.read_csv('shop.csv')\nprint(df.corr()['revenue'])</code>"
    script.queue(corr, answer("@column[revenue]"), answer("@column[quantity]"))
    traj = await _solve(make_rt(), q, [shop_csv])
    assert fired(traj) == [("self_correlation", True)]
    assert "@column[revenue] names revenue" in script.requests[2].last_user
    assert guard_messages(traj) == ["guard:self_correlation"]
    assert traj.status == "answered" and traj.final_answer == "@column[quantity]"
    model_turns = [(m.content, m.trainable) for m in traj.messages() if m.source == "model"]
    assert [t for _, t in model_turns] == [True, False, True]  # the answer the guard sent back never trains
    assert "@column[revenue]" in model_turns[1][0]


async def test_a_second_self_correlation_answer_is_kept_not_reasked_again(scripted, shop_csv: Path) -> None:
    script, make_rt = scripted
    q = "Which column is most strongly correlated with revenue? Answer as @column[name]."
    corr = "<think>Correlate.</think><code>df = pd.read_csv('shop.csv')\nprint(df.corr()['revenue'])</code>"
    script.queue(corr, answer("@column[revenue]"), answer("@column[revenue]"))
    traj = await _solve(make_rt(), q, [shop_csv])
    assert fired(traj) == [("self_correlation", True), ("self_correlation", False)]
    assert traj.status == "answered"  # a corrective guard: the answer stands (and the grader judges it)


async def test_a_mean_outside_the_observed_range_gets_one_corrective_reask(scripted, shop_csv: Path) -> None:
    script, make_rt = scripted
    q = "What is the mean price? Answer as @mean_price[value]."
    code = "<think>Mean.</think><code>df = pd.read_csv('shop.csv')\nprint(df['price'].mean())</code>"
    script.queue(code, answer("@mean_price[50]"), answer("@mean_price[5]"))
    traj = await _solve(make_rt(), q, [shop_csv])
    assert fired(traj) == [("out_of_range", True)]
    assert "outside the observed range of price (2 to 8)" in script.requests[2].last_user
    assert traj.status == "answered" and traj.final_answer == "@mean_price[5]"


async def test_a_clean_answer_fires_nothing(scripted, sales_csv: Path) -> None:
    script, make_rt = scripted
    script.queue(READ_TOTAL, answer("The total is 60. @total[60]"))
    traj = await _solve(make_rt(), TOTAL, [sales_csv])
    assert traj.guards == [] and traj.status == "answered" and len(script.requests) == 2


async def test_reading_a_file_with_an_odd_name_counts_as_evidence(scripted, tmp_path: Path) -> None:
    script, make_rt = scripted
    odd = tmp_path / "in" / "q=1+2 sales.csv"
    odd.parent.mkdir()
    odd.write_text("region,amount\nnorth,10\nsouth,20\neast,30\n")
    script.queue("<think>Load.</think><code>print(pd.read_csv('q=1+2 sales.csv')['amount'].sum())</code>",
                 answer("@total[60]"))
    traj = await _solve(make_rt(), TOTAL, [odd])
    assert traj.steps[0].execution.ok, traj.steps[0].observation
    assert traj.guards == [] and traj.status == "answered"


async def test_an_answer_number_no_output_shows_gets_one_reask_and_is_kept_after_it(scripted, sales_csv: Path) -> None:
    """The 1.5B model answered a salary gap of 10253 that no cell printed (two sample rows of the prompt, subtracted).
    The answer is re-asked once; a second unshown answer is kept (the guard does not block): the grade decides."""
    script, make_rt = scripted
    script.queue(READ_TOTAL, answer("@total[75.5]"), answer("@total[75.5]"))
    traj = await _solve(make_rt(), TOTAL, [sales_csv])
    assert fired(traj) == [("unshown", True), ("unshown", False)]
    assert guard_messages(traj) == ["guard:unshown"]
    assert "No output of your code shows @total[75.5]" in script.requests[2].last_user
    assert traj.status == "answered" and traj.final_answer == "@total[75.5]"


async def test_a_named_answer_no_output_shows_is_reasked_then_kept_once_shown(scripted, sales_csv: Path) -> None:
    """dabench-252: the 0.5B student printed one number and named a country no cell had looked at. Re-asked once; the
    model then prints the regions and answers with one of them, and the answer stands."""
    script, make_rt = scripted
    q = "Which region has the largest amount? Answer as @region[region_name] where region_name is a string."
    script.queue(READ_TOTAL, answer("@region[east]"),
                 "<think>Per region.</think><code>print(df.groupby('region')['amount'].sum().idxmax())</code>",
                 answer("@region[east]"))
    traj = await _solve(make_rt(), q, [sales_csv])
    assert fired(traj) == [("unshown", True)]
    assert "No output of your code shows @region[east]" in script.requests[2].last_user
    assert traj.steps[-2].observation.strip() == "east"
    assert traj.status == "answered" and traj.final_answer == "@region[east]"


async def test_a_number_printed_with_more_decimals_or_as_a_fraction_is_shown(scripted, shop_csv: Path) -> None:
    script, make_rt = scripted
    q = "What share of the revenue comes from the first row, in percent? Answer as @share[value]."
    code = "<think>Share.</think><code>df = pd.read_csv('shop.csv')\nprint(df['revenue'].iloc[0] / df['revenue'].sum())</code>"
    script.queue(code, answer("@share[5.15]"))  # printed 20 / 388 = 0.0515463…; 5.15% is that fraction
    traj = await _solve(make_rt(), q, [shop_csv])
    assert traj.guards == [] and traj.final_answer == "@share[5.15]"
