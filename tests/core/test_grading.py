"""core/grading.py as a specification: the official DABench rule on the golden table, the tolerant rule and its
units, the one number parser, per-clause decimals and DABench's metric under both denominators."""

from __future__ import annotations

import pytest

from tests.core.golden import case_ids, golden_rows
from worldsmith.core.grading import (
    Outcome,
    dabench_accuracies,
    decimals_by_name,
    extract_answers,
    grade,
    grade_label,
    official_dabench,
    parse_number,
    tolerant,
)
from worldsmith.core.schemas import Tolerance


@pytest.mark.parametrize("row", golden_rows(), ids=case_ids())
def test_official_rule_matches_the_official_script_on_every_golden_line(row: dict) -> None:
    result = grade_label(row["label"], row["response"], rule="official")
    verdicts = {i["name"]: i["correct"] for i in result["items"]}
    expected = row["official_correct"]
    assert set(verdicts) == set(expected)
    for name, ok in expected.items():
        if ok is None:  # the official script leaves the response out: we flag it empty (and grade it wrong)
            assert result["empty"] and verdicts[name] is False
        else:
            assert verdicts[name] is ok, (name, row["response"])


def test_golden_table_is_the_full_table() -> None:
    rows = golden_rows()
    assert len(rows) == 52
    assert sum(len(r["official_correct"]) for r in rows) == 57


# The three documented differences between the old home-made "strict" rule and the official one.
def test_official_tolerance_is_strictly_less_than_1e_6() -> None:
    assert not official_dabench("0", "0.000001")
    assert official_dabench("0", "0.0000009")


def test_official_rule_does_not_strip_strings_but_float_ignores_spaces() -> None:
    assert not official_dabench("Male", " Male")
    assert official_dabench("34.65", " 34.65 ")


def test_official_extraction_keeps_a_value_on_one_line() -> None:
    assert extract_answers("@a[1\n@b[2]", official=True) == {"b": "2"}
    assert extract_answers("@a[1 @b[2]", official=True) == {"a": "1 @b[2"}
    # ours: a value may span lines, but an unclosed tag never swallows the next one
    assert extract_answers("@a[1\n@b[2]") == {"b": "2"}
    assert extract_answers("@x[314,\n577]") == {"x": "314,\n577"}


def test_official_rule_with_no_answer_or_non_numbers() -> None:
    assert not official_dabench("1", None)
    assert not official_dabench("1", "one")
    assert official_dabench(891, "891.0")  # a non-string label is compared as its string


# --------------------------------------------------------------------------------------------- numbers

@pytest.mark.parametrize(("text", "value"), [
    ("1,234.5", 1234.5), ("$3", 3.0), ("-$3", -3.0), ("12%", 0.12), (" 7 ", 7.0), ("'5'", 5.0), ("1e-3", 0.001),
    (".5", 0.5), ("1234 USD", 1234.0), (4, 4.0), (2.5, 2.5),
    ("1,2", None), ("1,2,3", None), ("1 2", None), ("3 kg", None), ("7.2 pp", None), ("abc", None), ("", None),
    (True, None), (None, None), ("1,2345", None), ("-$-3", None), ("$-3", -3.0), ("3 p.p.", None),
])
def test_parse_number(text: object, value: float | None) -> None:
    got = parse_number(text)
    assert got == (pytest.approx(value) if value is not None else None)


# --------------------------------------------------------------------------------------------- tolerance

@pytest.mark.parametrize(("abs_tol", "rel_tol", "expected", "got", "ok"), [
    (None, None, 1.0, 1.000001, True),        # default 1e-6, inclusive
    (None, None, 1.0, 1.0000021, False),
    (0.005, None, 34.65, 34.655, True),        # the boundary holds despite binary rounding
    (0.005, None, 34.65, 34.6551, False),
    (None, 0.03, 100.0, 103.0, True),          # relative to the expected value
    (None, 0.03, 100.0, 96.9, False),
    (None, 0.03, 0.0, 0.0001, False),          # relative tolerance of 0 is 0
    (0.5, 0.01, 100.0, 100.9, True),           # either one accepts
    (0.5, 0.01, 100.0, 101.1, False),
    (None, None, float("nan"), float("nan"), False),
])
def test_tolerance_rule_edges(abs_tol, rel_tol, expected: float, got: float, ok: bool) -> None:
    assert tolerant(abs_tol, rel_tol).numbers(expected, got) is ok
    assert Tolerance(abs=abs_tol, rel=rel_tol).accepts(expected, got) is ok  # the schema calls the same rule


@pytest.mark.parametrize(("expected", "got", "ok"), [
    ("Male", "male", True), ("New York", " new  york. ", True), (1234, "1,234", True), (1200, "$1,200", True),
    (0.3465, "34.65%", True), (12, "12%", True), (0.12, "12", False), ("1, 2, 3", "1,2,3", True),
    ("1, 2, 3", "[1, 2, 3]", True), ("1, 2, 3", "1,2,4", False), ("123", "1,2,3", False), (5, None, False),
])
def test_tolerant_rule_without_unit(expected: object, got: str | None, ok: bool) -> None:
    assert tolerant()(expected, got) is ok


@pytest.mark.parametrize(("unit", "expected", "got", "ok"), [
    ("percentage points", 7.2, "7.2", True), ("percentage points", 7.2, "7.2 pp", True),
    ("percentage points", 7.2, "7.2%", True), ("percent", 7.2, "7.2 percent", True),
    ("percent", 7.2, "0.072", False),          # a fraction is a different quantity
    ("percent", 7.2, "$7.2", False),
    ("percent", "7.2%", "7.2", True),
    ("fraction", 0.072, "0.072", True), ("fraction", 0.072, "7.2%", True),
    ("fraction", 0.072, "7.2", False), ("fraction", 0.072, "7.2 pp", False),
    ("USD", 1234.5, "$1,234.5", True), ("USD", 1234.5, "1234.5 USD", True), ("$", 1234.5, "1234.5", True),
    ("USD", 1234.5, "€1,234.5", False), ("USD", 1234.5, "1234.5%", False), ("EUR", 10, "10 euros", True),
    ("kg", 3, "3 kg", True), ("kg", 3, "3", True), ("kg", 3, "3 lb", False), ("days", 4, "4 days", True),
])
def test_unit_aware_equivalence(unit: str, expected: object, got: str, ok: bool) -> None:
    assert tolerant(unit=unit)(expected, got) is ok


def test_unit_and_tolerance_combine() -> None:
    assert tolerant(abs=0.05, unit="percent")(7.2, "7.24%")
    assert not tolerant(abs=0.05, unit="percent")(7.2, "7.3%")


# --------------------------------------------------------------------------------------------- grade()

def test_grade_uses_each_specs_tolerance_unit_and_rule() -> None:
    expected = [{"name": "a", "value": 100, "tolerance": {"rel": 0.01}}, {"name": "b", "value": 7.2, "unit": "pp"},
                {"name": "c", "value": "1234", "rule": "official"}]
    r = grade(expected, "@a[100.9] @b[7.2%] @c[1,234]")
    assert [i["correct"] for i in r["items"]] == [True, True, False]
    assert r["score"] == pytest.approx(2 / 3) and not r["passed"] and not r["empty"]


def test_grade_flags_empty_responses_only_when_truly_empty() -> None:
    spec = [{"name": "x", "value": "1"}]
    assert grade(spec, "")["empty"] and grade(spec, None)["empty"]
    assert not grade(spec, "  ")["empty"]  # the official script keeps a whitespace response (it is truthy)


def test_unknown_rule_is_an_error_naming_the_answer() -> None:
    with pytest.raises(ValueError, match="answer 'x': unknown grading rule 'loose'"):
        grade([{"name": "x", "value": 1}], "@x[1]", rule="loose")


# --------------------------------------------------------------------------------------------- metric

def test_official_and_conservative_denominators_on_a_hand_computed_set() -> None:
    outcomes = [
        Outcome(2, 2),              # q1: both right
        Outcome(1, 2),              # q2: one of two
        Outcome(0, 3, empty=True),  # q3: empty response
        Outcome(0, 1),              # q4: wrong
    ]
    acc = dabench_accuracies(outcomes)
    # official: q3 left out → 3 questions, 5 sub-answers
    assert acc["official"]["n"] == 3
    assert acc["official"]["by_question"] == pytest.approx(1 / 3)
    assert acc["official"]["by_sub_question"] == pytest.approx(3 / 5)
    assert acc["official"]["proportional"] == pytest.approx((1 + 0.5 + 0) / 3)
    # conservative: all 4 questions, 8 sub-answers
    assert acc["conservative"]["n"] == 4
    assert acc["conservative"]["by_question"] == pytest.approx(1 / 4)
    assert acc["conservative"]["by_sub_question"] == pytest.approx(3 / 8)
    assert acc["conservative"]["proportional"] == pytest.approx((1 + 0.5 + 0 + 0) / 4)


def test_denominators_with_nothing_to_count() -> None:
    acc = dabench_accuracies([Outcome(0, 1, empty=True)])
    assert acc["official"] == {"by_question": 0.0, "by_sub_question": 0.0, "proportional": 0.0, "n": 0}
    assert acc["conservative"]["n"] == 1 and acc["conservative"]["by_question"] == 0.0


def test_a_rubric_outcome_uses_its_own_proportional_value() -> None:
    acc = dabench_accuracies([Outcome(1, 1, fraction=0.8), Outcome(0, 1, fraction=0.4)])
    assert acc["official"]["proportional"] == pytest.approx(0.6)
    assert acc["official"]["by_question"] == pytest.approx(0.5)


# --------------------------------------------------------------------------------------------- decimals

@pytest.mark.parametrize(("text", "decimals"), [
    ('@mean[mean_value] where "mean_value" is a number rounded to two decimal places. '
     '@std[std_value] where "std_value" is a number rounded to four decimal places.', {"mean": 2, "std": 4}),
    ('@a[x_val] @b[y_val] where "x_val" is rounded to 2 decimal places and "y_val" to 3 decimal places.',
     {"a": 2, "b": 3}),
    ("@a[x] @b[y] where both are numbers rounded to two decimal places.", {"a": 2, "b": 2}),
    ('@count[n] where "n" is an integer. @ratio[r] where "r" is rounded to three decimal places.', {"ratio": 3}),
    ("Round all values to 1 decimal place. @a[x] @b[y]", {"a": 1, "b": 1}),
    ("Give the mean to 2 decimals and the std to 4 decimals. @mean[m] @std[s]", {}),  # ambiguous preamble
    ('Round to 2 decimal places. @a[x] where "x" is rounded to four decimal places. @b[y]', {"a": 4, "b": 2}),
    ("@a[x] where x is a string.", {}),
    ("@skew[float, rounded to two decimal places] @kurt[float, rounded to 3 decimal places].", {"skew": 2, "kurt": 3}),
    ("", {}),
])
def test_decimals_come_from_each_format_clause(text: str, decimals: dict[str, int]) -> None:
    assert decimals_by_name(text) == decimals


def test_decimals_for_names_when_the_text_has_no_tags() -> None:
    assert decimals_by_name("What is the mean? Round to three decimal places.", ["mean"]) == {"mean": 3}
