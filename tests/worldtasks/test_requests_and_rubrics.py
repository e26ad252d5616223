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


# --------------------------------------------------------------------------- one request per emitted task
BOTH = ("Hi, I'm Dana from revenue. We ran a price test on part of our accounts. Can you tell me the churn "
        "difference between the test and control arms, and the price gap between them, using crm.csv?")
CHURN_ONLY = ("Hi, I'm Dana from revenue. We raised prices for a test group of accounts. Can you compare churn "
              "between the test and control arms using crm.csv and tell me the difference, whichever way it goes?")
PRICE_ONLY = ("Hi, I'm Dana from revenue. We raised prices for a test group of accounts. Can you tell me how the "
              "price paid differs between the test and control arms, using crm.csv, whichever way it goes?")


def test_a_closed_form_request_must_not_ask_for_a_quantity_another_task_grades(world: Path) -> None:
    facets = world_answer_specs(world)
    churn, price = facets["test_churn_gap"], facets["test_price_gap"]
    both = request_problems(BOTH, target="churned", target_description="", files=FILES, answers=[churn],
                            others=[price])
    assert any("also asks for 'price gap'" in p for p in both), both
    # naming the intervention ("raised prices for a test group") is no request for the price gap
    assert request_problems(CHURN_ONLY, target="churned", target_description="", files=FILES, answers=[churn],
                            others=[price]) == []
    # a request for the price gap must be about price, not churn
    plain = ("Hi, I'm Dana from revenue. Can you compare churn between the test and control arms of our experiment "
             "using crm.csv and tell me the difference, whichever way it goes?")
    wrong = request_problems(plain, target="price", target_description="", files=FILES, answers=[price],
                             others=[churn], one_quantity=True)
    assert any("graded quantity" in p for p in wrong), wrong


def _pricing_spec(world: Path):
    spec = next(s for s in sample_specs(world, max_tasks=10, seed=0)
                if {"test_churn_gap", "test_price_gap"} <= {p.id for p in s.phenomena})
    facets = world_answer_specs(world)
    return spec, [facets[p.id] for p in spec.phenomena if isinstance(p.value, (int, float))]


def _graded_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("Graded quantity:"))


def test_each_closed_form_task_gets_a_request_about_exactly_its_quantity(world: Path, scripted) -> None:
    """Scripted model: asked for one quantity it writes a request about that quantity; asked for the report it
    asks about both. Every request is accepted and each closed-form one names only its own quantity."""
    from worldsmith.agents.world_writers import write_requests

    script, make_runtime = scripted

    def respond(req):
        graded = _graded_line(req.text)
        if "`churned`" in graded and "`price`" not in graded:
            return {"request": CHURN_ONLY}
        if "`price`" in graded and "`churned`" not in graded:
            return {"request": PRICE_ONLY}
        return {"request": BOTH}

    script.fallback(respond)
    spec, answers = _pricing_spec(world)
    llm = make_runtime().llm
    report, each = asyncio.run(write_requests(llm, spec, load_contract(world).persona, FILES, model="scripted",
                                              answers=answers))
    assert report.value == BOTH and report.produced_by == "llm:scripted"
    assert each["test_churn_gap"].value == CHURN_ONLY and each["test_churn_gap"].produced_by == "llm:scripted"
    assert each["test_price_gap"].value == PRICE_ONLY and each["test_price_gap"].produced_by == "llm:scripted"
    asked = [_graded_line(r.text) for r in script.requests]
    assert any("`churned`" in g and "`price`" not in g for g in asked)  # the model was told the one quantity


def test_a_closed_form_request_that_asks_for_more_falls_back_to_the_quantity_template(world: Path, scripted) -> None:
    from worldsmith.agents.world_writers import write_requests

    script, make_runtime = scripted
    script.fallback({"request": BOTH})
    spec, answers = _pricing_spec(world)
    persona = load_contract(world).persona
    report, each = asyncio.run(write_requests(make_runtime().llm, spec, persona, FILES, model="scripted",
                                              answers=answers))
    assert report.value == BOTH  # the report grades both gaps
    churn = each["test_churn_gap"]
    assert churn.produced_by == "template:request:quantity"
    assert any("also asks for 'price gap'" in e for e in churn.errors or [])
    assert "the difference in churned" in churn.value and "price gap" not in churn.value.lower()
    facets = world_answer_specs(world)
    assert question_problems(churn.value, spec, FILES, [facets["test_churn_gap"]], [facets["test_price_gap"]],
                             one_quantity=True) == []
    price = each["test_price_gap"]
    assert price.produced_by == "template:request:quantity" and "the difference in price" in price.value
    assert "churn" not in price.value.lower()
    assert any("churn difference" in e for e in price.errors or [])
