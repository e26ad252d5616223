"""No-effect claims (a spurious driver), conditional claims ("only while stock is low", "only after the launch")
and the partial-correlation recipe. A true world passes; a world generated with the effect it denies, or without
the effect where it is claimed, fails. Expected values are recomputed here with plain pandas/numpy."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.worlds.worlds_testkit import contract, mini_contract
from worldsmith.core.answer_spec import facet_lines, lint_answer_spec
from worldsmith.evolution.worlds import build_world
from worldsmith.evolution.worlds.answer_specs import world_answer_specs
from worldsmith.evolution.worlds.audit_effects import check_conditional
from worldsmith.evolution.worlds.validate import validate_contract

NO_ADS = {"kind": "no_effect", "id": "ads_do_not_move_amount", "source": "ads", "target": "amount", "bound": 0.15,
          "statement": "ads do not move order amounts"}
LOW_STOCK = {"kind": "conditional", "id": "discount_only_when_low_stock", "source": "discount", "target": "amount",
             "when": [{"column": "low_stock", "op": "==", "value": 1}], "effect": -0.8, "bound": 0.1,
             "statement": "discounts cut the amount only while stock is low"}


def promo_data() -> dict:
    """Richer customers see more ads and spend more (ads themselves do nothing); a discount lowers the amount only
    on orders placed while stock is low."""
    d = mini_contract()
    d["entities"][1]["attributes"].append({"name": "low_stock", "distribution": {"type": "bernoulli", "p": 0.3}})
    d["variables"].insert(0, {"name": "ads", "entity": "orders", "unit": "impressions", "intercept": 10.0,
                              "noise": {"type": "normal", "sd": 2.0}})
    d["edges"] = [
        {"sources": ["income"], "target": "ads", "mechanism": {"type": "linear", "coef": 0.3, "center": 50}},
        {"sources": ["income"], "target": "amount", "mechanism": {"type": "linear", "coef": 0.8, "center": 50}},
        {"sources": ["discount", "low_stock"], "target": "amount", "mechanism": {"type": "interaction", "coef": -0.8}}]
    d["systems"][1]["variables"] = ["discount", "low_stock", "ads", "amount"]
    d["phenomena"].append({"id": "ads_amount_partial", "recipe": {"op": "partial_corr", "x": "ads", "y": "amount",
                                                                  "controls": ["income"]},
                           "statement": "Holding income fixed, ads and amount correlate at {value:.3f}.",
                           "tolerance": {"abs": 0.05, "rel": 0}})
    d["claims"] = [NO_ADS, LOW_STOCK]
    return d


def _build(tmp: Path, name: str, generated_from: dict | None = None) -> dict:
    out = tmp / name
    gen = None
    if generated_from is not None:
        gen = contract({**generated_from, "claims": []})
    build_world(contract(promo_data()), seed=6, out_dir=out, generated_from=gen)
    return json.loads((out / "AUDIT.json").read_text())


def _claims(audit: dict) -> dict[str, str]:
    return {r["id"]: r["status"] for r in audit["claims"]}


@pytest.fixture(scope="module")
def promo_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("effects") / "true"
    build_world(contract(promo_data()), seed=6, out_dir=out)
    return out


def test_the_true_world_holds_every_claim(promo_world: Path) -> None:
    audit = json.loads((promo_world / "AUDIT.json").read_text())
    assert _claims(audit) == {"ads_do_not_move_amount": "pass", "discount_only_when_low_stock": "pass"}
    assert all(r["status"] == "pass" for k in ("edges", "phenomena") for r in audit[k])
    assert "## No-effect and conditional claims" in (promo_world / "WORLD.md").read_text()


def test_the_spurious_driver_correlates_but_not_once_income_is_held_fixed(promo_world: Path) -> None:
    crm = pd.read_csv(promo_world / "data" / "crm.csv")
    shop = pd.read_csv(promo_world / "data" / "shop.csv").merge(crm, on="customer_id")
    assert shop[["ads", "amount"]].corr().iloc[0, 1] > 0.3  # naive reading: "ads raise amounts"
    rx = shop["ads"] - np.polyval(np.polyfit(shop["income"], shop["ads"], 1), shop["income"])
    ry = shop["amount"] - np.polyval(np.polyfit(shop["income"], shop["amount"], 1), shop["income"])
    partial = np.corrcoef(rx, ry)[0, 1]
    assert abs(partial) < 0.05
    truth = {p["id"]: p["value"] for p in json.loads((promo_world / ".truth" / "phenomena.json").read_text())["phenomena"]}
    assert abs(truth["ads_amount_partial"] - partial) < 0.01  # file values are rounded to cents


def test_a_world_where_ads_do_move_amounts_fails_the_no_effect_claim(tmp_path: Path) -> None:
    gen = promo_data()
    gen["edges"].append({"sources": ["ads"], "target": "amount", "mechanism": {"type": "linear", "coef": 0.5}})
    audit = _build(tmp_path, "ads_work", gen)
    claims = _claims(audit)
    assert claims["ads_do_not_move_amount"] == "fail"
    assert claims["discount_only_when_low_stock"] == "pass"


def test_an_unconditional_discount_effect_fails_the_conditional_claim(tmp_path: Path) -> None:
    gen = promo_data()
    gen["edges"][2] = {"sources": ["discount"], "target": "amount", "mechanism": {"type": "linear", "coef": -0.8}}
    audit = _build(tmp_path, "always", gen)
    r = next(x for x in audit["claims"] if x["id"] == "discount_only_when_low_stock")
    assert r["status"] == "fail" and r["observed"]["elsewhere"] < -0.5


def test_no_discount_effect_at_all_fails_the_conditional_claim(tmp_path: Path) -> None:
    gen = copy.deepcopy(promo_data())
    gen["edges"][2]["mechanism"]["coef"] = 0.0
    audit = _build(tmp_path, "never", gen)
    r = next(x for x in audit["claims"] if x["id"] == "discount_only_when_low_stock")
    assert r["status"] == "fail" and abs(r["observed"]["where"]) < 0.1


def _launch_frame(effect_before: float) -> pd.DataFrame:
    """Orders over two years; a discount cuts the amount by 0.5 per point from the 2024 launch on (and by
    `effect_before` before it). Written here with numpy, independent of the engine."""
    rng = np.random.default_rng(0)
    n = 3000
    date = pd.Timestamp("2023-01-01") + pd.to_timedelta(rng.integers(0, 730, n), unit="D")
    income = rng.normal(50, 10, n)
    discount = rng.uniform(0, 30, n)
    after = date >= pd.Timestamp("2024-01-01")
    amount = 50 + 0.8 * (income - 50) + np.where(after, -0.5, effect_before) * discount + rng.normal(0, 2, n)
    return pd.DataFrame({"date": date, "income": income, "discount": discount, "amount": amount})


@pytest.mark.parametrize("before, verdict", [(0.0, "pass"), (-0.5, "fail")])
def test_only_after_the_launch_is_judged_on_the_stated_dates(before: float, verdict: str) -> None:
    d = mini_contract(claims=[{"kind": "conditional", "id": "discount_after_launch", "source": "discount",
                               "target": "amount", "when": [{"column": "date", "op": ">=", "value": "2024-01-01"}],
                               "effect": -0.5, "bound": 0.1}])
    c = contract(d)
    r = check_conditional(c, c.claims[0], _launch_frame(before))
    assert r.status == verdict, r.reason


def test_claims_the_contract_contradicts_are_refused() -> None:
    bad = promo_data()
    bad["claims"] = [{**NO_ADS, "source": "income"}, {**LOW_STOCK, "bound": 0.9}]
    errors = {(p.code, p.path) for p in validate_contract(contract(bad)) if p.severity == "error"}
    assert ("claim_contradicted", "claims[0](ads_do_not_move_amount)") in errors
    assert ("impossible_param", "claims[1](discount_only_when_low_stock).bound") in errors


def test_the_partial_correlation_spec_is_complete(promo_world: Path) -> None:
    spec = world_answer_specs(promo_world)["ads_amount_partial"]
    assert lint_answer_spec(spec) == []
    assert spec.quantity == "partial_correlation" and [m.variable for m in spec.controls] == ["income"]
    text = "\n".join(facet_lines(spec))
    assert "Held fixed (controls): `income`" in text and "`data/crm.csv`" in text and "residuals" in text


def test_a_categorical_control_is_held_fixed_label_by_label(promo_world: Path) -> None:
    """Partial correlation with a categorical control (region), recomputed with per-region demeaning: with one
    0/1 column per label and an intercept, the residuals are the deviations from each region's mean."""
    from worldsmith.evolution.worlds.audit import reconciled_table
    from worldsmith.evolution.worlds.recipes import evaluate

    c_data = promo_data()
    c_data["phenomena"] = [{"id": "by_region", "statement": "{value:.3f}", "tolerance": {"abs": 0.05, "rel": 0},
                            "recipe": {"op": "partial_corr", "x": "income", "y": "amount", "controls": ["region"]}}]
    crm = pd.read_csv(promo_world / "data" / "crm.csv")
    shop = pd.read_csv(promo_world / "data" / "shop.csv").merge(crm, on="customer_id")
    rx = shop["income"] - shop.groupby("region")["income"].transform("mean")
    ry = shop["amount"] - shop.groupby("region")["amount"].transform("mean")
    expected = np.corrcoef(rx, ry)[0, 1]
    wide = reconciled_table(promo_world, "orders")
    got = evaluate(contract(c_data), contract(c_data).phenomena[0].recipe, wide)
    assert abs(got - expected) < 1e-9 and expected > 0.5


def test_a_condition_on_columns_the_target_rows_do_not_carry_is_refused() -> None:
    bad = promo_data()
    bad["claims"] = [{**LOW_STOCK, "when": [{"column": "period", "op": ">=", "value": "2024-01-01"}]}]
    errors = [p for p in validate_contract(contract(bad)) if p.severity == "error"]
    assert [p.path for p in errors] == ["claims[0](discount_only_when_low_stock).when"]
    assert "'low_stock'" in errors[0].hint and "'date'" in errors[0].hint
