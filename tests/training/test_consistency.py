"""Self-consistency: numeric agreement within 3%, normalised strings, per-name multi-answers, selection."""

from __future__ import annotations

import pytest

from worldsmith.core.schemas import Trajectory
from worldsmith.training.consistency import answers_agree
from worldsmith.training.graders import consistent, select


@pytest.mark.parametrize(("a", "b", "agree"), [
    ("100", "102.9", True),
    ("100", "103.5", False),
    ("12%", "0.1205", True),          # a percent is its fraction
    ("1,234", "1234", True),
    ("$5.00", "5", True),
    ("Male", " male. ", True),
    ("Male", "Female", False),
    ("0", "0.0", True),
    ("0", "0.001", False),
    ("12", "twelve", False),          # descriptive vs numeric needs the LLM judge, never equal here
    ("@a[1] @b[x]", "@b[X] @a[1.01]", True),
    ("@a[1] @b[x]", "@a[1]", False),  # different name sets
    ("@a[1] @b[x]", {"a": "1", "b": "x"}, True),
    ("", "", False),                  # empty answers agree with nothing
    (None, "1", False),
])
def test_answers_agree(a, b, agree: bool) -> None:
    assert answers_agree(a, b) is agree
    assert answers_agree(b, a) is agree


def test_majority_cluster_ratio_and_indices() -> None:
    r = consistent(["34.65", "34.9", "12", "@x[1]", "34.6"])
    assert r.majority == pytest.approx(34.65)
    assert r.majority_indices == [0, 1, 4]
    assert r.agreement == pytest.approx(3 / 5)
    assert r.clusters[0] == [0, 1, 4] and sorted(map(tuple, r.clusters[1:])) == [(2,), (3,)]
    assert r.has_majority and not r.unanimous


def test_centre_is_the_answer_agreeing_with_most_others() -> None:
    # 100 and 105.5 are 5.2% apart; 103 is within 3% of both, so it is the centre of the majority cluster
    r = consistent(["100", "103", "105.5"])
    assert r.majority == pytest.approx(103.0) and r.majority_indices == [0, 1, 2] and r.unanimous
    r = consistent(["100", "103", "105.5"], rel_tol=0.01)
    assert r.majority_indices == [0] and r.agreement == pytest.approx(1 / 3)  # ties go to the earliest


def test_multi_answer_dicts_are_compared_per_name() -> None:
    r = consistent(["@mean[10] @sd[2]", "@sd[2.01] @mean[10.1]", "@mean[10] @sd[3]"])
    assert r.majority == {"mean": 10.0, "sd": 2.0}
    assert r.majority_indices == [0, 1]


def test_empty_input_and_all_empty_answers() -> None:
    assert consistent([]).majority is None
    r = consistent([None, "", "  "])
    assert r.majority is None and r.agreement == 0.0 and r.n == 3


def _traj(i: int, answer: str | None, status: str = "answered") -> Trajectory:
    return Trajectory(id=f"t{i}", task_id="q", model="m", sample_index=i, final_answer=answer, status=status)


TRAJS = [_traj(0, "@x[10]"), _traj(1, "@x[10.2]"), _traj(2, "@x[55]"), _traj(3, None, "max_turns")]


def test_select_strategies() -> None:
    assert select(TRAJS, "con-select") == []  # 2 of 4 samples (the unanswered one counts) is not a majority
    assert [t.id for t in select(TRAJS, "con-select", min_agreement=0.4)] == ["t0", "t1"]
    picked = select(TRAJS, "random-select", min_agreement=0.4, seed=3)
    assert len(picked) == 1 and picked[0].id in {"t0", "t1"}
    assert select(TRAJS, "random-select", min_agreement=0.4, seed=3) == picked  # seeded
    assert [t.id for t in select(TRAJS, "keep-all")] == ["t0", "t1", "t2"]  # unanswered ones never kept
    with pytest.raises(ValueError, match="unknown selection strategy 'best'"):
        select(TRAJS, "best")  # type: ignore[arg-type]


def test_con_select_needs_a_strict_majority() -> None:
    split = [_traj(0, "1"), _traj(1, "1"), _traj(2, "2"), _traj(3, "2")]
    assert select(split, "con-select") == []
    assert select(split, "random-select") == []
    assert [t.id for t in select(split[:3], "con-select")] == ["t0", "t1"]


def test_empty_tag_values_agree_and_clustering_ends() -> None:
    # three samples all saying "no outliers" (DABench dabench-473): a value-less tag used to agree with nothing,
    # not even itself, and the clustering loop never ended
    r = consistent(["@outliers[]", "The outliers are [].\n@outliers[]", "@outliers[] @n[0]", "@outliers[3]"])
    assert r.majority_indices == [0, 1] and r.clusters == [[0, 1], [2], [3]]
    assert consistent(["@outliers[]", "@outliers[1]"]).clusters == [[0], [1]]
