"""The analyst's answer-form checks use each sub-answer's own requested decimals (from its format clause)."""

from __future__ import annotations

import pytest

from worldsmith.agents.analyst import answer_problems, round_to_request

TWO_CLAUSES = ('Question: describe the fares.\n@mean[mean_value] where "mean_value" is a number rounded to two decimal '
               'places. @std[std_value] where "std_value" is a number rounded to four decimal places.')


def test_each_sub_answer_is_checked_against_its_own_clause() -> None:
    assert answer_problems("@mean[32.20] @std[49.6934]", TWO_CLAUSES, ["mean", "std"]) == []
    assert answer_problems("@mean[32.2042] @std[49.6934]", TWO_CLAUSES, ["mean", "std"]) == [
        "@mean[32.2042] has more than the 2 decimal places requested"]
    assert answer_problems("@mean[32.20] @std[49.69342]", TWO_CLAUSES, ["mean", "std"]) == [
        "@std[49.69342] has more than the 4 decimal places requested"]


def test_rounding_uses_each_sub_answers_decimals() -> None:
    assert round_to_request("@mean[32.2042] @std[49.693421]", TWO_CLAUSES, ["mean", "std"]) == \
        "@mean[32.20] @std[49.6934]"
    assert round_to_request("@mean[32.20] @std[49.6934]", TWO_CLAUSES, ["mean", "std"]) is None


def test_a_name_without_a_decimal_request_is_left_alone() -> None:
    fmt = '@count[n] where "n" is an integer. @ratio[r] where "r" is rounded to three decimal places.'
    assert answer_problems("@count[12.5] @ratio[0.12345]", fmt, ["count", "ratio"]) == [
        "@ratio[0.12345] has more than the 3 decimal places requested"]
    assert round_to_request("@count[12.5] @ratio[0.12345]", fmt, ["count", "ratio"]) == "@count[12.5] @ratio[0.123]"


def test_missing_and_empty_tags_are_still_reported() -> None:
    assert answer_problems("@mean[]", TWO_CLAUSES, ["mean", "std"]) == ["@std[value] is missing", "@mean[] is empty"]


def test_a_question_without_tags_uses_its_one_decimal_request_for_the_names() -> None:
    q = "What is the mean amount? Round it to one decimal place."
    assert round_to_request("@mean_amount[20.1234]", q, ["mean_amount"]) == "@mean_amount[20.1]"


def test_missing_columns_names_the_datas_spelling_from_pandas_own_messages() -> None:
    import pandas as pd

    from worldsmith.agents.analyst import missing_columns

    cols = ["PassengerId", "Fare", "Age", "total_amount"]
    df = pd.DataFrame(columns=cols)
    messages = []
    for lookup in (lambda: df["fare"], lambda: df[["fare", "age"]], lambda: df[["totl_amount"]],
                   lambda: df["shoe_size"], lambda: df.loc[:, "passengerid"]):
        with pytest.raises(KeyError) as err:
            lookup()
        messages.append(str(err.value))
    assert [missing_columns(m, cols) for m in messages] == [
        [("fare", ["Fare"])],
        [("fare", ["Fare"]), ("age", ["Age"])],
        [("totl_amount", ["total_amount"])],
        [],  # near no column: no hint
        [("passengerid", ["PassengerId"])],
    ]
    assert missing_columns("'Fare'", cols) == []  # an existing column raised for another reason: no hint


def test_the_answer_lines_placeholder_copied_into_the_brackets_is_a_form_problem() -> None:
    # a world task's answer line, and the two copies the generated benchmark saw (graded as no number at all)
    q = "Round to 1 decimal place.\nEnd your answer with @female_prior[value in points, e.g. 12.3]"
    assert answer_problems("@female_prior[61.40277777777778 in points, e.g. 12.3]", q, ["female_prior"]) == [
        "@female_prior[61.40277777777778 in points, e.g. 12.3] repeats the placeholder's words; put only the value "
        "inside the brackets"]
    assert answer_problems("@r[(unitless, between -1 and 1), e.g. 0.43]", "@r[value, e.g. 0.43]", ["r"])
    assert answer_problems("@r[value]", "@r[value]", ["r"])
    assert answer_problems("@female_prior[61.4]", q, ["female_prior"]) == []
    assert answer_problems("@label[values in range]", "@label[text]", ["label"]) == []  # a real text answer
