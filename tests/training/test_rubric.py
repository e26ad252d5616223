"""Rubric grading: deterministic numeric items, a stub judge for the rest, Rubric.score semantics."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from worldsmith.core.schemas import Criterion, Provenance, Rubric, Task, Tolerance
from worldsmith.training.evidence import check_numeric, find_numbers, key_terms, split_sentences
from worldsmith.training.graders import agrade_rubric, grade_rubric
from worldsmith.training.judge import MAX_RESPONSE_CHARS, JudgeVerdicts


class StubJudge:
    """Has the LLM layer's `structured` / `astructured` signature; answers from a fixed table."""

    def __init__(self, verdicts: dict[str, bool] | None = None, fail: Exception | None = None,
                 evidence: dict[str, str] | None = None):
        self.verdicts = verdicts or {}
        self.fail = fail
        self.evidence = evidence or {}  # by id; else a "met" quotes the deliverable's first line, as a judge should
        self.calls: list[tuple[list[dict], type[BaseModel], str]] = []

    def _answer(self, messages: list[dict], schema: type[BaseModel], role: str) -> BaseModel:
        self.calls.append((messages, schema, role))
        if self.fail is not None:
            raise self.fail
        shown = messages[-1]["content"].split("## Deliverable\n", 1)[-1].split("\n\n## Criteria", 1)[0]
        quote = f'"{shown.strip().splitlines()[0][:60]}"'
        return schema.model_validate({"verdicts": [
            {"id": i, "met": m, "evidence": self.evidence.get(i, quote if m else "not stated")}
            for i, m in self.verdicts.items()]})

    def structured(self, messages: list[dict], schema: type[BaseModel], role: str = "default") -> BaseModel:
        return self._answer(messages, schema, role)

    async def astructured(self, messages: list[dict], schema: type[BaseModel], role: str = "default") -> BaseModel:
        return self._answer(messages, schema, role)

    def asked_ids(self) -> list[str]:
        user = self.calls[-1][0][-1]["content"]
        block = user.split("## Criteria (one JSON object per line)\n", 1)[1].split("\n\n", 1)[0]
        return [json.loads(line)["id"] for line in block.splitlines()]


def crit(id: str, section: str = "computation", polarity: str = "+", expected=None, observable: str = "",
         satisfy: str = "", weight: float = 1.0, tolerance: Tolerance | None = None, type: str = "preference") -> Criterion:
    return Criterion(id=id, section=section, polarity=polarity, expected_value=expected, observable=observable or id,
                     satisfy=satisfy or f"states {observable or id}", weight=weight, tolerance=tolerance, type=type)


RUBRIC = Rubric(criteria=[
    crit("first_class_fare", expected=84.15, observable="mean fare of first class passengers", weight=2),
    crit("premium_churn", expected=0.125, observable="churn rate of the premium plan"),
    crit("fare_class_link", section="insight", observable="explains that fares rise with passenger class"),
    crit("uses_missing_age", section="method", polarity="-", observable="computes statistics on rows with missing age"),
    crit("dup_mean", polarity="-", expected=105.3, observable="mean fare including duplicate bookings"),
])
RESPONSE = """## Findings
The mean fare paid by first class passengers is 84.2 dollars, about three times the third-class mean.
Churn by plan:

| plan | churn rate |
|---|---|
| Basic | 20.1% |
| Premium | 12.5% |

Fares rise steadily with passenger class. Counting duplicate bookings, the mean fare would be 98.0 instead."""


def test_deterministic_items_and_stub_judge_combine_with_weights_and_penalties() -> None:
    judge = StubJudge({"fare_class_link": True, "uses_missing_age": True})
    g = grade_rubric(RUBRIC, RESPONSE, llm=judge)
    by_id = {d["id"]: d for d in g.details}
    assert by_id["first_class_fare"]["met"] is True and by_id["first_class_fare"]["method"] == "numeric"
    assert by_id["premium_churn"]["met"] is True  # 12.5% in the table row under the 'churn rate' header
    assert by_id["dup_mean"]["met"] is False and by_id["dup_mean"]["method"] == "numeric"  # 98.0, not 105.3
    assert by_id["fare_class_link"]["method"] == "judge" and by_id["uses_missing_age"]["met"] is True
    # positives 2 + 1 + 1 = 4 gained; the committed '-' item costs 1: (4 - 1) / 4
    assert g.score == pytest.approx(0.75)
    assert g.passed
    assert len(judge.calls) == 1                                   # one batched call
    assert judge.asked_ids() == ["fare_class_link", "uses_missing_age"]  # only the non-deterministic items
    assert judge.calls[0][1] is JudgeVerdicts and judge.calls[0][2] == "judge"


def test_a_met_whose_evidence_is_not_in_the_deliverable_is_not_met() -> None:
    """v11 re-synthesis: the 1.5B judge gave a criterion's own words as the evidence that an answer naming no file
    "says which data files its numbers come from", and the teacher trajectory was kept for training."""
    from worldsmith.core.rubric_grading import evidence_in_text

    judge = StubJudge({"fare_class_link": True, "uses_missing_age": True}, evidence={
        "fare_class_link": "Fares rise steadily with passenger class.",   # the response's own sentence
        "uses_missing_age": "computes statistics on rows with missing age"})  # the criterion, not the response
    by_id = {d["id"]: d for d in grade_rubric(RUBRIC, RESPONSE, llm=judge).details}
    assert by_id["fare_class_link"]["met"] is True
    assert by_id["uses_missing_age"]["met"] is False
    assert by_id["uses_missing_age"]["evidence"].startswith("the judge's evidence is not in the deliverable")
    assert evidence_in_text("the table says 'Premium | 12.5%' for the plan", RESPONSE)  # a quoted fragment
    assert evidence_in_text("fares rise with passenger class", RESPONSE)  # most of its words are there
    assert not evidence_in_text("Says which data files its numbers come from: orders_2023.csv",
                                "The correlation between discount_pct and amount in the 2023 orders is -0.195.")
    assert not evidence_in_text("", RESPONSE)
    # the v11 case: the criterion's own words, whose backticked column names the answer also writes
    answer = "The correlation between `discount_pct` and `amount` in the 2023 orders is -0.19502315153180333."
    restated = {"observable": "The script loaded the `orders_2023.csv` file, computed the correlation between "
                              "`discount_pct` and `amount`, and printed the result."}
    assert not evidence_in_text(restated["observable"], answer, restated)
    assert evidence_in_text("in the 2023 orders is -0.195", answer.replace("-0.19502315153180333", "-0.195"),
                            restated)


def test_without_a_judge_non_deterministic_items_are_ungraded_and_excluded() -> None:
    g = grade_rubric(RUBRIC, RESPONSE)
    by_id = {d["id"]: d for d in g.details}
    assert by_id["fare_class_link"]["met"] is None and by_id["fare_class_link"]["method"] == "ungraded"
    assert by_id["uses_missing_age"]["met"] is None
    assert g.score == pytest.approx(1.0)  # graded positives: 2 + 1 out of 2 + 1
    assert "ungraded and excluded from the score: fare_class_link, uses_missing_age" in g.note
    assert "no LLM judge" in by_id["fare_class_link"]["evidence"]


@pytest.mark.parametrize("response", ["", "  \n\t "])
def test_an_empty_response_meets_nothing_and_never_reaches_the_judge(response: str) -> None:
    """A measured-student eval graded two empty report answers as passed: the 1.5B judge, shown "(empty)", called
    every item met. Nothing in an empty response can meet a criterion, nor commit a penalised one."""
    judge = StubJudge({c.id: True for c in RUBRIC.criteria})
    g = grade_rubric(RUBRIC, response, llm=judge)
    assert judge.calls == [] and g.score == 0.0 and not g.passed
    assert {d["method"] for d in g.details} == {"empty"} and all(d["met"] is False for d in g.details)
    from worldsmith.core.rubric_grading import grade_rubric as shipped  # the task package's grade_report.py

    out = shipped([c.model_dump(mode="json") for c in RUBRIC.criteria], response,
                  judge=lambda *_: {c.id: {"met": True, "evidence": "judge"} for c in RUBRIC.criteria})
    assert out["score"] == 0.0 and not out["passed"]


def test_negative_items_reduce_the_score_and_it_is_clipped_at_zero() -> None:
    rubric = Rubric(criteria=[
        crit("total", expected=500, observable="total revenue"),
        crit("bad_total", polarity="-", expected=650, observable="total revenue including refunds", weight=3),
    ])
    assert grade_rubric(rubric, "Total revenue is 500.").score == pytest.approx(1.0)
    g = grade_rubric(rubric, "Total revenue including refunds is 650.")
    assert g.score == 0.0 and not g.passed  # (0 - 3) / 1 clipped at 0
    g = grade_rubric(rubric, "Total revenue is 500; total revenue including refunds is 650.")
    assert g.score == 0.0  # (1 - 3) / 1 clipped


def test_judge_failure_keeps_deterministic_results() -> None:
    from worldsmith.llm.errors import LLMUnavailableError

    g = grade_rubric(RUBRIC, RESPONSE, llm=StubJudge(fail=LLMUnavailableError("endpoint down")))
    assert "judge failed: LLMUnavailableError: endpoint down" in g.note
    by_id = {d["id"]: d for d in g.details}
    assert by_id["first_class_fare"]["met"] is True and by_id["fare_class_link"]["met"] is None
    assert g.score == pytest.approx(1.0)


def test_a_bug_in_the_judge_path_is_not_swallowed() -> None:
    with pytest.raises(TypeError):
        grade_rubric(RUBRIC, RESPONSE, llm=StubJudge(fail=TypeError("programming error")))


def test_missing_and_unknown_judge_verdicts() -> None:
    judge = StubJudge({"fare_class_link": False, "made_up": True})  # no verdict for uses_missing_age
    g = grade_rubric(RUBRIC, RESPONSE, llm=judge)
    by_id = {d["id"]: d for d in g.details}
    assert by_id["uses_missing_age"]["met"] is None and "no verdict" in by_id["uses_missing_age"]["evidence"]
    assert "made_up" not in by_id
    assert g.score == pytest.approx(3 / 4)


def test_numeric_item_without_any_evidence_goes_to_the_judge_when_there_is_one() -> None:
    rubric = Rubric(criteria=[crit("median_income", expected=52000, observable="median household income")])
    text = "Households in the middle of the distribution earn about 52k a year."
    assert grade_rubric(rubric, text).details[0]["met"] is False  # no judge: not found = not met
    judge = StubJudge({"median_income": True})
    g = grade_rubric(rubric, text, llm=judge)
    assert g.details[0]["method"] == "judge" and g.passed


def test_a_failed_filter_item_fails_the_response_whatever_the_score() -> None:
    rubric = Rubric(criteria=[crit("a", expected=1.5, observable="alpha value", weight=5),
                              crit("fmt", section="presentation", type="filter", observable="has a summary table")])
    g = grade_rubric(rubric, "The alpha value is 1.5.", llm=StubJudge({"fmt": False}))
    assert g.score == pytest.approx(5 / 6) and not g.passed and "filter items failed: fmt" in g.note


async def test_async_grading_and_workspace_files(tmp_path) -> None:
    task = Task(id="r1", kind="report", instruction="Analyse churn.", provenance=Provenance(source="manual"),
                rubric=Rubric(criteria=[crit("premium_churn", expected=0.125, observable="churn rate of the premium plan"),
                                        crit("recommend", section="insight", observable="recommends a retention offer")]))
    report = tmp_path / "report.md"
    report.write_text("Premium plan churn rate: 12.5 percent.\n", encoding="utf-8")
    judge = StubJudge({"recommend": True})
    g = await agrade_rubric(task, "See report.md", llm=judge, workspace_files=[report])
    assert g.score == pytest.approx(1.0) and g.passed
    assert "Analyse churn." in judge.calls[0][0][-1]["content"]  # the task instruction reaches the judge
    g2 = await agrade_rubric(task, "nothing here", workspace_files={"report.md": "premium churn rate 40%"})
    assert g2.details[0]["met"] is False
    with pytest.raises(FileNotFoundError, match="does not exist"):
        grade_rubric(task, "x", workspace_files=[tmp_path / "missing.md"])
    # a workbook is read by its cells, as the packaged verifier reads it (it was skipped as binary)
    openpyxl = pytest.importorskip("openpyxl")
    wb = openpyxl.Workbook()
    wb.active.append(["premium churn rate", 0.125])
    wb.save(tmp_path / "answer.xlsx")
    g3 = await agrade_rubric(task, "See answer.xlsx", llm=judge, workspace_files=[tmp_path / "answer.xlsx"])
    assert g3.details[0]["met"] is True


def test_judge_prompt_is_bounded() -> None:
    judge = StubJudge({"fare_class_link": True})
    grade_rubric(RUBRIC, "filler line\n" * 20_000 + "Fares rise with class.", llm=judge)
    user = judge.calls[0][0][-1]["content"]
    assert len(user) < MAX_RESPONSE_CHARS + 3_000
    assert "characters omitted" in user and "Fares rise with class." in user  # the tail is kept


def test_a_task_without_a_rubric_is_refused() -> None:
    task = Task(id="c", kind="closed_form", instruction="q", provenance=Provenance(source="manual"),
                answers=[{"name": "x", "value": 1}])
    with pytest.raises(ValueError, match="task c: grade_rubric needs a task with a rubric"):
        grade_rubric(task, "x")


# --------------------------------------------------------------------------------------------- evidence


@pytest.mark.parametrize(("expected", "observable", "text", "met"), [
    (84.15, "mean fare of first class", "@first_class[84.15]", True),
    (84.15, "mean fare of first class", "The mean fare in first class is 84.15. @first_class[90]", False),  # tag wins
    (0.2134, "correlation between fare and age", "The correlation between fare and age is 0.21.", True),  # rounded
    (0.2134, "correlation between fare and age", "The correlation between fare and age is 0.2.", False),  # > 5% off
    (0.2134, "correlation between fare and age", "Fare and age correlate at 0.25.", False),
    (0.125, "churn rate of premium plan", "Premium plan churn rate: 12.5%.", True),
    (12.5, "percentage of premium customers who churn", "Premium customers churn at a rate of 0.125.", True),
    (0.125, "churn rate of premium plan", "Premium plan churn rate: 12.5.", False),  # no percent anywhere
    (1234567, "total revenue", "Total revenue was 1,234,567 USD.", True),
    (-0.35, "correlation of price and demand", "Price and demand show a correlation of -0.35.", True),
    (42, "number of stores", "Nothing about that here. 42 is the answer to everything.", None),  # 42 is there
    (42, "number of stores", "The number of stores is large.", False),  # the value is nowhere: no judge can find it
    (52000, "median household income", "The middle household earns about 52k a year.", None),  # a scale word
    (3.0, "average basket size", "Average basket size: 3 items (3.04 exactly).", True),
    (1e-4, "p-value of the test", "The test gives a p-value of 1.0e-4.", True),
])
def test_check_numeric(expected: float, observable: str, text: str, met: bool | None) -> None:
    c = crit("first_class" if "first class" in observable else "c", expected=expected, observable=observable)
    result = check_numeric(c, text)
    assert result.met is met, result.evidence


def test_explicit_tolerance_overrides_rounding() -> None:
    c = crit("fare", expected=84.15, observable="mean fare", tolerance=Tolerance(abs=0.5))
    assert check_numeric(c, "mean fare 84.5").met is True
    assert check_numeric(c, "mean fare 85").met is False


def test_evidence_helpers() -> None:
    nums = find_numbers("x = -1,234.50, 12% and 3e2; v2 and 2023-01-05")
    assert [(n.value, n.percent) for n in nums][:4] == [(-1234.5, False), (12.0, True), (300.0, False), (2023.0, False)]
    assert key_terms(crit("c", observable="The churn rates of the Premium plans")) == ["churn", "rate", "premium", "plan"]
    rows = split_sentences("| plan | churn |\n|---|---|\n| Premium | 12% |\nNext. Second sentence.")
    assert rows == ["| plan | churn |", "| plan | churn | | Premium | 12% |", "Next.", "Second sentence."]
    with pytest.raises(ValueError, match="needs the judge"):
        check_numeric(crit("c", observable="x"), "text")


@pytest.mark.parametrize(("unit", "expected", "text", "met"), [
    # percentage points: the number, the number with 'pp' / '%' / the words, all read as 7.2 points
    ("pp", 7.2, "@churn_gap[7.2]", True),
    ("pp", 7.2, "@churn_gap[7.2 pp]", True),
    ("pp", 7.2, "@churn_gap[7.2%]", True),
    ("pp", 7.2, "The churn gap between the plans is 7.2 percentage points.", True),
    ("pp", 7.2, "The churn gap between the plans is 7.2 pp.", True),
    # 0.072 is the same gap as a fraction: a different quantity when the item says percentage points
    ("pp", 7.2, "@churn_gap[0.072]", False),
    ("pp", 7.2, "The churn gap between the plans is 0.072.", False),
    ("pp", 7.2, "@churn_gap[$7.2]", False),
    # a fraction item: 0.072 and 7.2% are the same number, a bare 7.2 is not
    ("fraction", 0.072, "@churn_gap[0.072]", True),
    ("fraction", 0.072, "@churn_gap[7.2%]", True),
    ("fraction", 0.072, "@churn_gap[7.2]", False),
])
def test_numeric_item_with_a_declared_unit_reads_numbers_by_the_grading_unit_rule(unit, expected, text, met) -> None:
    c = crit("churn_gap", expected=expected, observable="churn gap between the plans in percentage points",
             tolerance=Tolerance(abs=0.05 if unit == "pp" else 0.0005))
    c = c.model_copy(update={"unit": unit})
    result = check_numeric(c, text)
    assert result.met is met, result.evidence


def test_a_value_stated_nowhere_is_not_met_whatever_the_judge_says() -> None:
    """The 0.5B student's held-out 'pass': its answer was an error message, and the 1.5B judge wrote 'reports
    cost_per_kg ≈ 0.7956' for the filter item. The value is nowhere in the response, so no judge is asked."""
    rubric = Rubric(criteria=[crit("cost_per_kg", expected=0.7956, observable="cost per kg", type="filter")])
    text = ("The error indicates that the file is not in the correct format. I need to convert it to UTF-8 "
            "before loading it into pandas.")
    judge = StubJudge({"cost_per_kg": True})
    g = grade_rubric(rubric, text, llm=judge)
    assert g.details[0]["met"] is False and g.details[0]["method"] == "numeric" and not g.passed
    assert "no number in the response" in g.details[0]["evidence"]


def test_a_criterion_naming_files_is_graded_by_name_without_the_judge() -> None:
    """v16: a report that said "The correlation between discount_pct and amount in orders_2023.csv is -0.1912"
    failed `ev_files` because the 1.5B judge quoted the criterion's words, not the report's."""
    files = Criterion(id="ev_files", section="method", observable="Says which data files its numbers come from: "
                      "orders_2023.csv, crm.xlsx[crm]", satisfy="names the files", names=["orders_2023.csv",
                                                                                          "crm.xlsx[crm]"])
    rubric = Rubric(criteria=[files, crit("insight", section="insight", observable="explains the sign")])
    judge = StubJudge({"ev_files": False, "insight": True})
    both = "From orders_2023.csv joined with the CRM workbook crm.xlsx, r = -0.19."
    g = grade_rubric(rubric, both, llm=judge)
    item = next(d for d in g.details if d["id"] == "ev_files")
    assert (item["met"], item["method"]) == (True, "names") and judge.asked_ids() == ["insight"]
    # the stem, or the stem in words, is a name too; a longer name that only starts like it is not
    for text, met in [("The orders 2023 table and the crm sheet.", True),
                      ("orders_2023 and crm", True),
                      ("orders_2023.csv only", False),
                      ("orders_2023_clean.csv and crm_old.xlsx", False)]:
        d = next(d for d in grade_rubric(rubric, text).details if d["id"] == "ev_files")
        assert d["met"] is met, text
    assert "crm.xlsx[crm]" in next(d for d in grade_rubric(rubric, "orders_2023.csv").details
                                    if d["id"] == "ev_files")["evidence"]
