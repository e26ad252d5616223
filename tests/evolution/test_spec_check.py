"""An evolution number's answer spec must compute that number from the task's files, read as written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.evolution.evolve_kit import SPEC
from worldsmith.agents.task_writer import spec_problems
from worldsmith.core.answer_spec import AnswerFacets
from worldsmith.evolution.spec_check import spec_mismatch, spec_value

ROWS = {"region": ["E", "E", "N", "N", "N"], "income": [100.0, 300.0, 10.0, 20.0, None],
        "spend": [12.0, 28.0, 1.0, 3.0, 5.0],
        "date": ["2023-01-05", "2023-06-01", "2023-02-01", "2024-03-01", "2023-03-01"]}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    pd.DataFrame(ROWS).to_csv(tmp_path / "data" / "crm.csv", index=False)
    return tmp_path


def spec(**kw) -> AnswerFacets:
    base = {**SPEC, "name": "mean_E", "measure": {"variable": "income", "description": "income",
                                                  "files": ["data/crm.csv"], "unit": "USD"}}
    return AnswerFacets.model_validate({**base, **kw})


def test_a_per_group_mean_without_its_group_filter_is_refused(root: Path) -> None:
    # the script printed the mean of region E: (100 + 300) / 2 = 200
    assert spec_value(spec(), root) == (pytest.approx(430 / 4), [])  # no filter: every non-blank income
    assert "not the printed 200" in spec_mismatch(spec(), root, 200.0)[0]
    with_group = spec(filters=[{"column": "region", "op": "==", "value": "E"}])
    assert spec_mismatch(with_group, root, 200.0) == []
    files = ["data/crm.csv"]
    assert any(p.startswith("read as written") for p in spec_problems(spec(), "mean_E", files, root=root, value=200.0))
    assert spec_problems(with_group, "mean_E", files, root=root, value=200.0) == []


def test_windows_counts_and_differences_are_computed_as_written(root: Path) -> None:
    in_2023 = spec(window={"column": "date", "start": "2023-01-01", "end": "2024-01-01"})
    assert spec_value(in_2023, root)[0] == pytest.approx((100 + 300 + 10) / 3)  # the blank income is left out
    count = spec(quantity="count", window={"column": "date", "start": "2023-01-01", "end": "2024-01-01"})
    assert spec_value(count, root)[0] == 4
    diff = spec(quantity="difference", comparison={
        "a": {"label": "E", "filters": [{"column": "region", "value": "E"}]},
        "b": {"label": "N", "filters": [{"column": "region", "value": "N"}]}})
    assert spec_value(diff, root)[0] == pytest.approx(200 - 15)


def test_a_window_on_a_column_without_dates_is_named(root: Path) -> None:
    bad = spec(window={"column": "region", "start": "2023-01-01", "end": "2023-12-31"})
    assert spec_mismatch(bad, root, 200.0) == ["time window column `region` holds no dates"]


def test_quantities_it_does_not_compute_are_left_to_the_lint(root: Path) -> None:
    lagged = spec(quantity="lagged_correlation", x={"variable": "spend", "files": ["data/crm.csv"]}, lag="1 month")
    assert spec_value(lagged, root) == (None, []) and spec_mismatch(lagged, root, 1.0) == []
    elsewhere = spec(quantity="correlation", x={"variable": "spend", "files": ["data/other.csv"]})
    assert spec_value(elsewhere, root) == (None, [])  # x in another file: a join this module does not guess


# the four rows with both numbers (the fifth income is blank), by hand
INCOME, SPEND = np.array([100.0, 300.0, 10.0, 20.0]), np.array([12.0, 28.0, 1.0, 3.0])


def test_correlations_and_slopes_of_two_columns_are_computed(root: Path) -> None:
    x = {"variable": "spend", "files": ["data/crm.csv"]}
    corr = spec(quantity="correlation", x=x, scale="coefficient")
    assert spec_value(corr, root)[0] == pytest.approx(np.corrcoef(INCOME, SPEND)[0, 1])
    slope = spec(quantity="slope", x=x)
    assert spec_value(slope, root)[0] == pytest.approx(np.polyfit(SPEND, INCOME, 1)[0])  # income on spend
    assert "not the printed 0.5" in spec_mismatch(corr, root, 0.5)[0]
    assert spec_value(spec(quantity="correlation", x={"variable": "nope", "files": ["data/crm.csv"]}), root)[1] == [
        "x `nope` is not a column of data/crm.csv"]


def test_a_correlation_without_x_and_window_is_completed_from_the_data(root: Path) -> None:
    """The embedded task writer wrote a correlation with no x and an open window, three times: the one column
    whose correlation with the measure is the printed number becomes x, and the window all dates."""
    from worldsmith.evolution.spec_check import repaired

    r = float(np.corrcoef(INCOME, SPEND)[0, 1])
    slipped = spec(name="corr", quantity="correlation", scale="coefficient", window={"all_dates": False})
    assert spec_problems(slipped, "corr", ["data/crm.csv"]) == [
        "answer spec 'corr': a correlation needs the other variable (x)",
        "answer spec 'corr': time window is open (give dates or say all dates)"]
    fixed = repaired(slipped, root, "corr", r)
    assert fixed is not None and fixed.x.variable == "spend" and fixed.window.all_dates
    assert spec_problems(fixed, "corr", ["data/crm.csv"], root=root, value=r) == []
    assert repaired(slipped, root, "corr", 0.123) is None  # no column gives 0.123: nothing is guessed
    # the embedded writer's last spec: no x and a dated window on a column the file does not have
    dated = spec(name="corr", quantity="correlation", scale="coefficient",
                 window={"column": "order_date", "start": "2023-01-01", "end": "2023-12-31"})
    fixed = repaired(dated, root, "corr", r)
    assert fixed is not None and fixed.x.variable == "spend" and fixed.window.all_dates
    # v8's writer: a calendar-year window on the file's real date column, which leaves out the 2024 row the script
    # read; no x gives the printed r within the window, so the window is the slip: all dates
    year = spec(name="corr", quantity="correlation", scale="coefficient",
                window={"column": "date", "start": "2023-01-01", "end": "2023-12-31"})
    within = float(np.corrcoef([100.0, 300.0, 10.0], [12.0, 28.0, 1.0])[0, 1])  # income is blank in the 2023-03 row
    assert abs(within - r) > 1e-3
    fixed = repaired(year, root, "corr", r)
    assert fixed is not None and fixed.x.variable == "spend" and fixed.window.all_dates
    assert repaired(year, root, "corr", within).window.column == "date"  # the window's own r: the window is kept


def test_the_two_common_slips_are_repaired_from_the_data_only_when_the_number_then_matches(root: Path) -> None:
    from worldsmith.evolution.spec_check import repaired

    slipped = spec(window={"column": "region", "start": "2023-01-01", "end": "2023-12-31"})  # and no group filter
    fixed = repaired(slipped, root, "mean_E", 200.0)
    assert fixed is not None and fixed.window.all_dates
    assert [(f.column, f.op, f.value) for f in fixed.filters] == [("region", "==", "E")]
    assert repaired(slipped, root, "mean_E", 123.0) is None  # nothing read from the data gives 123: no repair
    assert repaired(spec(), root, "mean_income", 200.0) is None  # no group label in the name


def test_a_plain_mean_filed_as_a_difference_without_sides_is_repaired_when_it_computes_the_number(root: Path) -> None:
    from worldsmith.evolution.spec_check import repaired

    # v10's writer filed `mean_discount_pct` as a difference with no comparison; the mean of spend is 49 / 5
    slipped = spec(name="mean_spend", quantity="difference", measure={"variable": "spend", "files": ["data/crm.csv"]})
    fixed = repaired(slipped, root, "mean_spend", 9.8)
    assert fixed is not None and fixed.quantity == "mean" and fixed.comparison is None
    assert repaired(slipped, root, "mean_spend", 7.0) is None  # not the mean of the column: left refused
    assert repaired(slipped.model_copy(update={"name": "spend_gap"}), root, "spend_gap", 9.8) is None  # no such name
    # v14: `monthly_mean_2023-01_web` filed as a difference; a name that says change or gap stays one
    inner = slipped.model_copy(update={"name": "monthly_mean_spend"})
    assert repaired(inner, root, "monthly_mean_spend", 9.8).quantity == "mean"
    assert repaired(inner, root, "mean_spend_change", 9.8) is None
    counted = spec(name="n_rows", quantity="difference", measure={"variable": "spend", "files": ["data/crm.csv"]})
    fixed_count = repaired(counted, root, "n_rows", 5.0)
    assert fixed_count is not None and fixed_count.quantity == "count"


def test_a_value_named_for_a_group_of_a_linked_table_needs_that_groups_filter(tmp_path: Path) -> None:
    """v11: `mean_business` (the business segment's mean basket, segment a column of crm.xlsx) was specified with
    "Filters: none", which reads as every order's mean: 2.39 against the expected 3.07."""
    from worldsmith.core.answer_spec import render_answer_spec
    from worldsmith.evolution.spec_check import named_group, with_group

    (tmp_path / "data").mkdir()
    pd.DataFrame({"acct_ref": ["C-1", "C-2", "C-3", "C-1"], "basket": [4, 1, 2, 6]}).to_csv(
        tmp_path / "data" / "orders.csv", index=False)
    pd.DataFrame({"customer_id": ["CUST_1", "CUST_2", "CUST_3"], "segment": ["business", "consumer", "consumer"]}
                 ).to_csv(tmp_path / "data" / "crm.csv", index=False)
    files = ["data/orders.csv", "data/crm.csv"]
    open_spec = spec(name="mean_business", measure={"variable": "basket", "files": files})
    assert named_group(open_spec, tmp_path, "mean_business", files) == ("business", "data/crm.csv", "segment")
    problems = spec_problems(open_spec, "mean_business", files, root=tmp_path, value=5.0)
    assert problems == ["the name 'mean_business' is the value for 'business' (a value of `segment` in "
                        "data/crm.csv), but no filter keeps those rows: add the filter `segment` == 'business' and "
                        "list `segment` under other_columns as recorded in data/crm.csv"]
    fixed = with_group(open_spec, tmp_path, "mean_business", files)
    assert [(f.column, f.value) for f in fixed.filters] == [("segment", "business")]
    assert fixed.other_columns == {"segment": ["data/crm.csv"]}
    assert spec_problems(fixed, "mean_business", files, root=tmp_path, value=5.0) == []  # the join is not computed
    assert "only rows where `segment` is 'business'" in render_answer_spec(fixed)
    # a name whose suffix is no group's value, or one the filters already keep, asks for nothing
    assert named_group(open_spec, tmp_path, "mean_basket", files) is None
    assert named_group(fixed, tmp_path, "mean_business", files) is None
    # v11's mean_discount_pct_E, filed as a difference with no sides three times: with its group's filter on the
    # linked table, it is no longer computable here, and its name still says it is a plain mean
    from worldsmith.evolution.spec_check import repaired

    slipped = with_group(open_spec.model_copy(update={"quantity": "difference"}), tmp_path, "mean_business", files)
    assert spec_problems(slipped, "mean_business", files, root=tmp_path, value=5.0) != []
    plain = repaired(slipped, tmp_path, "mean_business", 5.0)
    assert plain is not None and plain.quantity == "mean" and plain.filters == fixed.filters
    assert spec_problems(plain, "mean_business", files, root=tmp_path, value=5.0) == []


def test_a_correlation_with_a_linked_tables_column_takes_its_x_from_the_script(tmp_path: Path) -> None:
    """v11: the amount-income correlation over orders joined to crm was written without x three times; income is
    crm's, so the repair from the measure's file found none. The script says which column it correlated."""
    from worldsmith.evolution.spec_check import x_from_script

    (tmp_path / "data").mkdir()
    pd.DataFrame({"acct_ref": ["C-1", "C-2"], "amount": [1.0, 2.0]}).to_csv(tmp_path / "data" / "orders.csv",
                                                                            index=False)
    pd.DataFrame({"customer_id": ["CUST_1", "CUST_2"], "income": [10.0, 30.0]}).to_csv(
        tmp_path / "data" / "crm.csv", index=False)
    files = ["data/orders.csv", "data/crm.csv", "data/memo.md"]
    no_x = spec(name="amount_income_correlation", quantity="correlation",
                measure={"variable": "amount", "files": ["data/orders.csv"]})
    script = 'df = orders.merge(crm, on="_key")\ncorrelation = df_2023["amount"].corr(df_2023["income"])\n'
    fixed = x_from_script(no_x, script, tmp_path, files)
    assert fixed is not None and (fixed.x.variable, fixed.x.files) == ("income", ["data/crm.csv"])
    assert x_from_script(no_x, "r = df.income.corr(df.amount)", tmp_path, files).x.variable == "income"  # either side
    assert spec_problems(fixed, "amount_income_correlation", files, root=tmp_path, value=0.47) == []
    assert x_from_script(no_x, "r = df['basket'].corr(df['income'])", tmp_path, files) is None  # not the measure's
    assert x_from_script(no_x, "r = df['amount'].corr(df['income'])\ns = df['amount'].corr(df['acct_ref'])",
                         tmp_path, files) is None  # two candidates: no guess
    # not recomputed here, its method is named from the script: pandas' default is Pearson
    from worldsmith.evolution.spec_check import script_method

    assert "Pearson's r of `amount` and `income`" in script_method(fixed, script).aggregation
    assert script_method(fixed, "df['amount'].corr(df['income'], method='spearman')") == fixed
    # an aggregation written as "none" is replaced, not kept in front of the method ("Computation: none (Pearson's…")
    named = script_method(fixed.model_copy(update={"aggregation": "none"}), script).aggregation
    assert named == "Pearson's r of `amount` and `income` over the rows where both are recorded"


async def test_the_task_writer_falls_back_to_the_repair(root: Path, tmp_path: Path) -> None:
    import uuid

    from worldsmith.agents.task_writer import write_answer_spec
    from worldsmith.llm import LLM, LLMConfig
    from worldsmith.llm.providers.scripted import Script, register_script, unregister_script

    name = f"spec-{uuid.uuid4().hex[:8]}"
    script = register_script(name, Script())
    llm = LLM(LLMConfig(default={"provider": "scripted", "model": name}, cache=False), home=tmp_path / "home")
    slipped = {**spec().model_dump(mode="json"), "window": {"column": "region", "start": "2023-01-01",
                                                           "end": "2023-12-31"}}
    script.queue(slipped, slipped, slipped)
    out = await write_answer_spec(llm, goal="mean income by region", script="...", name="mean_E", value=200.0,
                                  files=["data/crm.csv"], root=root)
    assert out.value is not None and out.value.window.all_dates and out.value.filters[0].value == "E"
    assert out.errors[-1].startswith("the last spec was repaired from the data")
    assert "holds no dates" in " ".join(out.errors)  # what the model was told, on record
    llm.close()
    unregister_script(name)


def test_a_tie_at_the_requested_decimals_accepts_both_roundings() -> None:
    from worldsmith.app.evolve_tasks import answer_tolerance

    exact = (51423.92 + 51423.93) / 2  # a mean that lands on .925: one reader rounds to .92, another to .93
    tol = answer_tolerance(2, exact=True)
    assert tol.accepts(exact, 51423.92) and tol.accepts(exact, 51423.93) and not tol.accepts(exact, 51423.94)
    printed = 51423.93  # only the script's rounded print is known: a whole unit in the last place
    loose = answer_tolerance(2, exact=False)
    assert loose.accepts(printed, 51423.92) and not loose.accepts(printed, 51423.91)
    assert answer_tolerance(None, exact=True).rel == 0.01


def test_order_filters_compare_numbers_as_numbers_and_dates_as_dates(root: Path) -> None:
    big = spec(filters=[{"column": "income", "op": ">", "value": 50}])
    assert spec_value(big, root)[0] == pytest.approx((100 + 300) / 2)  # 100 and 300; 10, 20 and the blank are out
    late = spec(filters=[{"column": "date", "op": ">=", "value": "2023-03-01"}])
    assert spec_value(late, root)[0] == pytest.approx((300 + 20) / 2)  # 2023-06-01 and 2024-03-01 (2023-03-01 blank)
    not_e = spec(filters=[{"column": "region", "op": "!=", "value": "E"}])
    assert spec_value(not_e, root)[0] == pytest.approx(15)


def test_a_verified_spec_is_pinned_to_its_one_reading(root: Path) -> None:
    """Blind solves of two embedded evolution tasks: Spearman read for 'correlation' (0.795 against 0.829), and the
    memo's de-duplication read for a mean the script took over every row (2.137 against 2.119)."""
    from worldsmith.evolution.spec_check import AS_RECORDED, pinned

    r = float(np.corrcoef(INCOME, SPEND)[0, 1])
    corr = spec(name="corr", quantity="correlation", scale="fraction", population="all_dates",
                x={"variable": "spend", "files": ["data/crm.csv"]}, aggregation="correlation")
    p = pinned(corr, root, r)
    assert p.scale == "coefficient" and "between -1 and 1" in p.unit_words  # a negative r can be written
    assert p.aggregation == ("correlation (Pearson's r of `income` and `spend` over the rows where both are "
                             "recorded)")
    assert p.population == AS_RECORDED
    mean = spec(filters=[{"column": "region", "op": "==", "value": "E"}], population="every customer")
    assert pinned(mean, root, 200.0).population == f"every customer; {AS_RECORDED}"
    # a spec whose value is not the printed one (or not computed here) keeps its words
    assert pinned(mean, root, 123.0).population == "every customer"
    # v15: a mean over January's rows whose measure the writer described as "the total amount of orders in each
    # month"; a column's own description stays
    monthly = spec(measure={"variable": "income", "description": "The total income of customers in each month",
                            "files": ["data/crm.csv"], "unit": "USD"})
    assert pinned(monthly, root, 123.0).measure.description == ""
    assert pinned(spec(), root, 123.0).measure.description == "income"
    spearman = corr.model_copy(update={"aggregation": "Spearman rank correlation"})
    assert pinned(spearman, root, 0.5).aggregation == "Spearman rank correlation"
    # what a closed form not recomputed here (a filter on a linked table) gets when its path kept every row
    from worldsmith.evolution.spec_check import recorded_population

    assert recorded_population("orders_2024.csv") == f"orders_2024.csv; {AS_RECORDED}"
    assert recorded_population(recorded_population("x")) == f"x; {AS_RECORDED}" and recorded_population("") == AS_RECORDED


def test_a_criterion_id_written_twice_is_renamed_not_refused() -> None:
    from worldsmith.core.evolution_schemas import RubricDraft

    def criterion(cid: str) -> dict:
        return {"id": cid, "dimension": "evidence", "text": f"cites {cid}", "type": "preference",
                "provenance": "generated"}

    draft = RubricDraft.model_validate({"dimensions": ["data", "analysis", "evidence", "result"], "criteria": [
        criterion("evidence"), criterion("result"), criterion("evidence"), criterion("evidence_2"),
        criterion("evidence")]})
    assert [c.id for c in draft.criteria] == ["evidence", "result", "evidence_3", "evidence_2", "evidence_4"]


async def test_a_correlation_whose_measure_names_files_the_script_never_read_is_repaired(root: Path,
                                                                                         tmp_path: Path) -> None:
    # v10: the 2023 correlation's spec named all three yearly files for its measure and no x, three times over
    import uuid

    from worldsmith.agents.task_writer import write_answer_spec
    from worldsmith.llm import LLM, LLMConfig
    from worldsmith.llm.providers.scripted import Script, register_script, unregister_script

    pd.DataFrame({"spend": [1.0, 2.0], "income": [5.0, 1.0]}).to_csv(root / "data" / "crm_old.csv", index=False)
    df = pd.DataFrame(ROWS).dropna()
    r = float(np.corrcoef(df.income, df.spend)[0, 1])  # by hand, over crm.csv's rows with both recorded
    name = f"spec-{uuid.uuid4().hex[:8]}"
    script = register_script(name, Script())
    llm = LLM(LLMConfig(default={"provider": "scripted", "model": name}, cache=False), home=tmp_path / "home")
    slipped = {**spec(name="corr", quantity="correlation", scale="coefficient", decimals=4).model_dump(mode="json"),
               "measure": {"variable": "income", "description": "income", "unit": "USD",
                           "files": ["data/crm.csv", "data/crm_old.csv"]}}
    script.queue(slipped, slipped, slipped)
    code = "import pandas as pd\ndf = pd.read_csv('crm.csv')\nprint('RESULT corr =', df.income.corr(df.spend))"
    out = await write_answer_spec(llm, goal="correlation of income and spend", script=code, name="corr", value=r,
                                  files=["data/crm.csv", "data/crm_old.csv"], root=root)
    assert out.value is not None and out.value.measure.files == ["data/crm.csv"]
    assert out.value.x.variable == "spend" and out.errors[-1].startswith("the last spec was repaired from the data")
    llm.close()
    unregister_script(name)


def test_a_window_the_script_never_applied_is_widened_to_the_rows_it_used(tmp_path: Path) -> None:
    """v11's mean_business: "before 2023-12-31" (the end is exclusive) for a script that kept every order of
    orders_2023.csv, three of them dated 31 December."""
    from worldsmith.evolution.spec_check import unwindowed

    (tmp_path / "data").mkdir()
    orders = pd.DataFrame({"date": ["2023-01-02", "2023-06-30", "2023-12-31", "2023-12-31"],
                           "basket_size": [1, 2, 6, 7]})
    orders.to_csv(tmp_path / "data" / "orders_2023.csv", index=False)
    year = spec(measure={"variable": "basket_size", "description": "basket", "files": ["data/orders_2023.csv"],
                         "unit": "count"},
                window={"column": "date", "start": "2023-01-01", "end": "2023-12-31"})
    script = "import pandas as pd\ndf = pd.read_csv('data/orders_2023.csv')  # the 2023 date range\n" \
             "print('RESULT mean =', df['basket_size'].mean())"
    widened = unwindowed(year, script, tmp_path)
    assert (str(widened.window.start), str(widened.window.end)) == ("2023-01-01", "2024-01-01")
    assert spec_value(widened, tmp_path)[0] == pytest.approx(orders.basket_size.mean())  # 4.0, as the script
    assert spec_value(year, tmp_path)[0] == pytest.approx(1.5)  # as it was written: the two December orders out
    # a script that names the column may filter on it: the rows it leaves out are not widened to; but an end on a
    # month's last day with rows on it is that day included, whatever the script (v11's script filtered with
    # `df["date"].str.startswith("2023")`, the spec still said "before 2023-12-31")
    filtering = script.replace("df = pd.read_csv('data/orders_2023.csv')",
                               "df = pd.read_csv('data/orders_2023.csv')\ndf = df[df['date'].str.startswith('2023')]")
    assert unwindowed(year, filtering, tmp_path).window.end.isoformat() == "2024-01-01"
    mid = spec(measure=year.measure.model_dump(), window={"column": "date", "start": "2023-01-01",
                                                          "end": "2023-06-30"})
    assert unwindowed(mid, filtering, tmp_path).window.end.isoformat() == "2023-07-01"  # June 30: rows on it
    early = spec(measure=year.measure.model_dump(), window={"column": "date", "start": "2023-01-01",
                                                            "end": "2023-06-15"})
    assert unwindowed(early, filtering, tmp_path) == early  # mid-month, script filters by date: as written
    # a window on a column of no dates is moved to the file's one date column (v11: "rows whose `region` is …")
    pd.DataFrame({**orders, "region": ["E", "N", "E", "S"]}).to_csv(tmp_path / "data" / "orders_2023.csv",
                                                                   index=False)
    on_region = spec(measure=year.measure.model_dump(), window={"column": "region", "start": "2023-01-01",
                                                                "end": "2023-12-31"})
    moved = unwindowed(on_region, filtering, tmp_path).window
    assert (moved.column, moved.start.isoformat(), moved.end.isoformat()) == ("date", "2023-01-01", "2024-01-01")
    # a window that leaves no row out is kept; a start after the first date moves back to that date
    whole = spec(measure=year.measure.model_dump(), window={"column": "date", "start": "2023-01-01",
                                                            "end": "2024-01-01"})
    assert unwindowed(whole, script, tmp_path) == whole
    late = spec(measure=year.measure.model_dump(), window={"column": "date", "start": "2023-03-01"})
    assert unwindowed(late, script, tmp_path).window.start.isoformat() == "2023-01-02"


def test_the_measure_is_recorded_only_in_the_files_that_hold_it(tmp_path: Path) -> None:
    from worldsmith.evolution.spec_check import holders

    (tmp_path / "data").mkdir()
    pd.DataFrame({"acct_ref": ["C-1"], "basket_size": [3]}).to_csv(tmp_path / "data" / "orders.csv", index=False)
    pd.DataFrame({"customer_id": ["c1"], "segment": ["business"]}).to_csv(tmp_path / "data" / "crm.csv", index=False)
    both = spec(measure={"variable": "basket_size", "description": "basket", "unit": "count",
                         "files": ["data/orders.csv", "data/crm.csv"]})
    assert holders(both, tmp_path).measure.files == ["data/orders.csv"]
    nowhere = spec(measure={**both.measure.model_dump(), "variable": "amount"})
    assert holders(nowhere, tmp_path) == nowhere  # no file holds it: left for the lint to name


def test_a_window_end_meant_as_its_last_day_is_moved_a_day_on_only_when_that_gives_the_number(root: Path) -> None:
    """v14's July 2024 mean: the writer ended the window on 2024-07-31, which a window leaves out, three times."""
    from worldsmith.evolution.spec_check import repaired

    meant = spec(name="mean_income", window={"column": "date", "start": "2023-01-01", "end": "2023-06-01"})
    # by hand: Jan 5 (100), Feb 1 (10), Mar 1 (blank) and, through the end date, Jun 1 (300)
    assert spec_value(meant, root)[0] == pytest.approx(55.0)
    fixed = repaired(meant, root, "mean_income", 410 / 3)
    assert fixed is not None and str(fixed.window.end) == "2023-06-02" and str(fixed.window.start) == "2023-01-01"
    assert spec_value(fixed, root)[0] == pytest.approx(410 / 3)
    assert repaired(meant, root, "mean_income", 999.0) is None  # a day later does not give it either


def test_a_memo_named_as_the_measures_file_is_a_problem_not_a_crash(root: Path) -> None:
    """v17: the writer named `data/memos/product_analytics.md` the measure's file; reading it as a table raised
    FileReadError and the whole target was dropped as a synthesis failure."""
    (root / "data" / "memos").mkdir()
    (root / "data" / "memos" / "crm.md").write_text("# Notes\n\n- From 2024-01-01, `income` is recorded in kUSD.\n")
    memo = spec(measure={"variable": "income", "description": "income", "files": ["data/memos/crm.md"],
                         "unit": "USD"})
    assert spec_value(memo, root) == (None, ["data/memos/crm.md is not a data file: name the table that records "
                                             "`income`"])
    assert spec_mismatch(memo, root, 200.0) == ["data/memos/crm.md is not a data file: name the table that records "
                                                "`income`"]
    (root / "data" / "broken.parquet").write_text("not parquet")  # a data file that cannot be read: unchecked
    broken = spec(measure={"variable": "income", "description": "income", "files": ["data/broken.parquet"],
                           "unit": "USD"})
    assert spec_value(broken, root) == (None, [])
