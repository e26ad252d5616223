"""The decomposer (decompose mode): a compound objective → 2..n self-contained parts, each analysed in its own
child workspace. The parts must be distinct and no repeat of the objective itself; a model that gives nothing
usable leaves the caller to split by the objective's own punctuation (`evolution.modes.split_objective`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from worldsmith.agents.asking import Outcome, ask, versions
from worldsmith.core.grading import normalise_text
from worldsmith.prompts import template

TEMPLATE = "evolve_decompose.md"


class Parts(BaseModel):
    parts: list[str] = Field(min_length=2, description="self-contained questions that together cover the objective")


def part_problems(out: Parts, objective: str, max_parts: int) -> list[str]:
    problems = [] if len(out.parts) <= max_parts else [f"{len(out.parts)} parts; at most {max_parts} are allowed"]
    seen = {normalise_text(objective)}
    for p in out.parts:
        key = normalise_text(p)
        if len(p.split()) < 3:
            problems.append(f"part {p!r} is not a question an analyst can work on alone")
        elif key in seen:
            problems.append(f"part {p!r} repeats the objective or another part")
        seen.add(key)
    return problems


async def decompose(llm: Any, objective: str, files: list[str], *, max_parts: int = 3, role: str = "teacher",
                    retries: int = 1) -> Outcome[Parts]:
    t = template(TEMPLATE)
    messages = [{"role": "system", "content": t.section("system")},
                {"role": "user", "content": t.section("user", files=", ".join(files) or "(none)", objective=objective,
                                                      max_parts=str(max_parts))}]
    return await ask(llm, messages, Parts, role=role, templates=versions(TEMPLATE), retries=retries,
                     check=lambda out: part_problems(out, objective, max_parts))
