"""Observation defects: each is applied to the observed table and recorded in the ledger."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from worldsmith.evolution.worlds import ObservationSystem, Sabotage, generate
from worldsmith.evolution.worlds.defects import spell_ids
from worldsmith.evolution.worlds.memos import parse_memo, system_memo
from worldsmith.evolution.worlds.observe import project_system

from tests.worlds.worlds_testkit import contract, mini_contract


def observe(defects, **system):
    data = mini_contract()
    data["entities"][0]["attributes"].append({"name": "full_name", "distribution": {"type": "person_name"}})
    data["systems"][0]["variables"].append("full_name")
    data["systems"][1].update(defects=defects, **system)
    c = contract(data)
    state = generate(c, seed=1)
    obs = project_system(state, c.system("shop"))
    return state, obs


def entry(obs, kind):
    found = [e for e in obs.entries if e.defect == kind]
    assert found, f"no {kind} entry in {[e.defect for e in obs.entries]}"
    return found[0]


def test_missing_mcar_and_mar():
    state, obs = observe([{"type": "missing", "variable": "amount", "rate": 0.2}])
    df = obs.parts[0].frame
    assert df["amount"].isna().mean() == pytest.approx(0.2, abs=0.02)
    e = entry(obs, "missing")
    assert e.rows_affected == df["amount"].isna().sum() and e.example_after == "<blank>" and not e.documented
    _, obs = observe([{"type": "missing", "variable": "amount", "rate": 0.2, "mechanism": "mar",
                       "depends_on": "discount"}])
    df = obs.parts[0].frame
    hi = df["amount"][df["discount"] > 20].isna().mean()
    lo = df["amount"][df["discount"] < 10].isna().mean()
    assert hi > 2 * lo and df["amount"].isna().mean() == pytest.approx(0.2, abs=0.03)


def test_delay_shifts_dates():
    state, obs = observe([{"type": "delay", "days": 3, "jitter_days": 2}])
    true = state.tables["orders"]["date"]
    got = pd.to_datetime(obs.parts[0].frame["date"])
    lag = (got - true).dt.days
    assert lag.min() == 3 and lag.max() == 5
    assert entry(obs, "delay").documented


def test_duplicates_exact_and_near():
    state, obs = observe([{"type": "duplicates", "rate": 0.05}])
    df = obs.parts[0].frame
    assert len(df) == 4200 and df["order_id"].duplicated().sum() == 200
    first_dup = df.index[df["order_id"].duplicated()][0]
    assert df.loc[first_dup - 1, "order_id"] == df.loc[first_dup, "order_id"]  # right after its original
    _, obs = observe([{"type": "duplicates", "rate": 0.05, "near": True}])
    df = obs.parts[0].frame
    dup = df["order_id"].duplicated(keep=False)
    pairs = df[dup].groupby("order_id")["discount"].agg(lambda s: s.iloc[1] - s.iloc[0])
    assert np.allclose(pairs, 0.01)
    assert entry(obs, "duplicates").rows_affected == 200


def test_unit_drift_from_date():
    state, obs = observe([{"type": "unit_drift", "variable": "amount", "since": "2024-03-01", "factor": 100.0,
                           "from_unit": "USD", "to_unit": "USD cents"}])
    df = obs.parts[0].frame
    true = state.tables["orders"]["amount"].round(2)
    late = pd.to_datetime(df["date"]) >= "2024-03-01"
    assert np.allclose(df.loc[late, "amount"], true[late] * 100, atol=0.011)
    assert np.allclose(df.loc[~late, "amount"], true[~late])
    assert entry(obs, "unit_drift").rows_affected == late.sum()


def test_recode_per_system_and_from_date():
    data = mini_contract()
    data["entities"][1]["attributes"].append({"name": "channel", "distribution": {
        "type": "categorical", "categories": ["web", "app"], "probs": [0.5, 0.5]}})
    data["systems"][1]["variables"].append("channel")
    data["systems"][1]["defects"] = [{"type": "recode", "variable": "channel", "mapping": {"web": "W"},
                                      "since": "2024-01-01"}]
    data["systems"][0]["defects"] = [{"type": "recode", "variable": "region", "mapping": {"north": "N",
                                                                                         "south": "S"}}]
    c = contract(data)
    st = generate(c, seed=2)
    shop = project_system(st, c.system("shop")).parts[0].frame
    late = pd.to_datetime(shop["date"]) >= "2024-01-01"
    assert set(shop.loc[late, "channel"]) == {"W", "app"} and set(shop.loc[~late, "channel"]) == {"web", "app"}
    crm = project_system(st, c.system("crm")).parts[0].frame
    assert set(crm["region"]) == {"N", "S"}


def test_schema_drift_partitions_renames_split_and_unlabeled_fk():
    state, obs = observe([{"type": "rename", "column": "amount", "new_name": "amt", "from_partition": 1},
                          {"type": "unlabeled_fk", "column": "customer_id", "new_name": "acct"}],
                         partition="year", format="xlsx")
    assert [p.label for p in obs.parts] == ["2023", "2024"]
    assert "amount" in obs.parts[0].frame and "amt" in obs.parts[1].frame
    assert all("acct" in p.frame and "customer_id" not in p.frame for p in obs.parts)
    assert entry(obs, "rename").documented and not entry(obs, "unlabeled_fk").documented
    c = state.contract
    crm_system = ObservationSystem.model_validate({**c.systems[0].model_dump(),
                                                   "defects": [{"type": "split_column", "column": "full_name"}]})
    crm = project_system(state, crm_system)
    frame = crm.parts[0].frame
    assert {"first_name", "last_name"} <= set(frame) and "full_name" not in frame
    assert (frame["first_name"] + " " + frame["last_name"]).tolist() == state.tables["customers"]["full_name"].tolist()


@pytest.mark.parametrize("style, expected", [("canonical", "C-00012"), ("lower_nopad", "c12"),
                                             ("alias_underscore", "CUST_12"), ("nodash", "C00012")])
def test_id_spellings(style, expected):
    assert spell_ids(pd.Series(["C-00012", None], dtype=object), style, "C", "CUST").iloc[0] == expected
    state, obs = observe([], id_style=style, date_format="%d/%m/%Y")
    df = obs.parts[0].frame
    if style != "canonical":
        e = entry(obs, "id_spelling")
        assert set(e.columns) == {"order_id", "customer_id"} and e.example_before == "O-00001"
    assert entry(obs, "date_format").example_after.count("/") == 2
    assert df["date"].str.match(r"\d{2}/\d{2}/\d{4}").all()


def test_no_dictionary_and_sabotage():
    data = mini_contract()
    data["systems"][1]["dictionary"] = False
    c = contract(data)
    st = generate(c, seed=1)
    obs = project_system(st, c.system("shop"), [Sabotage(variable="amount", kind="shuffle")])
    assert entry(obs, "no_dictionary").rows_affected == 0
    sab = entry(obs, "sabotage")
    assert not sab.documented
    a = obs.parts[0].frame["amount"].to_numpy()
    assert sorted(a) == pytest.approx(sorted(st.tables["orders"]["amount"].round(2)))
    assert abs(np.corrcoef(a, st.tables["orders"]["discount"])[0, 1]) < 0.05
    blank = project_system(st, c.system("shop"), [Sabotage(variable="amount", kind="blank", rate=0.9)])
    kept = blank.parts[0].frame["amount"].dropna()
    assert len(kept) == pytest.approx(400, abs=2) and kept.max() <= st.tables["orders"]["amount"].quantile(0.11)


def test_memos_document_what_an_analyst_needs():
    state, obs = observe([{"type": "unit_drift", "variable": "amount", "since": "2024-03-01", "factor": 0.5,
                           "from_unit": "USD", "to_unit": "kUSD"},
                          {"type": "delay", "days": 2},
                          {"type": "rename", "column": "amount", "new_name": "amt", "from_partition": 1},
                          {"type": "unlabeled_fk", "column": "customer_id", "new_name": "acct"},
                          {"type": "missing", "variable": "amount", "rate": 0.1}], partition="year",
                         date_format="%m/%d/%Y")
    text = system_memo(obs.system, obs.entries, state.contract, ["shop_2023.csv", "shop_2024.csv"])
    assert "acct" not in text and "blank" not in text  # undocumented defects stay undocumented
    notes = parse_memo(text)
    kinds = {type(n).__name__: n for n in notes}
    assert kinds["UnitNote"].factor == 0.5 and str(kinds["UnitNote"].since) == "2024-03-01"
    assert kinds["DelayNote"].days == 2 and kinds["DateFormatNote"].fmt == "%m/%d/%Y"
    assert (kinds["RenameNote"].old, kinds["RenameNote"].new, kinds["RenameNote"].from_year) == ("amount", "amt", 2024)
