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
