"""The rubric generator (dual evidence): the verified ground truth and >= 2 evidence cards from independent solver
runs → a rubric of 4-7 dimensions and at most 10 criteria, filter vs preference, provenance gt/generated with at
most 40% gt. The structural rules live in `RubricDraft` itself, so a draft that breaks them goes back to the model
with the validation errors; grounding is the criterion validator's job.
"""

from __future__ import annotations

import json
from typing import Any

from worldsmith.agents.asking import Outcome, ask, versions
from worldsmith.core.evolution_schemas import EvidenceCard, RubricDraft
from worldsmith.prompts import template

TEMPLATE = "evolve_rubric.md"


def render_cards(cards: list[EvidenceCard]) -> str:
    return "\n".join(f"- card {i + 1} ({c.solver}): " + json.dumps(
        {"operations": c.operations, "computed_values": c.computed_values, "conclusions": c.conclusions},
        ensure_ascii=False) for i, c in enumerate(cards))


def check_cards(cards: list[EvidenceCard]) -> None:
    """Dual evidence means two independent runs: at least two cards from different solvers."""
    if len({c.solver for c in cards}) < 2:
        raise ValueError(f"rubric generation needs evidence cards from >= 2 independent solver runs; got "
                         f"{len(cards)} card(s) from {sorted({c.solver for c in cards})}")


async def generate_rubric(llm: Any, task: str, ground_truth: str, cards: list[EvidenceCard], *,
                          role: str = "teacher", retries: int = 2) -> Outcome[RubricDraft]:
    check_cards(cards)
    t = template(TEMPLATE)
    messages = [{"role": "system", "content": t.section("system")},
                {"role": "user", "content": t.section("user", task=task, ground_truth=ground_truth,
                                                      cards=render_cards(cards))}]
    return await ask(llm, messages, RubricDraft, role=role, templates=versions(TEMPLATE), retries=retries)
