"""closed_form_reward: TRL's reward_func signature over the same comparators as eval and the verifiers."""

from __future__ import annotations

import pytest

from worldsmith.training.rewards import closed_form_reward

TWO = [{"name": "mean", "value": 2.5, "tolerance": {"abs": 0.01}}, {"name": "n", "value": 10}]

# (completion, answers, rule, reward), each reward worked out by hand
CASES = [
    ("@mean[2.5] @n[10]", TWO, None, 1.0),
    ("@mean[2.504] @n[10]", TWO, None, 1.0),                  # within the answer's own tolerance
    ("@mean[2.52] @n[10]", TWO, None, 0.5),
    ("@n[10]", TWO, None, 0.5),                               # a missing sub-answer scores nothing
    ("", TWO, None, 0.0),
    ("The mean is 2.5 and n is 10.", TWO, None, 0.0),         # no tags: nothing to grade
    ([{"role": "assistant", "content": "@mean[2.5] @n[11]"}], TWO, None, 0.5),   # conversational format
    ("@x[1,234]", [{"name": "x", "value": "1234"}], "tolerant", 1.0),
    ("@x[1,234]", [{"name": "x", "value": "1234"}], "official", 0.0),           # official: not a float
    ("@x[0.000001]", [{"name": "x", "value": "0"}], "official", 0.0),           # official: strict < 1e-6
    ("@share[7.2%]", [{"name": "share", "value": 0.072, "unit": "fraction"}], None, 1.0),
    ("@share[7.2]", [{"name": "share", "value": 0.072, "unit": "fraction"}], None, 0.0),
]


@pytest.mark.parametrize(("completion", "answers", "rule", "reward"), CASES)
def test_reward_cases(completion, answers, rule, reward: float) -> None:
    kwargs = {"answers": [answers]} | ({"rule": [rule]} if rule else {})
    assert closed_form_reward(["prompt"], [completion], **kwargs) == [pytest.approx(reward)]


def test_a_batch_is_graded_row_by_row_and_one_rule_may_cover_it() -> None:
    completions = ["@x[1,234]", "@x[5]"]
    answers = [[{"name": "x", "value": "1234"}], [{"name": "x", "value": 6}]]
    assert closed_form_reward(["p1", "p2"], completions, answers=answers) == [1.0, 0.0]
    assert closed_form_reward(["p1", "p2"], completions, answers=answers, rule="official") == [0.0, 0.0]


def test_missing_or_mismatched_answers_are_errors() -> None:
    with pytest.raises(ValueError, match="needs an 'answers' column"):
        closed_form_reward(["p"], ["@x[1]"])
    with pytest.raises(ValueError, match="2 completions but 1 rows of answers"):
        closed_form_reward(["p", "q"], ["@x[1]", "@x[2]"], answers=[[{"name": "x", "value": 1}]])


# --------------------------------------------------------------------------------------------- DataMind composition

import json
from pathlib import Path

from worldsmith.core.schemas import Criterion, Rubric
from worldsmith.training.rewards import (
    MALFORMED_REWARD,
    datamind_reward,
    length_factor,
    make_rubric_reward,
    rubric_reward,
    well_formed,
)

GOLDEN = [json.loads(line) for line in (Path(__file__).with_name("rewards_golden.jsonl")).read_text().splitlines()]


@pytest.mark.parametrize("case", GOLDEN, ids=[c["why"] for c in GOLDEN])
def test_datamind_reward_golden_table(case: dict) -> None:
    got = datamind_reward(["p"], [case["completion"]], answers=[case["answers"]], answer_tokens=[case["tokens"]])
    assert got == [pytest.approx(case["reward"], abs=1e-9)], case["why"]


def test_length_factor_endpoints_and_slope() -> None:
    assert [length_factor(n) for n in (0, 256, 1024, 10_000)] == [1.0, 1.0, 0.5, 0.5]
    assert length_factor(448) == pytest.approx(0.875)  # a quarter of the way from 256 to 1,024
    with pytest.raises(ValueError, match="negative"):
        length_factor(-1)
    assert MALFORMED_REWARD == -0.1


def test_token_counts_come_from_trls_completion_ids() -> None:
    good = "<think>\nx\n</think>\n<answer>\n@x[4]\n</answer>"
    answers = [[{"name": "x", "value": 4}]] * 2
    got = datamind_reward(["p", "p"], [good, good], answers=answers, completion_ids=[[0] * 10, [0] * 640])
    assert got == [1.0, pytest.approx(0.75)]
    with pytest.raises(ValueError, match="needs completion lengths"):
        datamind_reward(["p"], [good], answers=answers[:1])
    with pytest.raises(ValueError, match="needs an 'answers' column"):
        datamind_reward(["p"], [good], answer_tokens=[1])


def test_well_formed_needs_every_turn_valid_and_the_requested_tags() -> None:
    ans = "<think>\nx\n</think>\n<answer>\n@a[1] @b[2]\n</answer>"
    assert well_formed(ans, ["a", "b"]) and not well_formed(ans, ["a", "c"])
    assert not well_formed([{"role": "assistant", "content": "oops"}, {"role": "assistant", "content": ans}])
    assert not well_formed([])


def _c(id: str, polarity: str = "+", expected=None, weight: float = 1.0, section: str = "computation") -> Criterion:
    return Criterion(id=id, section=section, polarity=polarity, expected_value=expected, weight=weight,
                     observable=f"the {id} quantity", satisfy=f"states the {id} quantity")


# a (+, 2 points), b (+, 1), c (−: reporting 99 is the error), d (+, needs a judge)
RUBRIC = Rubric(criteria=[_c("a", expected=10, weight=2), _c("b", expected=0.5), _c("c", "-", expected=99),
                          _c("d", section="insight")])

# deterministic only: d is ungraded and left out, so positive points = 2 + 1 = 3
RUBRIC_CASES = [
    ("@a[10] @b[0.5]", 1.0),            # 3/3
    ("@a[10]", 2 / 3),                  # b not evidenced: not met
    ("@a[10] @b[0.5] @c[99]", 2 / 3),   # (3 − 1)/3
    ("@a[11] @c[99]", 0.0),             # (0 − 1)/3 clamps at 0
    ("", 0.0),
]


@pytest.mark.parametrize(("completion", "reward"), RUBRIC_CASES)
def test_rubric_reward_is_normalised_net_points(completion: str, reward: float) -> None:
    assert rubric_reward(["p"], [completion], rubric=[RUBRIC.model_dump()]) == [pytest.approx(reward)]


def test_rubric_reward_with_a_judge_calls_it_once_per_completion() -> None:
    from tests.training.test_rubric import StubJudge

    judge = StubJudge({"b": False, "c": False, "d": True})
    reward = make_rubric_reward(judge)
    # graded: a met (2), b not met (1), c not committed, d met (1): (2 + 1)/(2 + 1 + 1)
    assert reward(["p"], ["@a[10]"], rubric=[RUBRIC.model_dump_json()]) == [pytest.approx(0.75)]
    assert reward(["p"], ["@a[10]"], rubric=[RUBRIC]) == [pytest.approx(0.75)]
    assert len(judge.calls) == 1  # the second, identical (rubric, completion) came from the cache
    with pytest.raises(ValueError, match="needs a 'rubric' column"):
        reward(["p"], ["x"])
