"""Combined conditions rewritten as pandas wants them: each rewrite is run against plain pandas, where the line as
the model wrote it raises."""

from __future__ import annotations

import pandas as pd
import pytest

from worldsmith.agents.conditions import parenthesized

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
