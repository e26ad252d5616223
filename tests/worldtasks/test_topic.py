"""A topic picks the world's domain and the variables its tasks target first."""

from __future__ import annotations

from pathlib import Path

import pytest

from worldsmith.evolution.worlds.templates import load_template
from worldsmith.evolution.worlds.topic import match_topic, stem, topic_variables
from worldsmith.evolution.worlds.tasks import sample_specs
from worldsmith.graphs.world import build_world_graph


@pytest.mark.parametrize(("topic", "domain", "variable"), [
    ("churn", "customer_pricing", "churned"),
    ("what drives employee salary", "people", "salary"),
    ("fraud in card payments", "risk_fraud", "fraud"),
    ("energy consumption of buildings", "energy_iot", "consumption_kwh"),
])
def test_topic_picks_the_matching_template_and_variable(topic: str, domain: str, variable: str) -> None:
    best = match_topic(topic)[0]
    assert (best.domain, best.variables[0]) == (domain, variable)


def test_inflections_match_but_unrelated_prefixes_do_not() -> None:
    assert stem("cancellations") == stem("cancelled")
    assert {m.domain for m in match_topic("cancellations")} >= {"customer_pricing", "transportation"}
    assert topic_variables(load_template("customer_pricing"), "pricing") == ["price"]
    assert not any("read_depth" in m.variables for m in match_topic("readmission"))
    assert match_topic("zebra stripes") == []


def test_focus_variables_become_the_first_targets(world: Path) -> None:
    focus = topic_variables(load_template("customer_pricing"), "support tickets")
    assert focus == ["support_tickets"]
    plain = sample_specs(world, max_tasks=2, seed=1)
    focused = sample_specs(world, max_tasks=2, seed=1, focus=focus)
    assert "support_tickets" not in [s.target for s in plain]  # without a focus this seed targets others
    assert focused[0].target == "support_tickets" and focused[0].kind == "cause"
    assert focused[0].related and "support_tickets" not in focused[0].related  # its true causes are the answer
    assert sample_specs(world, max_tasks=2, seed=1, focus=["no_such_variable"]) == plain


async def test_world_graph_picks_the_domain_from_the_topic(scripted, tmp_path: Path) -> None:
    _, make_rt = scripted
    rt = make_rt()
    state = {"domain": None, "topic": "churn", "seed": 0, "rows": 1000, "out_dir": str(tmp_path / "w"),
             "make_tasks": False, "contract_source": "template"}
    events, final = [], {}
    async for mode, chunk in build_world_graph().astream(state, context=rt, stream_mode=["custom", "values"]):
        (events.append(chunk) if mode == "custom" and chunk["type"] == "world" else final.update(chunk) if mode == "values" else None)
    assert final["domain"] == "customer_pricing"
    assert events[0]["step"] == "topic" and "churned" in events[0]["text"]
    assert "churn" in final["topic_note"]

    state = {**state, "topic": "zebra stripes", "out_dir": str(tmp_path / "w2")}
    async for mode, chunk in build_world_graph().astream(state, context=rt, stream_mode=["values"]):
        final = chunk
    assert "matches no template" in final["topic_note"] and final["domain"]
