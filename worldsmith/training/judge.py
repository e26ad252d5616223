"""LLM judge for rubric items that cannot be checked deterministically.

One structured call per batch of criteria (all remaining items of a response fit in one batch unless the
rubric is unusually long). The prompt is bounded: the response is clipped head + tail to `max_response_chars`.
The LLM object is anything with `astructured(messages, schema, role=...)` — the
worldsmith LLM layer or a test stub — so this module never imports `worldsmith.llm`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, Field

from worldsmith.core import rubric_grading as rg
from worldsmith.core.aio import run_sync
from worldsmith.core.rubric_grading import (  # noqa: F401  (public API)
    MAX_CRITERIA_PER_CALL,
    MAX_INSTRUCTION_CHARS,
    MAX_RESPONSE_CHARS,
    clip_middle,
)
from worldsmith.core.schemas import Criterion
from worldsmith.prompts import load_prompt


class CriterionVerdict(BaseModel):
    id: str = Field(description="the criterion id, exactly as given")
    met: bool = Field(description="'+' items: satisfied; '-' items: the error is committed")
    evidence: str = Field("", description="a short quote from the deliverable, or what is missing")


class JudgeVerdicts(BaseModel):
    verdicts: list[CriterionVerdict]


class StructuredLLM(Protocol):
    async def astructured(self, messages: list[dict], schema: type[BaseModel], role: str = ...) -> BaseModel: ...


def judge_messages(criteria: Sequence[Criterion], response_text: str, instruction: str = "",
                   max_response_chars: int = MAX_RESPONSE_CHARS) -> list[dict[str, str]]:
    """The judge's conversation (templates judge_system.md, judge_task.md, judge_request.md in worldsmith/prompts),
    built by core/rubric_grading.py, which report packages ship with the same templates."""
    prompts = {"judge_system.md": load_prompt("judge_system.md"), "judge_task.md": load_prompt("judge_task.md"),
               "judge_request.md": load_prompt("judge_request.md")}
    return rg.judge_messages([c.model_dump(mode="json") for c in criteria], response_text, instruction, prompts,
                             max_response_chars)


def batches(criteria: Sequence[Criterion], size: int = MAX_CRITERIA_PER_CALL) -> list[list[Criterion]]:
    return [list(criteria[i:i + size]) for i in range(0, len(criteria), size)]


def _collect(criteria: Sequence[Criterion], result: BaseModel) -> dict[str, CriterionVerdict]:
    if not isinstance(result, JudgeVerdicts):
        result = JudgeVerdicts.model_validate(result.model_dump() if isinstance(result, BaseModel) else result)
    wanted = {c.id for c in criteria}
    return {v.id: v for v in result.verdicts if v.id in wanted}  # unknown ids are ignored, missing ones stay ungraded


async def ajudge(llm: StructuredLLM, criteria: Sequence[Criterion], response_text: str, instruction: str = "",
                 max_response_chars: int = MAX_RESPONSE_CHARS) -> dict[str, CriterionVerdict]:
    out: dict[str, CriterionVerdict] = {}
    for batch in batches(criteria):
        msgs = judge_messages(batch, response_text, instruction, max_response_chars)
        out.update(_collect(batch, await llm.astructured(msgs, JudgeVerdicts, role="judge")))
    return out


def judge(llm: StructuredLLM, criteria: Sequence[Criterion], response_text: str, instruction: str = "",
          max_response_chars: int = MAX_RESPONSE_CHARS) -> dict[str, CriterionVerdict]:
    """Sync wrapper of `ajudge`."""
    return run_sync(ajudge(llm, criteria, response_text, instruction, max_response_chars))
