"""Coherent worlds: tables derived from one entity agree, templates' plausibility rules hold (and a contract that
breaks one is refused loudly), and a report grades no data problem outside the files it names.

Expected facts are hand-derived from the template (a control account's price is 30 + its tier's level; an
invoice is price x seats less 25 above 10 seats) and checked with plain pandas/numpy on the canonical tables."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from worldsmith.evolution.worlds import build_world, load_template
from worldsmith.evolution.worlds.coherence import IncoherentWorld
from worldsmith.evolution.worlds.templates import list_templates
from worldsmith.evolution.worlds.validate import ContractError, check_contract, validate_contract

DOMAINS = [t.domain for t in list_templates()]


def _canonical(world: Path, entity: str) -> pd.DataFrame:
    return pd.read_parquet(world / ".truth" / "canonical" / f"{entity}.parquet")


@pytest.fixture(scope="module")
def template_worlds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("coherent")
    out = {}
    for d in DOMAINS:
        out[d] = root / d
        build_world(load_template(d, rows=1500), 11, out[d])
    return out


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_template_world_agrees_across_its_tables(domain: str, template_worlds: dict[str, Path]) -> None:
    world = template_worlds[domain]
    c = json.loads((world / "contract.json").read_text())
    start, end = pd.Timestamp(c["timeline"]["start"]), pd.Timestamp(c["timeline"]["end"])
    for e in c["entities"]:
        t = _canonical(world, e["name"])
        if e.get("parent"):  # every row belongs to a parent that exists
            parent = _canonical(world, e["parent"])
            pk = next(k for k in parent.columns if k.endswith("_id"))
            assert t[pk].isin(parent[pk]).all(), f"{domain}: {e['name']} rows with no {e['parent']}"
        time = {"event": "date", "panel": "period"}.get(e["kind"])
        if time:  # and every dated row lies inside the timeline
            assert t[time].between(start, end).all(), f"{domain}: {e['name']} dated outside the timeline"
    for rule in c.get("plausibility", []):
        if rule["kind"] != "follows":
            continue
        entity = next(v["entity"] for v in c["variables"] if v["name"] == rule["target"])
        wide = _wide(world, c, entity)
        cols = [s for s in rule["sources"] if pd.api.types.is_numeric_dtype(wide[s])]
        d = wide[[rule["target"], *cols]].dropna().astype(float)
        x = np.column_stack([np.ones(len(d)), d[cols].to_numpy()])
        slopes = np.linalg.lstsq(x, d[rule["target"]].to_numpy(), rcond=None)[0][1:]
        assert (slopes > 0).all(), f"{domain}: {rule['target']} does not rise with {cols}: {slopes}"


def _wide(world: Path, c: dict, entity: str) -> pd.DataFrame:
    """The entity's canonical table with its parents' columns joined on their ids (plain pandas)."""
    ents = {e["name"]: e for e in c["entities"]}
    t = _canonical(world, entity)
    cur = ents[entity]
    while cur.get("parent"):
        parent = _canonical(world, cur["parent"])
        pk = next(k for k in parent.columns if k.endswith("_id"))
        t = t.merge(parent, on=pk, how="left", suffixes=("", "_parent"))
        cur = ents[cur["parent"]]
    return t


def test_pricing_invoices_follow_price_seats_and_churn(template_worlds: dict[str, Path]) -> None:
    world = template_worlds["customer_pricing"]
    accounts, invoices = _canonical(world, "accounts"), _canonical(world, "invoices")
    inv = invoices.merge(accounts, on="account_id")
    # nothing is billed after churn: churned accounts have an end date, and no invoice is dated after it
    assert accounts.loc[accounts["churned"] == 1, "churned_date"].notna().all()
    assert accounts.loc[accounts["churned"] == 0, "churned_date"].isna().all()
    assert not (inv["date"] > inv["churned_date"]).any()
    # churn dates spread over the timeline: churned accounts are billed far less often late in it
    late = inv["date"] >= pd.Timestamp("2024-07-01")
    billed_late = inv[late].groupby("churned")["account_id"].nunique() / accounts.groupby("churned").size()
    assert billed_late[1] < 0.6 * billed_late[0]
    # an invoice bills price per seat x seats, less 25 above 10 seats (noise sd 6)
    bill = inv["price"] * inv["seats"] - 25.0 * (inv["seats"] > 10)
    resid = inv["invoice_amount"] - bill
    clipped = inv["invoice_amount"] == 0  # the lower bound 0 clips a few tiny invoices
    assert abs(resid[~clipped].mean()) < 1.0 and 4.5 < resid[~clipped].std() < 7.5


def test_pricing_control_arm_keeps_the_list_price(template_worlds: dict[str, Path]) -> None:
    accounts = _canonical(template_worlds["customer_pricing"], "accounts")
    ctrl = accounts[accounts["price_group"] == "control"].groupby("plan_tier", observed=True)["price"]
    # template: price = 30 + tier level (pro 40, enterprise 120) + 12 in the test arm + noise sd 10
    for tier, list_price in {"basic": 30.0, "pro": 70.0, "enterprise": 150.0}.items():
        g = ctrl.get_group(tier)
        assert abs(g.mean() - list_price) < 4 * 10 / np.sqrt(len(g)), (tier, g.mean())
    test = accounts[accounts["price_group"] == "test"].groupby("plan_tier", observed=True)["price"].mean()
    assert abs(test["basic"] - 42.0) < 4 * 10 / np.sqrt((accounts["price_group"] == "test").sum() / 3)


def _pricing(change) -> dict:
    data = load_template("customer_pricing", rows=1500).model_dump(mode="json")
    change(data)
    return data


def _problems(data: dict) -> list[str]:
    from worldsmith.core.world_contract import WorldContract

    return [str(p) for p in validate_contract(WorldContract.model_validate(data)) if p.severity == "error"]


def test_a_treatment_that_moves_the_control_arm_is_refused_at_validation() -> None:
    def control_moved(d):
        e = next(e for e in d["edges"] if e["sources"] == ["price_group"])
        e["mechanism"]["levels"] = {"test": 12, "control": 5}

    def event_everywhere(d):  # a price rise event whose heterogeneity forgets to exempt the control arm
        d["events"].append({"name": "price_rise", "date": "2024-03-01", "description": "test price goes live"})
        d["edges"].append({"sources": [], "target": "price", "mechanism": {"type": "step_event", "event": "price_rise",
                           "jump": 8.0}, "heterogeneity": {"by": "price_group", "multipliers": {"test": 1.0}}})

    for change, said in ((control_moved, "gives it +5"), (event_everywhere, "multiplier 1")):
        problems = _problems(_pricing(change))
        assert any("plausibility[0]" in p and "'control' arm of price_group must not move price" in p and said in p
                   for p in problems), problems
    from worldsmith.core.world_contract import WorldContract

    with pytest.raises(ContractError, match="must not move price"):
        check_contract(WorldContract.model_validate(_pricing(control_moved)))
    # exempting the control arm (multiplier 0) makes the same event plausible
    ok = _pricing(event_everywhere)
    ok["edges"][-1]["heterogeneity"]["multipliers"]["control"] = 0.0
    assert not [p for p in _problems(ok) if "plausibility" in p]


def test_follows_rules_and_lifetimes_are_checked() -> None:
    def unrelated(d):
        d["plausibility"].append({"kind": "follows", "target": "invoice_amount", "sources": ["tenure_months"]})

    assert any("no edge path leads from tenure_months" in p for p in _problems(_pricing(unrelated)))

    def static_end(d):
        next(e for e in d["entities"] if e["name"] == "accounts")["ends_with"] = "churned"

    assert any("entities[0].ends_with" in p for p in _problems(_pricing(static_end)))


def test_a_world_that_breaks_a_follows_rule_is_not_built(tmp_path: Path) -> None:
    from worldsmith.core.world_contract import WorldContract

    data = _pricing(lambda d: d["plausibility"].append(
        {"kind": "follows", "target": "churned", "sources": ["tenure_months"]}))  # tenure lowers churn in the world
    with pytest.raises(IncoherentWorld, match="churned does not follow tenure_months"):
        build_world(WorldContract.model_validate(data), 1, tmp_path / "w", audit=False)
    assert not (tmp_path / "w").exists()


def test_a_report_grades_no_data_problem_outside_the_files_it_names(template_worlds: dict[str, Path]) -> None:
    from worldsmith.evolution.worlds.answer_specs import named_files, systems_named, world_answer_specs
    from worldsmith.evolution.worlds.tasks import load_ledger, method_items, sample_specs

    for domain, world in template_worlds.items():
        facets = world_answer_specs(world)
        ledger = load_ledger(world)
        for spec in sample_specs(world, max_tasks=10, seed=0):
            graded = [facets[p.id] for p in spec.phenomena if isinstance(p.value, (int, float))]
            files = named_files(graded)
            systems = systems_named(world, graded)
            for item in method_items(spec, ledger, systems=systems):
                system = item.observable.removeprefix("how the analysis treats ").removesuffix(" data")
                assert _files_of(world, system) & files, (domain, system, sorted(files))


def _files_of(world: Path, system: str) -> set[str]:
    m = json.loads((world / "manifest.json").read_text())
    c = json.loads((world / "contract.json").read_text())
    s = next(x for x in c["systems"] if x["name"] == system)
    stem = s.get("file") or s["name"]
    return {f for f in m["files"] if f.startswith("data/") and Path(f).name.startswith(stem)}


def test_a_window_over_posting_dates_says_to_use_event_dates(commercial_world: Path) -> None:
    """order_db posts every order 1 day after it happened (memo). The campaign window is on event dates, so the
    instruction says so, and the key is the event-date reading (plain pandas here), not the posting-date one."""
    from worldsmith.core.answer_spec import render_answer_spec
    from worldsmith.evolution.worlds.answer_specs import world_answer_specs

    text = render_answer_spec(world_answer_specs(commercial_world)["campaign_uplift"])
    window = next(line for line in text.splitlines() if line.startswith("- Time window:"))
    assert "the date of the event itself" in window and "shift it back by the documented delay" in window
    assert text.count("the date of the event itself") == 1  # said once, not again in each side of the comparison
    data = commercial_world / "data"
    orders = pd.concat([pd.read_csv(f).rename(columns={"amt": "amount"}) for f in sorted(data.glob("orders_*.csv"))])
    orders = orders.drop_duplicates("order_id", keep="first")
    posted = pd.to_datetime(orders["date"])
    amount = orders["amount"].where(posted < pd.Timestamp("2024-07-01"), orders["amount"] / 100)  # cents by record

    def uplift(dates: pd.Series) -> float:
        def mean(lo, hi):
            return amount[(dates >= pd.Timestamp(lo)) & (dates < pd.Timestamp(hi))].mean()
        return mean("2024-03-01", "2024-04-30") - mean("2024-01-01", "2024-03-01")

    key = json.loads((commercial_world / ".truth/phenomena.json").read_text())
    truth = next(p["value"] for p in key["phenomena"] if p["id"] == "campaign_uplift")
    event = uplift(posted - pd.Timedelta(days=1))
    assert abs(event - truth) < 0.02 and abs(uplift(posted) - truth) > abs(event - truth)


def _with_total_usage(d: dict) -> None:
    """accounts.total_usage = sum of usage_hours over the account's invoices (invoices end with churn)."""
    d["variables"].append({"name": "total_usage", "entity": "accounts", "description": "usage over all invoices",
                           "derive": {"op": "aggregate", "of": "usage_hours"}})
    next(s for s in d["systems"] if s["entity"] == "accounts")["variables"].append("total_usage")


def test_an_aggregate_counts_only_the_rows_churn_did_not_end(tmp_path: Path) -> None:
    """Invoices after churn never exist, so a parent's sum over its invoices is over the kept invoices only."""
    from worldsmith.core.world_contract import WorldContract

    build_world(WorldContract.model_validate(_pricing(_with_total_usage)), 3, tmp_path / "w", audit=False)
    canon = tmp_path / "w" / ".truth" / "canonical"
    accounts, invoices = pd.read_parquet(canon / "accounts.parquet"), pd.read_parquet(canon / "invoices.parquet")
    summed = invoices.groupby("account_id")["usage_hours"].sum()
    got = accounts.set_index("account_id")["total_usage"]
    expected = summed.reindex(got.index).fillna(0.0)
    assert np.allclose(got.to_numpy(float), expected.to_numpy(float), atol=1e-6)
    churned = accounts[accounts["churned"] == 1]
    assert len(churned) > 0 and (invoices["account_id"].isin(churned["account_id"])).any()


def test_an_aggregate_of_ending_rows_that_causes_the_ending_is_refused() -> None:
    def cycle(d):
        _with_total_usage(d)
        d["edges"].append({"sources": ["total_usage"], "target": "churned",
                           "mechanism": {"type": "logistic", "coef": -0.001}})

    assert any("entities[1].ends_with" in p and "a cycle" in p for p in _problems(_pricing(cycle)))
