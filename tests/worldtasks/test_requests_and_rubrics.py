"""Requests fit what is graded (stakeholder voice, target, real data files, no leaked number), and report rubrics
cover what the instruction asks: each computation item tied to an instruction sentence, directional insights,
true traps."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from worldsmith.agents.request_check import leaked_numbers, request_problems
from worldsmith.agents.world_writers import deliverable_block, question_problems, template_request, write_request
from worldsmith.core.answer_spec import quantity_sentence
from worldsmith.evolution.worlds.answer_specs import world_answer_specs
from worldsmith.evolution.worlds.audit import load_contract
from worldsmith.evolution.worlds.tasks import dag, rubric_items, sample_specs

FILES = ["data/crm.csv", "data/billing.sqlite", "data/product_analytics.parquet", "data/data_dictionary.md",
         "data/README.md", "data/memos/2024-01-15_onboarding.md"]
GOOD = ("Hi, I'm Dana from revenue. We raised prices for a test group of accounts and I need to know before the "
        "board meeting whether churn moved. Can you compare churn between the test and control arms using "
        "crm.csv and tell me the difference, whichever way it goes?")


def _churn_answers(world: Path):
    facets = world_answer_specs(world)
    return [facets["test_churn_gap"]]


def _problems(text: str, world: Path, expected=(0.0347, 3.47)) -> list[str]:
    return request_problems(text, target="churned", target_description="cancelled during the period", files=FILES,
                            answers=_churn_answers(world), expected=expected)


def test_a_stakeholder_request_about_the_graded_quantity_passes(world: Path) -> None:
    assert _problems(GOOD, world) == []


@pytest.mark.parametrize("text, why", [
    ("I will analyze churn in crm.csv by price group, then I will compute the difference between test and control "
     "and summarise it for the board.", "not as the analyst's plan"),
    ("My analysis: compare churn across price groups from crm.csv and data_dictionary.md to see the test effect, "
     "can you review it?", "not as the analyst's plan"),
    ("Can you use data_dictionary.md and crm.csv to tell me how churn differs between the test and control arms "
     "before the board meeting?", "documentation, not a data file"),
    ("Can you use accounts_2024.xlsx to tell me how churn differs between the test and control arms before the "
     "board meeting next week?", "not in the data room"),
    ("I heard churn is 3.5 points up in the test arm; can you check the churn difference between test and control "
     "for me before the board meeting?", "must not state the numbers"),
    ("Can you tell me how much the onboarding revamp cost us and whether the new support tooling paid off, using "
     "the product data, before the board meeting?", "must name what it is about"),
    ("Can you explain why churn is higher in the test arm than in control, using crm.csv, before the board "
     "meeting next week?", "not presuppose it"),
    ("Please tell me how much churn increased in the test arm compared with control, using crm.csv, before the "
     "board meeting?", "not presuppose it"),
    ("Can you work out the cost of churn for us, comparing the test and control arms, so that finance can plan "
     "next year's budget?", "which no graded quantity computes"),
])
def test_the_validator_refuses(text: str, why: str, world: Path) -> None:
    assert any(why in p for p in _problems(text, world)), _problems(text, world)


def test_leaks_count_roundings_but_not_small_counts() -> None:
    assert leaked_numbers("the gap is 3.5 points", [3.4712]) == ["3.5"]
    assert leaked_numbers("the gap is 3.47", [3.4712]) == ["3.47"]
    assert leaked_numbers("over 3 months and 2 files", [3.4712, 2.2]) == []
    assert leaked_numbers("about 120 accounts", [119.6]) == ["120"]


def test_the_template_request_passes_the_validator(world: Path) -> None:
    contract = load_contract(world)
    facets = world_answer_specs(world)
    for spec in sample_specs(world, max_tasks=10, seed=0):
        answers = [facets[p.id] for p in spec.phenomena if isinstance(p.value, (int, float))]
        assert question_problems(template_request(spec, contract.persona), spec, FILES, answers) == []


def test_a_refused_llm_request_falls_back_with_the_reason(world: Path) -> None:
    spec = next(s for s in sample_specs(world, max_tasks=10, seed=0) if s.kind == "cause")
    contract = load_contract(world)
    plan = "I will analyze the data and compute the drivers of " + spec.target.replace("_", " ") + " for the team."

    class Stub:
        async def astructured(self, messages, schema, role):
            assert "Graded quantity:" in messages[1]["content"] and "data_dictionary.md" not in messages[1]["content"]
            return schema(request=plan)

    out = asyncio.run(write_request(Stub(), spec, contract.persona, FILES, model="stub", retries=0,
                                    answers=[world_answer_specs(world)[p.id] for p in spec.phenomena
                                             if isinstance(p.value, (int, float))]))
    assert out.produced_by == "template:request"
    assert any("analyst's plan" in e for e in out.errors or [])


def _report(world: Path):
    contract = load_contract(world)
    facets = world_answer_specs(world)
    spec = next(s for s in sample_specs(world, max_tasks=10, seed=0) if s.kind == "cause" and s.phenomena)
    computed = [p for p in spec.phenomena if isinstance(p.value, (int, float))]
    instruction = template_request(spec, contract.persona) + deliverable_block(
        spec, contract, None, [facets[p.id] for p in computed])
    return contract, spec, rubric_items(spec, contract, facets), instruction, facets


def test_each_computation_item_is_tied_to_a_sentence_of_the_report_instruction(world: Path) -> None:
    contract, spec, items, instruction, facets = _report(world)
    comps = [c for c in items if c.section == "computation"]
    assert comps
    sentences = [line.strip() for line in instruction.splitlines() if line.strip().startswith("- `")]
    for c in comps:
        pid = c.id.removeprefix("comp_")
        tied = [s for s in sentences if s.startswith(f"- `{pid}`:")]
        assert len(tied) == 1, (pid, sentences)
        assert quantity_sentence(facets[pid]) in tied[0] and quantity_sentence(facets[pid]) in c.observable
        # numeric items carry the unit the instruction asks for, and the value in that unit
        assert c.expected_value == pytest.approx(float(next(p.value for p in spec.phenomena if p.id == pid))
                                                 * facets[pid].factor)
        assert c.unit == facets[pid].grading_unit
    assert len(sentences) == len(comps)  # nothing asked that is not graded


def test_insight_items_are_directional_and_traps_are_false_in_the_world(world: Path) -> None:
    contract, spec, items, _, _ = _report(world)
    g = dag(contract)
    for c in items:
        if c.section == "insight" and c.polarity == "+":
            assert not c.satisfy.endswith(" changes " + spec.target), c.satisfy
            assert any(w in c.satisfy for w in ("increases", "decreases", "highest", "lowest")), c.satisfy
        if c.id.startswith("neg_decoy_"):
            d = c.id.removeprefix("neg_decoy_")
            edge = (d, spec.target) if spec.kind == "cause" else (spec.target, d)
            assert not g.has_edge(*edge), f"trap {c.id} claims a true edge"
        if c.id.startswith("neg_conf_"):
            spurious = c.id.removeprefix("neg_conf_")
            assert not g.has_edge(spurious, spec.target), f"trap {c.id}: {spurious} does cause {spec.target}"
