"""Engine: each mechanism is planted in canonical state with the contract's magnitude; seeds are per layer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from worldsmith.evolution.worlds import generate, load_template, scaled
from worldsmith.evolution.worlds.fit import logistic

from tests.worlds.worlds_testkit import contract

N = 20000


def world(edges, x_dist=None, y=None, extra_attrs=(), kind="event", events=(), n=N):
    x_dist = x_dist or {"type": "uniform", "low": 0, "high": 10}
    attrs = [{"name": "x", "distribution": x_dist, "bounds": {"lower": 0}}, *extra_attrs]
    ents = [{"name": "units", "id_prefix": "U", "count": 200}]
    if kind == "panel":
        ents.append({"name": "unit_months", "kind": "panel", "parent": "units"})
        var_x = [{"name": "x", "entity": "unit_months", "distribution": x_dist}]
        attrs = list(extra_attrs)
        target_entity = "unit_months"
    else:
        ents.append({"name": "rows", "id_prefix": "R", "kind": "event", "count": n, "parent": "units"})
        var_x = []
        target_entity = "rows"
    ents[-1]["attributes"] = attrs if kind != "panel" else []
    if kind == "panel":
        ents[0]["attributes"] = attrs
    y = y or {"name": "y", "entity": target_entity, "intercept": 10.0, "noise": {"type": "normal", "sd": 1.0}}
    data = {"id": "m", "title": "m", "domain": "finance",
            "persona": {"name": "a", "role": "b", "organisation": "c", "goal": "d"},
            "timeline": {"start": "2020-01-01", "end": "2023-12-31", "grain": "month"},
            "entities": ents, "variables": [*var_x, y], "edges": edges, "events": list(events)}
    return generate(contract(data), seed=1)


def ols(X, y):
    A = np.column_stack([np.ones(len(y)), X])
    return np.linalg.lstsq(A, y, rcond=None)[0][1:]


def test_linear():
    s = world([{"sources": ["x"], "target": "y", "mechanism": {"type": "linear", "coef": 2.5, "center": 5}}])
    t = s.tables["rows"]
    assert ols(t["x"].to_numpy(), t["y"].to_numpy())[0] == pytest.approx(2.5, rel=0.02)


def test_multiplicative():
    y = {"name": "y", "entity": "rows", "intercept": 10.0, "noise": {"type": "none"}}
    s = world([{"sources": ["x"], "target": "y", "mechanism": {"type": "multiplicative", "coef": 0.1}}], y=y)
    t = s.tables["rows"]
    assert ols(t["x"].to_numpy(), np.log(t["y"].to_numpy()))[0] == pytest.approx(0.1, rel=1e-6)


def test_threshold():
    s = world([{"sources": ["x"], "target": "y", "mechanism": {"type": "threshold", "threshold": 6, "jump": 4.0}}])
    t = s.tables["rows"]
    gap = t.loc[t.x > 6, "y"].mean() - t.loc[t.x <= 6, "y"].mean()
    assert gap == pytest.approx(4.0, abs=0.1)


def test_saturating():
    s = world([{"sources": ["x"], "target": "y", "mechanism": {"type": "saturating", "vmax": 20, "half": 2}}])
    t = s.tables["rows"]
    x = t["x"].to_numpy()
    assert ols(x / (x + 2), t["y"].to_numpy())[0] == pytest.approx(20, rel=0.03)
    low, high = t.loc[t.x < 1, "y"].mean(), t.loc[t.x > 9, "y"].mean()
    assert high - low > 10  # diminishing, but large, returns


def test_logistic_on_binary_target():
    y = {"name": "y", "entity": "rows", "kind": "binary", "intercept": -1.0}
    s = world([{"sources": ["x"], "target": "y", "mechanism": {"type": "logistic", "coef": 0.4, "center": 5}}], y=y)
    t = s.tables["rows"]
    assert set(np.unique(t["y"])) == {0, 1}
    assert logistic(t[["x"]].to_numpy(float), t["y"].to_numpy(float)).coef[0] == pytest.approx(0.4, rel=0.08)


def test_interaction():
    z = {"name": "z", "distribution": {"type": "normal", "mean": 0, "sd": 1}}
    s = world([{"sources": ["x", "z"], "target": "y", "mechanism": {"type": "interaction", "coef": 1.5,
                                                                    "centers": [5, 0]}}], extra_attrs=[z])
    t = s.tables["rows"]
    X = np.column_stack([t.x - 5, t.z, (t.x - 5) * t.z])
    assert ols(X, t["y"].to_numpy())[2] == pytest.approx(1.5, rel=0.03)


def test_seasonal_and_step_event():
    events = [{"name": "launch", "date": "2022-01-01", "description": "launch"}]
    s = world([{"sources": [], "target": "y", "mechanism": {"type": "seasonal", "amplitude": 3, "period_days": 365.25}},
               {"sources": [], "target": "y", "mechanism": {"type": "step_event", "event": "launch", "jump": -5}}],
              events=events)
    t = s.tables["rows"]
    days = (t["date"] - pd.Timestamp("2020-01-01")).dt.days.to_numpy()
    X = np.column_stack([np.sin(2 * np.pi * days / 365.25), (t["date"] >= "2022-01-01").to_numpy(float)])
    amp, jump = ols(X, t["y"].to_numpy())
    assert amp == pytest.approx(3, rel=0.05) and jump == pytest.approx(-5, rel=0.05)
    assert t["date"].is_monotonic_increasing and t["date"].min() >= pd.Timestamp("2020-01-01")


def test_lag_on_panel():
    s = world([{"sources": ["x"], "target": "y", "mechanism": {"type": "lag", "coef": 1.2, "lag": 2, "center": 5}}],
              kind="panel")
    t = s.tables["unit_months"].sort_values(["unit_id", "period"])
    assert len(t) == 200 * 48
    lagged = t.groupby("unit_id")["x"].shift(2)
    ok = lagged.notna()
    assert ols(lagged[ok].to_numpy(), t.loc[ok, "y"].to_numpy())[0] == pytest.approx(1.2, rel=0.03)
    assert abs(np.corrcoef(t.loc[ok, "x"], t.loc[ok, "y"])[0, 1]) < 0.05  # no contemporaneous effect


def test_levels_and_heterogeneity():
    g = {"name": "grp", "distribution": {"type": "categorical", "categories": ["a", "b", "c"], "probs": [.3, .3, .4]}}
    s = world([{"sources": ["grp"], "target": "y", "mechanism": {"type": "linear", "levels": {"b": 3.0, "c": -2.0}}},
               {"sources": ["x"], "target": "y", "mechanism": {"type": "linear", "coef": 1.0},
                "heterogeneity": {"by": "grp", "multipliers": {"a": 2.0, "c": 0.0}}}], extra_attrs=[g])
    w = s.wide("rows")
    slopes = {k: ols(d["x"].to_numpy(), d["y"].to_numpy())[0] for k, d in w.groupby("grp", observed=True)}
    assert slopes["a"] == pytest.approx(2.0, abs=0.05) and slopes["b"] == pytest.approx(1.0, abs=0.05)
    assert abs(slopes["c"]) < 0.05
    means = w.groupby("grp", observed=True).apply(lambda d: (d.y - d.x * {"a": 2, "b": 1, "c": 0}[d.name]).mean())
    assert means["b"] - means["a"] == pytest.approx(3.0, abs=0.1)


def test_cross_entity_edge_uses_parent_values():
    c = load_template("bioinformatics")  # runs.flowcell_quality -> samples.read_depth
    st = generate(c, seed=2)
    w = st.wide("samples")
    assert "flowcell_quality" in w and len(w) == len(st.tables["samples"])
    assert np.corrcoef(w["flowcell_quality"], w["read_depth"])[0, 1] > 0.4


def test_categorical_probabilities_and_bounds():
    c = load_template("commercial_growth", rows=20000)
    st = generate(c, seed=4)
    cust = st.tables["customers"]
    share = cust["segment"].value_counts(normalize=True)
    assert share["consumer"] == pytest.approx(0.7, abs=0.03)
    assert (st.tables["orders"]["amount"] >= 0).all() and (st.tables["orders"]["discount_pct"] <= 30).all()
    assert cust["customer_id"].is_unique and cust["customer_id"].iloc[0] == "C-00001"
    assert st.tables["orders"]["customer_id"].isin(set(cust["customer_id"])).all()


def test_same_seed_same_state_and_layers_are_independent():
    c = load_template("people")
    a, b = generate(c, seed=9), generate(c, seed=9)
    pd.testing.assert_frame_equal(a.tables["employees"], b.tables["employees"])
    other = generate(c, seed=10).tables["employees"]
    assert not np.allclose(a.tables["employees"]["salary"], other["salary"])
    # change one root's distribution: unrelated layers keep their draws, descendants change
    data = c.model_dump(mode="json")
    data["variables"][0]["distribution"] = {"type": "poisson", "lam": 40}  # training_hours
    changed = generate(contract(data), seed=9).tables["employees"]
    base = a.tables["employees"]
    descendants = {"training_hours", "engagement", "performance", "salary", "attrition"}
    for col in ("department", "remote", "tenure_years", "full_name"):
        pd.testing.assert_series_equal(base[col], changed[col])
    for col in descendants - {"attrition"}:
        assert not base[col].equals(changed[col]), col
    # the noise layer of a descendant is its own: salary moves only through performance
    resid = (base["salary"] - 3000 * base["performance"]) - (changed["salary"] - 3000 * changed["performance"])
    assert np.allclose(resid, 0, atol=1e-6)


def test_scaled_keeps_ratios():
    c = scaled(load_template("commercial_growth"), 50000)
    counts = {e.name: e.count for e in c.entities}
    assert counts == {"customers": 5000, "orders": 50000}
    st = generate(load_template("finance", rows=10000), seed=1)
    assert abs(len(st.tables["branch_months"]) - 10000) <= 36
