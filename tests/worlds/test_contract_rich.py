"""Validation of the richer contract language: each mistake is reported with its path and a hint."""

from __future__ import annotations

import pytest

from tests.worlds.worlds_testkit import contract, mini_contract
from worldsmith.evolution.worlds import validate_contract
from worldsmith.evolution.worlds.validate import edge_graph


def _errors(d: dict) -> list:
    return [p for p in validate_contract(contract(d)) if p.severity == "error"]


def _with_edge(mech: dict, sources=("discount",), **extra) -> dict:
    d = mini_contract(events=[{"name": "launch", "date": "2024-01-01", "description": "x"}],
                      calendars=[{"name": "weekends", "weekdays": [5, 6]}])
    d["edges"].append({"id": "new", "sources": list(sources), "target": "amount", "mechanism": mech, **extra})
    return d


GOOD = [
    _with_edge({"type": "power", "coef": -0.05, "center": 15}),
    _with_edge({"type": "piecewise", "knots": [10, 20], "slopes": [1, 0, -1]}),
    _with_edge({"type": "binned", "cuts": [10], "effects": [2]}),
    _with_edge({"type": "event_percent", "event": "launch", "percent": 5}, sources=()),
    _with_edge({"type": "calendar", "calendar": "weekends", "jump": 1}, sources=()),
    _with_edge({"type": "linear", "coef": 1}, gate={"variable": "income", "threshold": 40}),
    _with_edge({"type": "linear", "coef": 1}, heterogeneity={"by": ["region", "@quarter"],
                                                             "multipliers": {"north|Q1": 2}}),
]


@pytest.mark.parametrize("d", GOOD, ids=range(len(GOOD)))
def test_well_formed_new_mechanisms_validate(d):
    assert _errors(d) == []


BAD = [
    (_with_edge({"type": "piecewise", "knots": [10], "slopes": [1]}), "edges[2](new).mechanism.slopes",
     "one slope per segment"),
    (_with_edge({"type": "piecewise", "knots": [20, 10], "slopes": [1, 2, 3]}), "edges[2](new).mechanism.knots", ""),
    (_with_edge({"type": "binned", "cuts": [10, 20], "effects": [1]}), "edges[2](new).mechanism.effects",
     "lowest bin is the reference"),
    (_with_edge({"type": "power", "coef": 1, "exponent": 0}), "edges[2](new).mechanism.exponent", "inverted U"),
    (_with_edge({"type": "event_percent", "event": "nope", "percent": 5}, sources=()),
     "edges[2](new).mechanism.event", "declare it under events"),
    (_with_edge({"type": "calendar", "calendar": "holidays", "jump": 1}, sources=()),
     "edges[2](new).mechanism.calendar", "declare it under calendars"),
    (_with_edge({"type": "linear", "coef": 1}, gate={"variable": "region", "threshold": 1}),
     "edges[2](new).gate.variable", "numeric"),
    (_with_edge({"type": "linear", "coef": 1}, heterogeneity={"by": ["region", "@quarter"],
                                                              "multipliers": {"north": 2}}),
     "edges[2](new).heterogeneity.multipliers", "'north|Q1'"),
]


@pytest.mark.parametrize("d,path,hint", BAD, ids=range(len(BAD)))
def test_mistakes_are_reported_with_path_and_hint(d, path, hint):
    got = _errors(d)
    assert [p.path for p in got] == [path], got
    assert hint in got[0].hint


def test_calendar_moderator_needs_a_dated_target():
    d = mini_contract()
    d["variables"].append({"name": "score", "entity": "customers", "intercept": 1.0})
    d["edges"].append({"sources": ["income"], "target": "score", "mechanism": {"type": "linear", "coef": 1},
                       "heterogeneity": {"by": "@quarter", "multipliers": {"Q1": 2}}})
    assert [p.path for p in _errors(d)] == ["edges[2](income->score).heterogeneity.by"]


def test_derived_and_fixed_mistakes():
    d = mini_contract()
    d["entities"][0]["attributes"].append({"name": "tier", "distribution": {"type": "fixed", "values": ["a", "b"]}})
    d["variables"] += [
        {"name": "stock", "entity": "orders", "derive": {"op": "balance", "inflows": ["amount"]}},
        {"name": "order_total", "entity": "orders", "derive": {"op": "aggregate", "of": "income"}},
        {"name": "ratio", "entity": "orders", "derive": {"op": "ratio", "numerator": "amount", "denominator": "nope"}}]
    got = {p.path: p for p in _errors(d)}
    assert set(got) == {"entities[0](customers).attributes(tier).distribution", "variables(stock).derive",
                        "variables(order_total).derive", "variables(ratio).derive"}
    assert "count to 2" in got["entities[0](customers).attributes(tier).distribution"].hint
    assert "panel" in got["variables(stock).derive"].hint
    assert got["variables(order_total).derive"].code == "grain"
    assert got["variables(ratio).derive"].code == "unknown_variable"


def test_moderators_gates_and_derivation_inputs_order_generation():
    d = mini_contract()
    d["edges"][1]["gate"] = {"variable": "income", "threshold": 50}
    d["variables"].append({"name": "per_income", "entity": "orders",
                           "derive": {"op": "ratio", "numerator": "amount", "denominator": "income"}})
    g = edge_graph(contract(d))
    assert g.has_edge("income", "amount") and g.has_edge("amount", "per_income")
