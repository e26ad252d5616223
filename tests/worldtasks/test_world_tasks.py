"""World → tasks: specs grounded in audited truth, rubric items, question/contract writers with feedback."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from worldsmith.evolution.worlds.audit import load_contract, load_phenomena_truth
from worldsmith.evolution.worlds.templates import load_template
from worldsmith.evolution.worlds.tasks import method_items, quantity_phrase, rubric_items, sample_specs


def test_specs_target_max_in_and_out_degree_and_use_only_recoverable_phenomena(world: Path) -> None:
    from worldsmith.evolution.worlds.audit import read_audit, recoverable_phenomena
    from worldsmith.evolution.worlds.tasks import dag

    specs = sample_specs(world, max_tasks=6, seed=1)
    assert specs, "an audited template world must yield tasks"
    contract = load_contract(world)
    g = dag(contract)
    ok = {r.id for r in recoverable_phenomena(read_audit(world))}
    for s in specs:
        sub = g.subgraph({n for e in contract.edges if e.id in s.subgraph for n in contract.edge_nodes(e)} | {s.target})
        degree = sub.in_degree if s.kind == "cause" else sub.out_degree
        assert degree(s.target) == max(degree(n) for n in sub.nodes if not n.startswith("@"))
        expected = sorted(g.predecessors(s.target) if s.kind == "cause" else g.successors(s.target))
        assert set(s.related) <= set(expected) and s.related
        assert {p.id for p in s.phenomena} <= ok
    assert sample_specs(world, max_tasks=6, seed=1) == specs  # deterministic


def test_rubric_items_carry_canonical_values_and_negative_items(world: Path) -> None:
    contract = load_contract(world)
    truth = load_phenomena_truth(world)
    spec = next(s for s in sample_specs(world, max_tasks=10, seed=0) if s.kind == "cause")
    items = rubric_items(spec, contract)
    comp = [c for c in items if c.section == "computation"]
    assert comp and all(c.source == "gt" and c.deterministic for c in comp)
    for c in comp:
        assert c.expected_value == pytest.approx(float(truth[c.id.removeprefix("comp_")].value))
    assert {c.id for c in items if c.section == "insight" and c.polarity == "+"} == {f"ins_{r}" for r in spec.related}
    from worldsmith.evolution.worlds.tasks import load_ledger

    methods = method_items(spec, load_ledger(world))
    assert all(i.section == "method" and i.source == "gt" for i in methods)


def test_quantity_phrase_hides_the_value() -> None:
    assert quantity_phrase("The test arm pays {value:.2f} USD more.") == "The test arm pays X USD more."


def test_question_writer_rejects_leaks_and_falls_back(world: Path) -> None:
    from worldsmith.agents.world_writers import question_problems, write_request

    spec = next(s for s in sample_specs(world, max_tasks=10, seed=0) if s.kind == "cause")
    contract = load_contract(world)
    p = max((p for p in spec.phenomena if isinstance(p.value, float)), key=lambda p: abs(p.value))
    leaky = f"Please look into {spec.target.replace('_', ' ')}; I heard the gap is {p.value:.2f}, can you confirm that?"
    assert any("numbers" in x for x in question_problems(leaky, spec))

    class Stub:
        calls = 0

        async def astructured(self, messages, schema, role):
            Stub.calls += 1
            return schema(request=leaky)

    out = asyncio.run(write_request(Stub(), spec, contract.persona, ["crm.csv"], model="stub", retries=1))
    assert Stub.calls == 2 and out.produced_by == "template:request"
    assert spec.target.replace("_", " ") in out.value and f"{p.value:.2f}" not in out.value


def test_contract_writer_feeds_validation_problems_back() -> None:
    from worldsmith.agents.world_writers import write_contract
    from worldsmith.core.world_contract import WorldContract

    template = load_template("customer_pricing", rows=1000)
    bad = template.model_dump(mode="json")
    bad["edges"].append({"sources": ["churned"], "target": "price", "mechanism": {"type": "linear", "coef": 1.0}})
    seen: list[str] = []

    class Stub:
        async def astructured(self, messages, schema, role, **kw):
            seen.append(messages[-1]["content"])
            return WorldContract.model_validate(bad if len(seen) == 1 else template.model_dump(mode="json"))

    out = asyncio.run(write_contract(Stub(), template, template.persona, model="stub", retries=2))
    assert out.produced_by == "llm:stub" and out.attempts == 2
    assert "cycle" in seen[1].lower()  # the second prompt shows the model its contract's problem
