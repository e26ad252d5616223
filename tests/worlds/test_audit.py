"""The auditor: recomputes from observed files only, never writes outside AUDIT.json/WORLD.md, and fails
worlds whose phenomena were destroyed (negative control)."""

from __future__ import annotations

import shutil

import pytest

from worldsmith.evolution.worlds import (Sabotage, audit_world, build_world, compute_phenomenon, load_template,
                                         phenomenon_reference, read_audit, reconciled_table, recoverable_phenomena)
from worldsmith.evolution.worlds.artifacts import file_hashes


def test_template_world_passes(commercial_world):
    r = read_audit(commercial_world)
    assert r.summary["edge"] == {"pass": 9, "fail": 0, "skip": 0}, [x.reason for x in r.edges if not x.passed]
    assert r.summary["invariant"]["fail"] == 0 and r.passed
    assert {x.id for x in recoverable_phenomena(r)} == {p.id for p in load_template("commercial_growth").phenomena}
    by_id = {x.id: x for x in r.edges}
    het = by_id["discount_pct->amount"]
    assert set(het.observed) == {"coef@east", "coef@north", "coef@south", "coef@west"}
    assert het.observed["coef@north"] == pytest.approx(-1.0, rel=0.2)  # 2x the base effect of -0.5


def test_reconciliation_undid_every_documented_defect(commercial_world):
    r = read_audit(commercial_world)
    log = "\n".join(r.reconciliation)
    for needle in ("`acct_ref` holds customers ids", "converted back from USD cents", "1-day posting delay",
                   "format `%d/%m/%Y`", "repeated record(s) dropped", "labels of `region` mapped back"):
        assert needle in log, needle
    assert r.issues == []
    orders = reconciled_table(commercial_world, "orders")
    assert orders["order_id"].is_unique and len(orders) == 4000
    assert orders["region"].isin(["north", "south", "east", "west"]).all()  # joined from the CRM, recoded back
    assert orders["amount"].max() < 2000  # cents converted back


def test_audit_never_modifies_files_and_ignores_truth_tables(commercial_world, tmp_path):
    before = file_hashes(commercial_world)
    report = audit_world(commercial_world)
    after = file_hashes(commercial_world)
    assert before == after  # AUDIT.json / WORLD.md are rewritten with identical bytes
    copy = tmp_path / "copy"
    shutil.copytree(commercial_world, copy)
    shutil.rmtree(copy / ".truth" / "canonical")
    (copy / ".truth" / "ledger.json").unlink()
    again = audit_world(copy, write=False, verify=False)  # the copy no longer matches its manifest, on purpose
    assert again.model_dump() == report.model_dump()  # the canonical tables and the ledger are never read


def test_world_md_explains_the_world(commercial_world):
    text = (commercial_world / "WORLD.md").read_text()
    for section in ("## What the data room contains", "## Pitfalls to reconcile", "## Causal structure",
                    "## Phenomena", "## Invariants", "## Audit summary"):
        assert section in text
    assert "`amount` changes by +11 USD per unit of `basket_size`" in text
    assert "`income` drives both `basket_size` and `amount`" in text


def test_reference_and_compute_api(commercial_world):
    ref = phenomenon_reference(commercial_world, "value_per_item")
    assert ref.recoverable and ref.entity == "orders" and ref.tolerance["rel"] == 0.05
    wide = reconciled_table(commercial_world, "orders")
    value = compute_phenomenon(commercial_world, "value_per_item", wide)
    assert value == pytest.approx(ref.canonical_value, rel=0.05)


@pytest.mark.parametrize("sabotage, broken_edge, broken_phenomenon", [
    (Sabotage(variable="basket_size", kind="shuffle"), "basket_size->amount", "value_per_item"),
    (Sabotage(variable="amount", kind="blank", rate=0.95), "income->amount", "business_order_gap"),
])
def test_negative_control_fails_the_audit(tmp_path, sabotage, broken_edge, broken_phenomenon):
    c = load_template("commercial_growth", rows=4000)
    res = build_world(c, 3, tmp_path / "w", sabotage=[sabotage])
    r = read_audit(tmp_path / "w")
    assert not r.passed and "sabotage" in load_manifest_provenance(tmp_path / "w")
    assert {x.id: x.status for x in r.edges}[broken_edge] == "fail"
    assert broken_phenomenon not in res.recoverable
    assert {x.id: x.status for x in r.phenomena}[broken_phenomenon] == "fail"


def load_manifest_provenance(world) -> str:
    from worldsmith.evolution.worlds import load_world

    return load_world(world).manifest.produced_by


def test_panel_world_lag_and_sum(panel_world):
    r = read_audit(panel_world)
    edges = {x.id: x for x in r.edges}
    assert edges["marketing_spend->revenue"].passed and edges["marketing_spend->revenue"].details["mechanism"] == "lag"
    inv = {x.id: x for x in r.invariants}
    assert inv["sum:total_cost"].passed and inv["sum:total_cost"].observed == 1.0
    assert inv["foreign_key:branch_months"].passed
    log = "\n".join(r.reconciliation)
    assert "`net_sales` -> `revenue`" in log and "from kUSD to USD" in log
    assert r.summary["phenomenon"]["pass"] == 5 and r.summary["edge"]["fail"] == 0
