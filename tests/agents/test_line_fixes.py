"""Combined conditions rewritten as pandas wants them: each rewrite is run against plain pandas, where the line as
the model wrote it raises."""

from __future__ import annotations

import pandas as pd
import pytest

from worldsmith.agents.line_fixes import parenthesized

CRM = pd.DataFrame({"segment": ["consumer", "consumer", "business"], "income": [10.0, 30.0, 50.0],
                    "vip": [True, False, True]})


@pytest.mark.parametrize(("written", "rows"), [
    # v15's validator check: the consumers over a threshold
    ('x = crm[crm["segment"] == "consumer" & crm["income"] > 20]', [1]),
    # three conditions, one chain
    ('x = crm[crm.segment == "consumer" & crm.income > 5 & crm.income < 20]', [0]),
    # `|`, and a boolean column as the last operand
    ('x = crm[crm.segment == "business" | crm.vip]', [0, 2]),
    # `and` inside `.loc[...]`
    ('x = crm.loc[(crm.income > 5) and (crm.segment == "business")]', [2]),
])
def test_the_rewritten_line_runs_where_the_written_one_raises(written: str, rows: list[int]) -> None:
    with pytest.raises((TypeError, ValueError)):
        exec(written, {"crm": CRM})  # noqa: S102
    [fixed] = parenthesized(written)
    scope: dict = {"crm": CRM}
    exec(fixed, scope)  # noqa: S102
    assert scope["x"].index.tolist() == rows


def test_only_statements_that_need_it_are_shown_and_at_most_two() -> None:
    code = ("import pandas as pd\n"
            "ok = crm[(crm.income > 1) & (crm.vip)]\n"
            "for s in ['consumer', 'business']:\n"
            "    part = crm[crm.segment == s & crm.vip]\n"
            "    print(part.income.mean())\n"
            "a = crm[crm.income > 1 & crm.vip]\n"
            "b = crm[crm.income > 2 & crm.vip]\n"
            "if ok.empty and a.empty:\n"
            "    print('none')\n")
    assert parenthesized(code) == ["part = crm[(crm.segment == s) & crm.vip]", "a = crm[(crm.income > 1) & crm.vip]"]
    assert parenthesized("y = (crm.income > 1) & (crm.vip)\nprint(y and 1)") == []
    assert parenthesized("x = crm[crm.income > 1 &") == []  # does not parse: nothing to show


def test_an_inplace_fill_on_one_column_is_assigned_back_and_then_fills() -> None:
    """pandas 3 (Copy-on-Write) leaves `df` unfilled after `df["col"].fillna(v, inplace=True)` and only warns; a
    DABench preprocessing answer was computed from the unfilled column. The rewritten lines fill it."""
    import warnings

    from worldsmith.agents.line_fixes import assigned_back

    raw = pd.DataFrame({"LoanAmount": [100.0, None, 300.0], "Self_Employed": ["Yes", None, "No"],
                        "Age": [None, 30.0, 40.0]})
    cell = ('df["Self_Employed"].fillna("No", inplace=True)\n'
            'df["LoanAmount"].fillna(df["LoanAmount"].median(), inplace=True)\n'
            "df.Age.fillna(0, inplace=True)\n"
            "df.dropna(inplace=True)\n"  # a whole-frame method in place works: left alone
            'print(df["LoanAmount"].mean())')
    written = {"df": raw.copy()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(cell.rsplit("\n", 2)[0], written)  # noqa: S102  (the fills as written)
    assert written["df"]["LoanAmount"].isna().sum() == 1  # unchanged under Copy-on-Write
    lines = assigned_back(cell)
    assert lines == ["df['Self_Employed'] = df['Self_Employed'].fillna('No')",
                     "df['LoanAmount'] = df['LoanAmount'].fillna(df['LoanAmount'].median())",
                     "df['Age'] = df['Age'].fillna(0)"]
    fixed = {"df": raw.copy()}
    exec("\n".join(lines), fixed)  # noqa: S102
    assert fixed["df"]["LoanAmount"].tolist() == [100.0, 200.0, 300.0]  # the median of 100 and 300
    assert fixed["df"]["Self_Employed"].tolist() == ["Yes", "No", "No"] and fixed["df"]["Age"].tolist()[0] == 0
    assert assigned_back("df.fillna(0, inplace=True)\ndf['a'].fillna(0)") == []


RIDES = pd.DataFrame({"vehicle_type": ["XL", "ECO", "XL", "ECO"], "fare": [30.0, 10.0, 34.0, 12.0]})


@pytest.mark.parametrize("cell", [
    # generated-v1 at eb32daa: one group kept in `df`, the other looked for among its rows
    'df = df[df["vehicle_type"] == "XL"]\neco = df[df["vehicle_type"] == "ECO"]\ngap = df["fare"].mean() - eco["fare"].mean()',
    # attribute access, != and a one-value isin count as tests of the column too
    'df = df[df.vehicle_type == "XL"]\neco = df[df.vehicle_type != "XL"]\ngap = df.fare.mean() - eco.fare.mean()',
    'df = df[(df["vehicle_type"] == "XL") & (df["fare"] > 0)]\neco = df[df["vehicle_type"].isin(["ECO"])]\n'
    'gap = df["fare"].mean() - eco["fare"].mean()',
])
def test_a_frame_cut_to_one_group_then_filtered_for_another_is_flagged(cell: str) -> None:
    from worldsmith.agents.line_fixes import refiltered

    assert refiltered(cell) == ("df", "vehicle_type")
    scope: dict = {"df": RIDES.copy()}
    exec(cell, scope)  # noqa: S102
    assert pd.isna(scope["gap"])  # the second group is empty as written: the slip the note is about
    # the note's form, each group in a new name, gives the gap plain pandas gives: 32 - 11
    kept = RIDES[RIDES["vehicle_type"] == "XL"]["fare"].mean() - RIDES[RIDES["vehicle_type"] == "ECO"]["fare"].mean()
    assert kept == pytest.approx(21.0)


@pytest.mark.parametrize("cell", [
    'a = df[df["vehicle_type"] == "XL"]\nb = df[df["vehicle_type"] == "ECO"]',  # new names: nothing cut
    'df = df[df["vehicle_type"] == "XL"]\nprint(df[df["fare"] > 31])',  # a further filter on another column is fine
    'df = df.dropna()\nx = df[df["vehicle_type"] == "XL"]',  # no filter replaced `df` before the comparison
    'df = df[df["vehicle_type"] == "XL"',  # does not parse
    # first cut to several groups or a window, then split: both groups are still there (DABench's titanic
    # classes, generated-v1's urban/rural and before/after a date, all answered right this way)
    'df = df[df["vehicle_type"].isin(["XL", "ECO"])]\nx = df[df["vehicle_type"] == "XL"]\ne = df[df["vehicle_type"] == "ECO"]',
    'df = df[(df["vehicle_type"] == "XL") | (df["vehicle_type"] == "ECO")]\ne = df[df["vehicle_type"] == "ECO"]',
    'df = df[(df["fare"] >= 10) & (df["fare"] < 40)]\nhi = df[df["fare"] >= 30]',
    'df = df[df["vehicle_type"] == "XL"]\nx = df[df["vehicle_type"] == "XL"]',  # the same group again: no loss
])
def test_a_cell_that_keeps_its_groups_apart_is_not_flagged(cell: str) -> None:
    from worldsmith.agents.line_fixes import refiltered

    assert refiltered(cell) is None
