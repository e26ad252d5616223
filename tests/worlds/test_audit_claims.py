"""The audit checks the contract's claims (issue 10, items 7 and 9).

For every mechanism type one small world is built three ways: as claimed (the audit passes), as a zero-effect twin
(generated with the edge's magnitudes at zero while contract.json keeps the claim: the audit fails), and with the
target 99.9 % blank in its file (the audit fails). Phenomena are recomputed here with plain pandas from the observed
CSV files, never with the project's recipes or kernels.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.worlds.worlds_testkit import contract, mini_contract
from worldsmith.evolution.worlds import build_world, read_audit
from worldsmith.evolution.worlds.audit_claims import phenomenon_claims, zero_effect_twin

SEED = 11


def _orders(world: Path) -> pd.DataFrame:
    """Orders joined with their customers, read with pandas only."""
    shop = pd.read_csv(world / "data" / "shop.csv", parse_dates=["date"])
    crm = pd.read_csv(world / "data" / "crm.csv")
    return shop.merge(crm, on="customer_id", how="left")


def _slope(x: pd.Series, y: pd.Series) -> float:
    d = pd.DataFrame({"x": x, "y": y}).dropna()
    return float(np.cov(d["x"], d["y"], ddof=1)[0, 1] / d["x"].var(ddof=1))


def _orders_world(edges: list[dict[str, Any]], phenomenon: dict[str, Any], **extra: Any) -> dict[str, Any]:
    data = mini_contract(edges=edges, phenomena=[phenomenon], **extra)
    data["entities"][1]["count"] = 3000
    data["entities"][0]["count"] = 300
    return data


SLOPE_INCOME = {"id": "income_slope", "statement": "{value}", "kind": "cause",
                "recipe": {"op": "slope", "x": "income", "y": "amount"}, "tolerance": {"rel": 0.05, "abs": 0.02}}
SLOPE_DISCOUNT = {"id": "discount_slope", "statement": "{value}", "kind": "cause",
                  "recipe": {"op": "slope", "x": "discount", "y": "amount"}, "tolerance": {"rel": 0.05, "abs": 0.02}}


def _linear() -> tuple[dict, Callable[[Path], float]]:
    d = _orders_world([{"sources": ["income"], "target": "amount", "mechanism": {"type": "linear", "coef": 0.8}}],
                      SLOPE_INCOME)
    return d, lambda w: _slope(_orders(w)["income"], _orders(w)["amount"])


def _logistic() -> tuple[dict, Callable[[Path], float]]:
    d = _orders_world([{"sources": ["discount"], "target": "returned",
                        "mechanism": {"type": "logistic", "coef": 0.12, "center": 15}}],
                      {"id": "return_gap", "statement": "{value}", "kind": "cause",
                       "recipe": {"op": "slope", "x": "discount", "y": "returned"}, "tolerance": {"rel": 0.1}})
    d["variables"] = [{"name": "returned", "entity": "orders", "kind": "binary", "intercept": -0.5}]
    d["systems"][1]["variables"] = ["discount", "returned"]
    return d, lambda w: _slope(_orders(w)["discount"], _orders(w)["returned"])


def _multiplicative() -> tuple[dict, Callable[[Path], float]]:
    d = _orders_world([{"sources": ["discount"], "target": "amount",
                        "mechanism": {"type": "multiplicative", "coef": -0.02, "center": 15}}], SLOPE_DISCOUNT)
    return d, lambda w: _slope(_orders(w)["discount"], _orders(w)["amount"])


def _threshold() -> tuple[dict, Callable[[Path], float]]:
    d = _orders_world([{"sources": ["discount"], "target": "amount",
                        "mechanism": {"type": "threshold", "threshold": 20, "jump": 3.0}}], SLOPE_DISCOUNT)
    return d, lambda w: _slope(_orders(w)["discount"], _orders(w)["amount"])


def _saturating() -> tuple[dict, Callable[[Path], float]]:
    d = _orders_world([{"sources": ["discount"], "target": "amount",
                        "mechanism": {"type": "saturating", "vmax": 12.0, "half": 5.0}}], SLOPE_DISCOUNT)
    return d, lambda w: _slope(_orders(w)["discount"], _orders(w)["amount"])


def _seasonal() -> tuple[dict, Callable[[Path], float]]:
    d = _orders_world([{"sources": [], "target": "amount",
                        "mechanism": {"type": "seasonal", "amplitude": 4.0}}],
                      {"id": "summer_gap", "statement": "{value}", "kind": "descriptive",
                       "recipe": {"op": "mean", "variable": "amount", "where": [
                           {"column": "date", "op": "<", "value": "2023-07-01"}]}})

    def plain(w: Path) -> float:
        o = _orders(w)
        return float(o.loc[o["date"] < "2023-07-01", "amount"].mean())
    return d, plain


def _step_event() -> tuple[dict, Callable[[Path], float]]:
    d = _orders_world([{"sources": [], "target": "amount", "mechanism": {"type": "step_event", "event": "launch",
                                                                       "jump": 2.0}}],
                      {"id": "launch_lift", "statement": "{value}", "kind": "cause",
                       "recipe": {"op": "pre_post", "variable": "amount", "event": "launch"},
                       "tolerance": {"rel": 0.05, "abs": 0.1}},
                      events=[{"name": "launch", "date": "2024-01-01", "description": "new checkout"}])

    def plain(w: Path) -> float:
        o = _orders(w)
        after = o["date"] >= "2024-01-01"
        return float(o.loc[after, "amount"].mean() - o.loc[~after, "amount"].mean())
    return d, plain


def _interaction() -> tuple[dict, Callable[[Path], float]]:
    d = _orders_world([{"sources": ["income", "discount"], "target": "amount",
                        "mechanism": {"type": "interaction", "coef": 0.02, "centers": [50, 15]}}], SLOPE_INCOME)
    return d, lambda w: _slope(_orders(w)["income"], _orders(w)["amount"])


def _lag() -> tuple[dict, Callable[[Path], float]]:
    d = mini_contract()
    d["entities"] = [d["entities"][0], {"name": "customer_months", "kind": "panel", "parent": "customers"}]
    d["entities"][0]["count"] = 120
    d["variables"] = [{"name": "visits", "entity": "customer_months", "distribution": {"type": "normal", "mean": 10,
                                                                                       "sd": 3}},
                      {"name": "spend", "entity": "customer_months", "intercept": 20.0,
                       "noise": {"type": "normal", "sd": 1.0}}]
    d["edges"] = [{"sources": ["visits"], "target": "spend", "mechanism": {"type": "lag", "coef": 0.5, "lag": 1,
                                                                          "center": 10}}]
    d["systems"] = [d["systems"][0], {"name": "activity", "entity": "customer_months",
                                      "variables": ["visits", "spend"], "format": "csv"}]
    d["phenomena"] = [{"id": "visits_lead_spend", "statement": "{value}", "kind": "cause",
                       "recipe": {"op": "lagged_corr", "x": "visits", "y": "spend", "lag": 1}}]

    def plain(w: Path) -> float:
        a = pd.read_csv(w / "data" / "activity.csv", parse_dates=["period"]).sort_values(["customer_id", "period"])
        prev = a.groupby("customer_id")["visits"].shift(1)
        both = pd.DataFrame({"x": prev, "y": a["spend"]}).dropna()
        return float(both["x"].corr(both["y"]))
    return d, plain


MECHANISMS = {"linear": _linear, "logistic": _logistic, "multiplicative": _multiplicative, "threshold": _threshold,
              "saturating": _saturating, "lag": _lag, "seasonal": _seasonal, "step_event": _step_event,
              "interaction": _interaction}


def _target_system(d: dict) -> tuple[int, str]:
    target = d["edges"][0]["target"]
    i = next(k for k, s in enumerate(d["systems"]) if target in s["variables"])
    return i, target


@pytest.mark.parametrize("mech", sorted(MECHANISMS))
def test_true_world_passes_twin_and_blank_fail(mech, tmp_path):
    data, plain = MECHANISMS[mech]()
    claim = contract(data)
    edge = str(claim.edges[0].id)
    assert claim.edges[0].mechanism.type == mech

    build_world(claim, SEED, tmp_path / "true")
    r = read_audit(tmp_path / "true")
    assert r.passed, [x.reason for x in r.failures()]
    ph = r.phenomena[0]
    truth = json.loads((tmp_path / "true" / ".truth" / "phenomena.json").read_text())["phenomena"][0]["value"]
    mine = plain(tmp_path / "true")  # an independent pandas computation on the observed file
    assert mine == pytest.approx(truth, rel=0.05, abs=0.02)
    assert ph.observed == pytest.approx(mine, rel=1e-6, abs=1e-9)

    build_world(claim, SEED, tmp_path / "twin", generated_from=zero_effect_twin(claim, edge))
    t = read_audit(tmp_path / "twin")
    assert not t.passed
    assert {x.id: x.status for x in t.edges}[edge] == "fail"
    assert json.loads((tmp_path / "twin" / "contract.json").read_text()) == claim.model_dump(mode="json")
    if edge in phenomenon_claims(claim, claim.phenomena[0]):  # the recomputation matches, the claim does not
        assert t.phenomena[0].status == "fail" and "not in the data" in t.phenomena[0].reason

    blank = json.loads(json.dumps(data))
    i, target = _target_system(blank)
    blank["systems"][i]["defects"] = [{"type": "missing", "variable": target, "rate": 0.999}]
    build_world(contract(blank), SEED, tmp_path / "blank")
    b = read_audit(tmp_path / "blank")
    assert not b.passed
    assert {x.id: x.status for x in b.edges}[edge] == "fail"


def test_zero_effect_twin_zeroes_only_that_edge():
    c = contract(mini_contract())
    twin = zero_effect_twin(c, "income->amount")
    assert twin.edges[0].mechanism.coef == 0.0 and twin.edges[1].mechanism.coef == -0.5
    assert c.edges[0].mechanism.coef == 0.8  # the claim is untouched
    with pytest.raises(KeyError, match="no edge"):
        zero_effect_twin(c, "nope")


def test_phenomenon_claims_follow_the_recipe():
    c = contract(mini_contract(phenomena=[SLOPE_INCOME, {"id": "m", "statement": "{value}",
                                                         "recipe": {"op": "mean", "variable": "amount"}}]))
    assert phenomenon_claims(c, c.phenomena[0]) == ["income->amount"]
    assert phenomenon_claims(c, c.phenomena[1]) == []  # a level claims no effect


def test_verdict_requires_every_phenomenon(tmp_path):
    """One phenomenon that cannot be recomputed (its column is never observed) fails the world."""
    data = mini_contract(phenomena=[{"id": "mean_amount", "statement": "{value}",
                                     "recipe": {"op": "mean", "variable": "amount"}},
                                    {"id": "mean_income", "statement": "{value}",
                                     "recipe": {"op": "mean", "variable": "income"}}])
    data["systems"][0]["variables"] = ["region"]
    build_world(contract(data), SEED, tmp_path / "w")
    r = read_audit(tmp_path / "w")
    assert {x.id: x.status for x in r.phenomena} == {"mean_amount": "pass", "mean_income": "fail"}
    assert not r.passed


def test_twin_of_a_summed_part_fails_the_sum(panel_world, tmp_path):
    """Zeroing a part of a declared sum: the twin is still generated, and the audit of the claim fails the sum."""
    from worldsmith.evolution.worlds import load_world

    claim = load_world(panel_world).contract
    total = next(i for i in claim.invariants if i.kind == "sum")
    edge = next(str(e.id) for e in claim.edges if e.target == total.total)
    twin = zero_effect_twin(claim, edge)
    assert not [i for i in twin.invariants if i.kind == "sum"] and [i for i in claim.invariants if i.kind == "sum"]
    build_world(claim, 5, tmp_path / "z", generated_from=twin)
    r = read_audit(tmp_path / "z")
    assert not r.passed
    assert {x.id: x.status for x in r.invariants}[f"sum:{total.total}"] == "fail"
    assert {x.id: x.status for x in r.edges}[edge] == "fail"
