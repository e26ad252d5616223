"""LLM agents of the world graph: contract writer, question writer. Each validates its output and falls back
to a deterministic template after bounded retries, recording which one produced the artifact."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from worldsmith.core.world_contract import WorldContract
from worldsmith.evolution.worlds.tasks import TaskSpec, quantity_phrase
from worldsmith.evolution.worlds.validate import validate_contract
from worldsmith.prompts import load_prompt, load_sections


def _msg(section: str, **fields: Any) -> str:
    """A world-writer message from `prompts/world_messages.md`."""
    return load_sections("world_messages.md")[section].format(**fields)


@dataclass
class Produced:
    value: Any
    produced_by: str  # 'llm:<model>' or 'template:<id>'
    attempts: int = 0
    errors: list[str] | None = None


class QuestionDraft(BaseModel):
    request: str = Field(description="the stakeholder's request, first person, 2-5 sentences")


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[_\W]+", name.lower()) if len(w) > 2]


def question_problems(text: str, spec: TaskSpec) -> list[str]:
    """Why a drafted request is unusable: too short/long, off-target, or leaking the answer."""
    problems = []
    low = text.lower()
    if not 60 <= len(text) <= 1500:
        problems.append(f"the request must be 60-1500 characters (got {len(text)})")
    target_words = _words(spec.target) + _words(spec.target_description)[:4]
    if target_words and not any(w in low for w in target_words):
        problems.append(f"the request must mention what it is about ({spec.target.replace('_', ' ')})")
    for p in spec.phenomena:
        if isinstance(p.value, (int, float)):
            for digits in (1, 2, 3):
                shown = f"{p.value:.{digits}f}"
                if len(shown.lstrip("-0.").replace(".", "")) >= 2 and shown in text:  # skip '0.0', '1.0', '0.04'…
                    problems.append("the request must not state the numbers the analyst has to compute")
                    break
    named = [r for r in spec.related if r.replace("_", " ") in low or r in low]
    if len(spec.related) >= 2 and len(named) >= 2:
        problems.append("the request must not list the factors the analyst is supposed to find")
    return problems


def template_request(spec: TaskSpec, persona: Any) -> str:
    return _msg(f"request {spec.kind}", name=persona.name, role=persona.role, organisation=persona.organisation,
                thing=spec.target.replace("_", " "), goal=persona.goal)


async def write_request(llm: Any | None, spec: TaskSpec, persona: Any, files: list[str], *, model: str,
                        retries: int = 1) -> Produced:
    """The stakeholder request for a task: LLM-written and validated, else the template."""
    if llm is None:
        return Produced(template_request(spec, persona), "template:request")
    from worldsmith.llm.errors import LLMError

    analysis = _msg(f"question analysis {spec.kind}", target=spec.target)
    messages: list[dict[str, str]] = [
        {"role": "system", "content": load_prompt("world_question.md")},
        {"role": "user", "content": _msg("question user", name=persona.name, role=persona.role,
                                         organisation=persona.organisation, goal=persona.goal, analysis=analysis,
                                         about=spec.target_description or spec.target, files=", ".join(files))}]
    errors: list[str] = []
    for attempt in range(retries + 1):
        try:
            draft = await llm.astructured(messages, QuestionDraft, role="teacher")
        except LLMError as exc:
            errors.append(str(exc))
            break
        problems = question_problems(draft.request, spec)
        if not problems:
            return Produced(draft.request.strip(), f"llm:{model}", attempt + 1, errors)
        errors.extend(problems)
        messages += [{"role": "assistant", "content": draft.model_dump_json()},
                     {"role": "user", "content": _msg("question retry", problems="; ".join(problems))}]
    return Produced(template_request(spec, persona), "template:request", retries + 1, errors)


def deliverable_block(spec: TaskSpec, contract: WorldContract, pid: str | None) -> str:
    """The exact deliverable instructions appended to every request (closed form: one @name[value])."""
    if pid is not None:
        statement = quantity_phrase(contract.phenomenon(pid).statement)
        return "\n\n" + _msg("deliverable closed form", statement=statement, pid=pid)
    return "\n\n" + _msg("deliverable report")


async def write_contract(llm: Any | None, template: WorldContract, persona: Any, *, model: str,
                         retries: int = 2) -> Produced:
    """An LLM-adapted contract, validated by the engine's validator with its problems fed back; else the template."""
    if llm is None:
        return Produced(template, f"template:{template.id}")
    from worldsmith.llm.errors import LLMError, LLMOutputError

    messages: list[dict[str, str]] = [
        {"role": "system", "content": load_prompt("world_contract.md")},
        {"role": "user", "content": _msg("contract user", persona=persona.model_dump_json(), contract=json.dumps(
            template.model_dump(mode="json"), separators=(",", ":")))}]
    errors: list[str] = []
    for attempt in range(retries + 1):
        try:
            draft = await llm.astructured(messages, WorldContract, role="teacher", max_tokens=6000)
            reply = draft.model_dump_json()
            problems = [str(p) for p in validate_contract(draft) if p.severity == "error"]
        except LLMOutputError as exc:  # not even schema-valid after the layer's own repair retry
            reply, problems = exc.raw_text, list(exc.errors)
        except (LLMError, ValidationError) as exc:
            errors.append(str(exc).splitlines()[0])
            break
        if not problems:
            return Produced(draft, f"llm:{model}", attempt + 1, errors)
        errors.extend(problems)
        messages += [{"role": "assistant", "content": reply},
                     {"role": "user", "content": _msg("contract retry", problems="\n- ".join(problems))}]
    return Produced(template, f"template:{template.id}", retries + 1, errors)
