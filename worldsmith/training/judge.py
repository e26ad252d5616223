"""LLM judge for rubric items that cannot be checked deterministically.

One structured call per batch of criteria (all remaining items of a response fit in one batch unless the
rubric is unusually long). The prompt is bounded: the response is clipped head + tail to `max_response_chars`.
The LLM object is anything with `astructured(messages, schema, role=...)` — the
worldsmith LLM layer or a test stub — so this module never imports `worldsmith.llm`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field

from worldsmith.core.aio import run_sync
from worldsmith.core.schemas import Criterion
from worldsmith.prompts import load_prompt

MAX_RESPONSE_CHARS = 12_000
MAX_INSTRUCTION_CHARS = 2_000
MAX_CRITERIA_PER_CALL = 16

class CriterionVerdict(BaseModel):
    id: str = Field(description="the criterion id, exactly as given")
    met: bool = Field(description="'+' items: satisfied; '-' items: the error is committed")
    evidence: str = Field("", description="a short quote from the deliverable, or what is missing")


class JudgeVerdicts(BaseModel):
    verdicts: list[CriterionVerdict]


class StructuredLLM(Protocol):
    async def astructured(self, messages: list[dict], schema: type[BaseModel], role: str = ...) -> BaseModel: ...


def clip_middle(text: str, limit: int) -> str:
    """Keep the head and the tail (conclusions usually sit at the end) within `limit` characters."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 5
    tail = limit - head - 60
    return f"{text[:head]}\n\n[... {len(text) - head - tail} characters omitted ...]\n\n{text[-tail:]}"


def _criterion_brief(c: Criterion) -> dict[str, Any]:
    brief: dict[str, Any] = {"id": c.id, "polarity": c.polarity, "section": c.section, "observable": c.observable,
                             "satisfy": c.satisfy}
    if c.violate:
        brief["violate"] = c.violate
    if c.expected_value is not None:
        brief["expected_value"] = c.expected_value
        if c.tolerance is not None:
            brief["tolerance"] = c.tolerance.model_dump(exclude_none=True)
    return brief


def judge_messages(criteria: Sequence[Criterion], response_text: str, instruction: str = "",
                   max_response_chars: int = MAX_RESPONSE_CHARS) -> list[dict[str, str]]:
    """The judge's conversation (templates judge_system.md, judge_task.md, judge_request.md in worldsmith/prompts)."""
    lines = "\n".join(json.dumps(_criterion_brief(c), ensure_ascii=False) for c in criteria)
    request = load_prompt("judge_request.md").strip().format(
        deliverable=clip_middle(response_text.strip() or "(empty)", max_response_chars), criteria=lines)
    if instruction.strip():
        task = load_prompt("judge_task.md").strip().format(
            instruction=clip_middle(instruction.strip(), MAX_INSTRUCTION_CHARS))
        request = f"{task}\n\n{request}"
    return [{"role": "system", "content": load_prompt("judge_system.md").strip()}, {"role": "user", "content": request}]


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
