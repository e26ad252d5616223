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
