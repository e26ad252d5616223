"""The task writer (backward synthesis, closed form): the complete answer spec of one number an evolution script
printed. The spec's lint (`core.answer_spec.lint_answer_spec`) over the task's data files is the check: a facet left
open goes back to the model, and a spec that never passes is not used (no closed-form task is made from it).
"""

from __future__ import annotations

from typing import Any

from worldsmith.agents.asking import Outcome, ask, versions
from worldsmith.core.answer_spec import AnswerFacets, lint_answer_spec
from worldsmith.prompts import template

TEMPLATE = "evolve_task_writer.md"


def spec_problems(facets: AnswerFacets, name: str, files: list[str]) -> list[str]:
    problems = [] if facets.name == name else [f"name must be {name!r}, got {facets.name!r}"]
    return problems + lint_answer_spec(facets, files)


async def write_answer_spec(llm: Any, *, goal: str, script: str, name: str, value: float, files: list[str],
                            role: str = "teacher", retries: int = 2) -> Outcome[AnswerFacets]:
    t = template(TEMPLATE)
    messages = [{"role": "system", "content": t.section("system")},
                {"role": "user", "content": t.section("user", goal=goal, files=", ".join(files), script=script,
                                                      name=name, value=repr(value))}]
    return await ask(llm, messages, AnswerFacets, role=role, templates=versions(TEMPLATE), retries=retries,
                     check=lambda f: spec_problems(f, name, files))
