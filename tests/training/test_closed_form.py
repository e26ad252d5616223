"""Closed-form grading: a golden table for the official DABench rule and for the tolerant rule."""

from __future__ import annotations

import pytest

from worldsmith.core.schemas import AnswerSpec, Provenance, Task, Tolerance
from worldsmith.training.graders import grade_closed_form


def _task(*answers: AnswerSpec, strict_meta: bool | None = None) -> Task:
    meta = {} if strict_meta is None else {"strict_grading": strict_meta}
    return Task(id="t", kind="closed_form", instruction="q", answers=list(answers),
                provenance=Provenance(source="manual"), metadata=meta)


# Official rule (InfiAgent eval_closed_form.py): response == label, or |float(response) - float(label)| < 1e-6.
STRICT = [
    ("34.65", "@x[34.65]", True),
    ("34.65", "@x[34.650]", True),           # same number
    ("34.65", "@x[34.6500001]", True),       # 1e-7 away: within 1e-6
    ("34.65", "@x[34.65001]", False),        # 1e-5 away
    ("34.65", "@x[34.651]", False),
    ("34.65", "@x[34.66]", False),
    ("34.65", "@x[ 34.65 ]", True),          # spaces: float() ignores them
    ("34.65", "@x[34.65%]", False),          # not a float, not the same string
    ("1234", "@x[1,234]", False),            # thousands separator is not a float
    ("0.21", "@x[0.2100000]", True),
    ("-0.5", "@x[-.5]", True),
    ("0.001", "@x[1e-3]", True),
    ("Male", "@x[Male]", True),
    ("Male", "@x[male]", False),             # strings: exact
    ("Male", "@x[Male.]", False),
    ("34.65", "The mean fare is 34.65.", False),  # no tag at all
    ("34.65", "@x[1] first guess, final: @x[34.65]", True),   # repeated name: the last one wins
    ("34.65", "@x[34.65] first, then changed to @x[1]", False),
    ("34.65", "@y[34.65]", False),           # wrong name
]


@pytest.mark.parametrize(("label", "response", "ok"), STRICT)
def test_official_dabench_rule(label: str, response: str, ok: bool) -> None:
    g = grade_closed_form(_task(AnswerSpec(name="x", value=label)), response, strict=True)
    assert g.passed is ok
    assert g.score == (1.0 if ok else 0.0)
    assert g.details[0]["correct"] is ok and g.details[0]["expected"] == label


TOLERANT = [
    ("Male", None, "@x[male]", True),                 # normalised strings
    ("New York", None, "@x[ new  york. ]", True),
    (1234, None, "@x[1,234]", True),                  # thousands separator
    (1200, None, "@x[$1,200]", True),                 # currency
    (0.3465, None, "@x[34.65%]", True),               # percent of a fraction
    (12, None, "@x[12%]", True),                      # the label kept the percent number
    (0.12, None, "@x[12]", False),                    # a bare 12 is not 0.12
    (34.65, None, "@x[34.651]", False),               # default tolerance is 1e-6
    (34.65, Tolerance(abs=0.01), "@x[34.655]", True),
    (34.65, Tolerance(abs=0.01), "@x[34.67]", False),
    (100, Tolerance(rel=0.03), "@x[102.9]", True),
    (100, Tolerance(rel=0.03), "@x[103.5]", False),
    (100, Tolerance(abs=0.5, rel=0.01), "@x[100.9]", True),  # either tolerance may accept
    ("1, 2, 3", None, "@x[[1,2,3]]", True),           # the tag stops at the first ']'; brackets are ignored
    ("1, 2, 3", None, "@x[1,2,4]", False),
    ("1, 2, 3", None, "@x[1,2,3]", True),             # lists compared element-wise
    ("a", None, "", False),
]


@pytest.mark.parametrize(("value", "tol", "response", "ok"), TOLERANT)
def test_tolerant_rule(value, tol, response: str, ok: bool) -> None:
    g = grade_closed_form(_task(AnswerSpec(name="x", value=value, tolerance=tol)), response, strict=False)
    assert g.passed is ok, g.details


def test_multi_answer_score_is_the_fraction_correct_and_passed_needs_all() -> None:
    task = _task(AnswerSpec(name="a", value="1"), AnswerSpec(name="b", value="2"), AnswerSpec(name="c", value="3"))
    g = grade_closed_form(task, "@a[1] @b[5]", strict=True)
    assert g.score == pytest.approx(1 / 3)
    assert not g.passed
    assert [d["correct"] for d in g.details] == [True, False, False]
    assert [d["got"] for d in g.details] == ["1", "5", None]
    assert "1/3 sub-answers correct" in g.note and "missing @c" in g.note


def test_strict_none_takes_the_tasks_own_rule() -> None:
    task = _task(AnswerSpec(name="x", value="1234"), strict_meta=True)
    assert not grade_closed_form(task, "@x[1,234]").passed          # official rule from metadata
    assert grade_closed_form(task, "@x[1,234]", strict=False).passed  # an explicit argument wins
    assert grade_closed_form(_task(AnswerSpec(name="x", value="1234")), "@x[1,234]").passed


def test_report_task_is_refused() -> None:
    from worldsmith.core.schemas import Criterion, Rubric

    task = Task(id="r", kind="report", instruction="q", provenance=Provenance(source="manual"),
                rubric=Rubric(criteria=[Criterion(id="c", section="insight", observable="o", satisfy="s")]))
    with pytest.raises(ValueError, match="task r: grade_closed_form needs a task with answers"):
        grade_closed_form(task, "@x[1]")


def test_a_declared_unit_is_honoured_by_the_tolerant_rule() -> None:
    share = _task(AnswerSpec(name="x", value=7.2, unit="percentage points"))
    assert grade_closed_form(share, "@x[7.2 pp]", strict=False).passed
    assert grade_closed_form(share, "@x[7.2%]", strict=False).passed
    assert not grade_closed_form(share, "@x[0.072]", strict=False).passed  # a fraction is another quantity
    fraction = _task(AnswerSpec(name="x", value=0.072, unit="fraction"))
    assert not grade_closed_form(fraction, "@x[7.2]", strict=False).passed
    assert grade_closed_form(fraction, "@x[7.2%]", strict=False).passed
