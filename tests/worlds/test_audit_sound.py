"""A sound audit (issue 10 item 7): grouping columns order generation, shared-basis edges are estimated jointly,
truth files are strict JSON, and validation warns about claims that can never be confirmed."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.worlds.worlds_testkit import contract, mini_contract
from worldsmith.evolution.worlds import build_world, read_audit
from worldsmith.evolution.worlds.engine import generate
from worldsmith.evolution.worlds.validate import edge_graph, validate_contract


def _strict_json(text: str):
    def refuse(name: str):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def _zone_contract() -> dict:
    """A grouping column (`zone`) whose name sorts after its target (`amount`)."""
    d = mini_contract()
    d["entities"][0]["attributes"][0]["name"] = "zone"
    d["systems"][0]["variables"] = ["zone", "income"]
    d["edges"][1]["heterogeneity"] = {"by": "zone", "multipliers": {"north": 2.0}}
    return d


def test_grouping_column_is_generated_before_its_target():
    c = contract(_zone_contract())
    assert edge_graph(c).has_edge("zone", "amount")
    s = generate(c, 1)  # used to raise KeyError: 'zone'
    orders = s.wide("orders")
    # the discount effect is -0.5 per point, doubled in the north: compare slopes with plain numpy
    north, south = orders[orders["zone"] == "north"], orders[orders["zone"] == "south"]

    def slope(d: pd.DataFrame) -> float:
        return float(np.polyfit(d["discount"], d["amount"] - 0.8 * d["income"], 1)[0])
    assert slope(north) == pytest.approx(-1.0, abs=0.05)
    assert slope(south) == pytest.approx(-0.5, abs=0.05)


def test_two_edges_split_by_one_group_are_estimated_jointly(tmp_path):
    d = mini_contract()
    d["edges"] = [
        {"id": "income", "sources": ["income"], "target": "amount", "mechanism": {"type": "linear", "coef": 0.8}},
        {"id": "price_a", "sources": ["discount"], "target": "amount", "mechanism": {"type": "linear", "coef": -0.5},
         "heterogeneity": {"by": "region", "multipliers": {"north": 2.0}}},
        {"id": "price_b", "sources": ["discount"], "target": "amount", "mechanism": {"type": "linear", "coef": -0.3},
         "heterogeneity": {"by": "region", "multipliers": {"south": 0.5}}}]
    build_world(contract(d), 4, tmp_path / "w")
    r = read_audit(tmp_path / "w")
    edges = {x.id: x for x in r.edges}
    assert r.passed, [x.reason for x in r.failures()]
    # north: -0.5 * 2 + -0.3 = -1.3 per point; south: -0.5 + -0.3 * 0.5 = -0.65 (one term per group)
    assert edges["price_a"].expected == {"coef@north": pytest.approx(-1.3), "coef@south": pytest.approx(-0.65)}
    assert edges["price_a"].observed["coef@north"] == pytest.approx(-1.3, abs=0.1)
    assert edges["price_b"].observed == edges["price_a"].observed
    assert edges["price_a"].details["estimated_jointly_with"] == ["price_b"]


def test_truth_files_are_strict_json_with_null_for_nan(tmp_path):
    d = mini_contract(phenomena=[
        {"id": "mean_amount", "statement": "{value}", "recipe": {"op": "mean", "variable": "amount"}},
        {"id": "never", "statement": "{value}", "recipe": {"op": "mean", "variable": "amount",
                                                            "where": [{"column": "discount", "op": ">",
                                                                       "value": 1000}]}}])
    build_world(contract(d), 2, tmp_path / "w")
    truth = _strict_json((tmp_path / "w" / ".truth" / "phenomena.json").read_text())
    assert {p["id"]: p["value"] for p in truth["phenomena"]}["never"] is None
    _strict_json((tmp_path / "w" / "AUDIT.json").read_text())
    r = read_audit(tmp_path / "w")  # read back
    assert {x.id: x.status for x in r.phenomena} == {"mean_amount": "pass", "never": "fail"}
    assert "no canonical value" in r.phenomena[1].reason


def _warnings(d: dict) -> list:
    return [p for p in validate_contract(contract(d)) if p.severity == "warning"]


def test_validation_warns_about_unobservable_invariants():
    d = mini_contract(invariants=[{"kind": "non_negative", "variable": "amount"},
                                  {"kind": "bounds", "variable": "discount"}])
    assert _warnings(d) == []
    d["systems"][1]["variables"] = ["discount"]  # amount is recorded nowhere
    got = [w for w in _warnings(d) if w.code == "unobservable_invariant"]
    assert [w.path for w in got] == ["invariants[0](non_negative)"]
    assert "amount" in got[0].message and got[0].hint


def test_validation_warns_about_values_clipped_at_bounds():
    d = mini_contract()
    d["entities"][0]["attributes"][1]["bounds"] = {"lower": 45}  # income ~ N(50, 10): 31% below 45
    got = [w for w in _warnings(d) if w.code == "clipped_at_bounds"]
    assert len(got) == 1 and got[0].path == "entities[0].attributes(income).bounds"
    assert "31%" in got[0].message
    d["entities"][0]["attributes"][1]["bounds"] = {"lower": 0}  # 5 sd away: nothing clipped in practice
    assert [w for w in _warnings(d) if w.code == "clipped_at_bounds"] == []
    # and the share the warning names is the share the engine clips (plain pandas on a generated world)
    d["entities"][0]["attributes"][1]["bounds"] = {"lower": 45}
    d["entities"][0]["count"] = 5000
    income = pd.Series(generate(contract(d), 3).tables["customers"]["income"])
    assert (income == 45).mean() == pytest.approx(0.31, abs=0.02)


def test_audit_notes_values_clipped_at_a_bound(tmp_path):
    d = mini_contract()
    d["variables"][0]["intercept"] = 2.0  # amount ~ 2 + 0.8 (income) - 0.5 (discount) + noise: often below 0
    d["edges"][0]["mechanism"]["center"] = 50.0
    build_world(contract(d), 2, tmp_path / "w")
    shop = pd.read_csv(tmp_path / "w" / "data" / "shop.csv")
    share = (shop["amount"] == 0).mean()  # plain pandas on the observed file
    assert share > 0.2
    r = read_audit(tmp_path / "w")
    note = (f"`amount`: {share:.1%} of observed values sit at the lower bound 0 (clipped); effects on `amount` are "
            f"attenuated there")
    assert [w for w in r.warnings if w.startswith("`amount`")] == [note]
    assert "Warnings:" in (tmp_path / "w" / "WORLD.md").read_text()


@pytest.mark.parametrize("case", ["binary switch", "event switch, dates jittered"])
def test_on_off_switches_are_detected(case, tmp_path):
    from worldsmith.evolution.worlds.audit_claims import zero_effect_twin

    d = mini_contract(events=[{"name": "launch", "date": "2024-01-01", "description": "new checkout"}])
    if case == "binary switch":  # a 0/1 flag read through a threshold at 0.5
        d["entities"][1]["attributes"].append({"name": "promo", "distribution": {"type": "bernoulli", "p": 0.3}})
        d["systems"][1]["variables"].append("promo")
        d["edges"].append({"id": "switch", "sources": ["promo"], "target": "amount",
                           "mechanism": {"type": "threshold", "threshold": 0.5, "jump": 3.0}})
        def flag(o: pd.DataFrame) -> pd.Series:
            return o["promo"] == 1
    else:  # a step at an event date, with up to 20 days of undocumented posting jitter
        d["edges"].append({"id": "switch", "sources": [], "target": "amount",
                           "mechanism": {"type": "step_event", "event": "launch", "jump": 3.0}})
        d["systems"][1]["defects"] = [{"type": "delay", "days": 0, "jitter_days": 20, "rate": 1.0}]
        def flag(o: pd.DataFrame) -> pd.Series:
            return pd.to_datetime(o["date"]) >= "2024-01-01"
    c = contract(d)
    build_world(c, 5, tmp_path / "t")
    r = read_audit(tmp_path / "t")
    assert r.passed, [x.reason for x in r.failures()]
    sw = {x.id: x for x in r.edges}["switch"]
    assert sw.observed == pytest.approx(3.0, abs=0.4)
    # plain pandas: the raw gap between rows with the switch on and off is near the jump (other causes are
    # independent of it), so the audit's estimate is the jump at the switch
    shop = pd.read_csv(tmp_path / "t" / "data" / "shop.csv")
    on = flag(shop)
    gap = shop.loc[on, "amount"].mean() - shop.loc[~on, "amount"].mean()
    assert gap == pytest.approx(3.0, abs=0.6)
    build_world(c, 5, tmp_path / "z", generated_from=zero_effect_twin(c, "switch"))
    z = read_audit(tmp_path / "z")
    assert not z.passed and {x.id: x.status for x in z.edges}["switch"] == "fail"


def test_validation_warns_when_a_claimed_effect_is_too_small_to_confirm(tmp_path):
    d = mini_contract()
    assert [w for w in _warnings(d) if w.code == "undetectable_edge"] == []
    # discount ~ U(0, 30): sd 8.66; 4000 orders; noise sd 2: a coef of -0.002 is expected at z = 0.002 * 8.66 *
    # sqrt(4000) / 2 = 0.55
    d["edges"][1]["mechanism"]["coef"] = -0.002
    got = [w for w in _warnings(d) if w.code == "undetectable_edge"]
    assert [w.path for w in got] == ["edges[1](discount->amount)"] and "z = 0.5" in got[0].message
    build_world(contract(d), 1, tmp_path / "w")  # and indeed the audit cannot confirm it
    assert {x.id: x.status for x in read_audit(tmp_path / "w").edges}["discount->amount"] == "fail"
