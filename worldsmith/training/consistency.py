"""Self-consistency over sampled answers (DataMind's consistency judge, computed part).

Two answers agree when
- both are numbers (after '%', ',' and currency handling) within `rel_tol` of each other (3% by default),
- or both are texts equal after normalisation (case, spaces, quotes, trailing period),
- or both are multi-answer `@name[value]` sets with the same names, every value agreeing as above (two empty
  values, `@outliers[]` in both, agree: both answers say "none").
A string containing `@name[value]` tags is read as such a set. Empty answers agree with nothing.

Agreement with a tolerance is not transitive, so clusters are built around a centre: the answer that agrees
with the most others (ties: the earliest); its cluster is every answer that agrees with it.
Descriptive answers that differ in wording need the LLM consistency judge, which lives in the agents layer.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from worldsmith.core.schemas import Trajectory
from worldsmith.core.grading import extract_answers, normalise_text, parse_number, tolerant

Strategy = Literal["con-select", "random-select", "keep-all"]
Answer = str | dict[str, Any] | None


class ConsistencyResult(BaseModel):
    n: int = Field(description="number of answers considered (empty ones included)")
    majority: str | float | dict[str, Any] | None = Field(description="the centre answer of the largest cluster")
    agreement: float = Field(ge=0, le=1, description="size of the majority cluster / n")
    majority_indices: list[int] = Field(default_factory=list)
    clusters: list[list[int]] = Field(default_factory=list, description="disjoint clusters, largest first")

    @property
    def unanimous(self) -> bool:
        return self.n > 0 and len(self.majority_indices) == self.n

    @property
    def has_majority(self) -> bool:
        """A strict majority agrees (more than half of all answers)."""
        return len(self.majority_indices) * 2 > self.n


def _canon(answer: Answer) -> str | float | dict[str, Any] | None:
    if answer is None:
        return None
    if isinstance(answer, dict):
        return {str(k): _canon_scalar(v) for k, v in answer.items()} or None
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        return parse_number(answer)
    text = str(answer)
    tags = extract_answers(text)
    if tags:
        return {k: _canon_scalar(v) for k, v in tags.items()}
    return _canon_scalar(text)


def _canon_scalar(value: Any) -> str | float | None:
    num = parse_number(value)
    if num is not None:
        return num
    text = normalise_text(value)
    return text or None


def _scalar_agree(a: str | float | None, b: str | float | None, rel_tol: float) -> bool:
    if a is None or b is None:
        return False
    if isinstance(a, float) and isinstance(b, float):
        # symmetric: relative to the larger of the two (neither is the expected one), with a 1e-9 floor
        rule = tolerant(abs=1e-9, rel=rel_tol)
        return rule.numbers(a, b) or rule.numbers(b, a)
    return not isinstance(a, float) and not isinstance(b, float) and a == b


def answers_agree(a: Answer, b: Answer, rel_tol: float = 0.03) -> bool:
    return _agree(_canon(a), _canon(b), rel_tol)


def _agree(a: Any, b: Any, rel_tol: float) -> bool:
    if a is None or b is None:
        return False
    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict)) or set(a) != set(b):
            return False
        return all((a[k] is None and b[k] is None) or _scalar_agree(a[k], b[k], rel_tol) for k in a)
    return _scalar_agree(a, b, rel_tol)


def consistent(answers: Sequence[Answer], rel_tol: float = 0.03) -> ConsistencyResult:
    """Majority answer, agreement ratio and the indices of the majority cluster."""
    canon = [_canon(a) for a in answers]
    n = len(canon)
    agree = [[j for j in range(n) if canon[i] is not None and _agree(canon[i], canon[j], rel_tol)] for i in range(n)]
    clusters: list[list[int]] = []
    centres: list[int] = []
    left = set(i for i in range(n) if canon[i] is not None)
    while left:
        # centre = the remaining answer agreeing with the most remaining answers; ties go to the earliest
        centre = max(sorted(left), key=lambda i: sum(1 for j in agree[i] if j in left))
        # the centre always joins its own cluster, so every round removes at least one answer
        members = sorted({centre} | {j for j in agree[centre] if j in left})
        clusters.append(members)
        centres.append(centre)
        left -= set(members)
    if not clusters:
        return ConsistencyResult(n=n, majority=None, agreement=0.0)
    order = sorted(range(len(clusters)), key=lambda k: (-len(clusters[k]), clusters[k][0]))
    clusters = [clusters[k] for k in order]
    top = centres[order[0]]
    majority = canon[top]
    return ConsistencyResult(n=n, majority=majority, agreement=len(clusters[0]) / n, majority_indices=clusters[0],
                             clusters=clusters)


def trajectory_answer(traj: Trajectory) -> str | None:
    """The answer a trajectory committed to; unanswered trajectories have none."""
    if traj.status != "answered" or not (traj.answer_to_grade or "").strip():
        return None
    return traj.answer_to_grade


def select(trajectories: Sequence[Trajectory], strategy: Strategy = "con-select", *, rel_tol: float = 0.03,
           min_agreement: float = 0.5, seed: int = 0) -> list[Trajectory]:
    """DataMind's trajectory selection after sampling N trajectories for one query.

    - `con-select`: every trajectory in the majority cluster, if that cluster holds more than `min_agreement`
      of the samples; otherwise none (the query has no consistent answer).
    - `random-select`: one trajectory drawn (seeded) from that same majority cluster, or none.
    - `keep-all`: every trajectory that produced an answer, consistent or not.
    """
    if strategy not in ("con-select", "random-select", "keep-all"):
        raise ValueError(f"unknown selection strategy {strategy!r}: expected con-select, random-select or keep-all")
    if strategy == "keep-all":
        return [t for t in trajectories if trajectory_answer(t) is not None]
    result = consistent([trajectory_answer(t) for t in trajectories], rel_tol=rel_tol)
    if not result.majority_indices or result.agreement <= min_agreement:
        return []
    chosen = [trajectories[i] for i in result.majority_indices]
    if strategy == "random-select":
        return [random.Random(seed).choice(chosen)]
    return chosen
