"""LLM agents of the world graph: contract writer, question writer. Each validates its output and falls back
to a deterministic template after bounded retries, recording which one produced the artifact."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from worldsmith.agents.request_check import quantity_name, request_problems
from worldsmith.core.answer_spec import (AnswerFacets, is_data_file, quantity_sentence, render_answer_spec,
                                        render_report_number)
from worldsmith.core.world_contract import WorldContract
from worldsmith.evolution.worlds.tasks import TaskSpec
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
    request: str = Field(description="the stakeholder's request to the analyst, in the stakeholder's voice, 2-5 "
                                     "sentences")


def question_problems(text: str, spec: TaskSpec, files: list[str] | None = None,
                      answers: list[AnswerFacets] | None = None, others: list[AnswerFacets] | None = None,
                      one_quantity: bool = False) -> list[str]:
    """Why a drafted request is unusable: voice, target, files, leaked numbers, goal (`request_check`; `others`:
    quantities other tasks grade, which it must not ask for), or it lists the factors the analyst is to find."""
    answers = answers or []
    expected = [float(p.value) * f for p in spec.phenomena if isinstance(p.value, (int, float))
                for f in {1.0, *(a.factor for a in answers if a.name == p.id)}]
    problems = request_problems(text, target=spec.target, target_description=spec.target_description,
                                files=files or [], answers=answers, expected=expected, others=others or [],
                                one_quantity=one_quantity)
    low = text.lower()
    named = [r for r in spec.related if r.replace("_", " ") in low or r in low]
    if len(spec.related) >= 2 and len(named) >= 2:
        problems.append("the request must not list the factors the analyst is supposed to find")
    return problems


_QUANTITY_WORDS = {"difference": "difference in", "top_group": "group with the highest mean"}


def template_request(spec: TaskSpec, persona: Any, answer: AnswerFacets | None = None) -> str:
    """The fallback request: about the spec's target (a report), or about exactly one graded `answer`."""
    if answer is not None:
        what = answer.measure.variable.replace("_", " ") + (
            f" against {answer.x.variable.replace('_', ' ')}" if answer.x else "")
        return _msg("request quantity", name=persona.name, role=persona.role, organisation=persona.organisation,
                    quantity=_QUANTITY_WORDS.get(answer.quantity, answer.quantity.replace("_", " ") + " of"),
                    what=what, goal=persona.goal)
    return _msg(f"request {spec.kind}", name=persona.name, role=persona.role, organisation=persona.organisation,
                thing=spec.target.replace("_", " "), goal=persona.goal)


def quantity_spec(spec: TaskSpec, answer: AnswerFacets) -> TaskSpec:
    """The spec of a closed-form task: about the one phenomenon it grades, whose measure is what it is about."""
    return spec.model_copy(update={"target": answer.measure.variable, "target_description": answer.measure.description,
                                   "phenomena": [p for p in spec.phenomena if p.id == answer.name]})


async def write_requests(llm: Any | None, spec: TaskSpec, persona: Any, files: list[str], *, model: str,
                         answers: list[AnswerFacets], retries: int = 1) -> tuple[Produced, dict[str, Produced]]:
    """One request per emitted task: the report's (about the target, every graded quantity) and one per closed-form
    quantity, about exactly that quantity and refused when it asks for a sibling's (the churn gap's request must
    not also ask for the price gap)."""
    report = await write_request(llm, spec, persona, files, model=model, retries=retries, answers=answers)
    each = {}
    for a in answers:
        others = [o for o in answers if o.name != a.name]
        each[a.name] = await write_request(llm, quantity_spec(spec, a), persona, files, model=model,
                                           retries=retries, answers=[a], others=others, single=a)
    return report, each


async def write_request(llm: Any | None, spec: TaskSpec, persona: Any, files: list[str], *, model: str,
                        retries: int = 1, answers: list[AnswerFacets] | None = None,
                        others: list[AnswerFacets] | None = None, single: AnswerFacets | None = None) -> Produced:
    """The stakeholder request for a task: LLM-written, told what is graded and validated, else the template
    (`errors` then says why the drafts were refused). `single`: a closed-form task's one quantity (its template
    request is about that quantity)."""
    fallback = "template:request" + (":quantity" if single is not None else "")
    if llm is None:
        return Produced(template_request(spec, persona, single), fallback)
    answers = answers or []
    data_files = [f for f in files if is_data_file(f)]
    graded = "; ".join(quantity_sentence(a) for a in answers) or f"what drives {spec.target}"
    from worldsmith.llm.errors import LLMError

    analysis = (_msg("question analysis quantity", quantity=quantity_name(single)) if single is not None
                else _msg(f"question analysis {spec.kind}", target=spec.target))
    messages: list[dict[str, str]] = [
        {"role": "system", "content": load_prompt("world_question.md")},
        {"role": "user", "content": _msg("question user", name=persona.name, role=persona.role,
                                         organisation=persona.organisation, goal=persona.goal, analysis=analysis,
                                         about=spec.target_description or spec.target, graded=graded,
                                         files=", ".join(data_files))}]
    errors: list[str] = []
    for attempt in range(retries + 1):
        try:
            draft = await llm.astructured(messages, QuestionDraft, role="teacher")
        except LLMError as exc:
            errors.append(str(exc))
            break
        problems = question_problems(draft.request, spec, files, answers, others, one_quantity=single is not None)
        if not problems:
            return Produced(draft.request.strip(), f"llm:{model}", attempt + 1, errors)
        errors.extend(problems)
        messages += [{"role": "assistant", "content": draft.model_dump_json()},
                     {"role": "user", "content": _msg("question retry", problems="; ".join(problems))}]
    return Produced(template_request(spec, persona, single), fallback, retries + 1, errors)


def deliverable_block(spec: TaskSpec, contract: WorldContract, facets: AnswerFacets | None,
                      computed: list[AnswerFacets] | None = None) -> str:
    """The exact deliverable instructions appended to every request: closed form, every facet of the one
    quantity and its @name[value] line; report, one sentence per number the rubric grades."""
    if facets is not None:
        return "\n\n" + render_answer_spec(facets)
    numbers = "\n".join(render_report_number(f) for f in computed or [])
    return "\n\n" + _msg("deliverable report", numbers=numbers or "- (none)")



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
