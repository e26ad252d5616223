"""Scoring verified findings against a world's canonical truth: hand-made cases, then a real world's sheet."""

from __future__ import annotations

from pathlib import Path

import pytest

from worldsmith.evolution.truth import (
    PlantedEdge,
    PlantedPhenomenon,
    TruthSheet,
    direction,
    match_finding,
    score_findings,
    truth_sheet,
)

SHEET = TruthSheet(
    variables=["discount_pct", "amount", "returned", "income", "segment"],
    edges=[PlantedEdge(id="discount_pct->amount", sources=["discount_pct"], target="amount", sign=-1),
           PlantedEdge(id="income->amount", sources=["income"], target="amount", sign=1),
           PlantedEdge(id="segment->amount", sources=["segment"], target="amount", sign=0),
           PlantedEdge(id="seasonal->amount", sources=[], target="amount", sign=0)],
    phenomena=[PlantedPhenomenon(id="web_return_rate", variables=["returned", "channel"], value=0.19, rel=0.08)],
)


@pytest.mark.parametrize(("text", "sign"), [
    ("Orders with a higher discount have lower amounts.", -1),  # one up, one down: opposite directions
    ("Amount decreases as the discount grows deeper", -1),
    ("Lower income, lower amount.", 1),  # both down together
    ("Amount falls with discount_pct.", -1),
    ("Income raises the order amount.", 1),
    ("Segments differ in amount.", 0),
])
def test_direction_words(text: str, sign: int) -> None:
    assert direction(text) == sign


def test_an_edge_in_its_planted_direction_is_correct_and_rediscovered() -> None:
    m = match_finding("f2", "Order amount falls as discount pct rises: -0.8 per point.", SHEET)
    assert (m.verdict, m.matched) == ("correct", "discount_pct->amount")
    m = match_finding("f2", "Order amount falls with discount_pct (slope -0.8 per point).", SHEET)
    assert (m.verdict, m.matched) == ("correct", "discount_pct->amount")


def test_the_opposite_direction_is_wrong() -> None:
    m = match_finding("f3", "Customers with more income place smaller orders: amount drops with income.", SHEET)
    assert (m.verdict, m.matched) == ("wrong", "income->amount")


def test_a_relation_without_direction_is_correct_but_not_a_rediscovery() -> None:
    m = match_finding("f4", "The segment explains part of the variation in amount.", SHEET)
    assert (m.verdict, m.matched) == ("correct", None)


def test_a_phenomenon_value_within_tolerance_counts_percent_or_fraction() -> None:
    assert match_finding("f5", "The returned share of web orders is 19.5%.", SHEET).matched == "web_return_rate"
    assert match_finding("f6", "The returned rate is 0.2 on the web.", SHEET).matched == "web_return_rate"
    assert match_finding("f7", "The returned rate is 0.25 on the web.", SHEET).verdict == "unchecked"
    assert match_finding("f8", "The returned share of web orders is 19.5 percent.", SHEET).matched == "web_return_rate"
    # v9: a mean of another column over the returned orders, 18.8, is no 19% return rate (no percent written)
    mean = match_finding("f9", "The mean discount_pct across returned orders is 18.824626865671643.", SHEET)
    assert mean.matched != "web_return_rate"
    # a date the validator added states no value: December's 12 is not a planted gap of 12
    gap = SHEET.model_copy(update={"phenomena": [PlantedPhenomenon(id="gap", variables=["amount"], value=12.0,
                                                                   rel=0.05)]})
    dated = match_finding("f10", "The mean amount is 30.5 (over the rows dated from 2023-07-01 to 2023-12-31 only).",
                          gap)
    assert dated.verdict == "unchecked"
    assert match_finding("f10", "The mean gap in amount is 12.2.", gap).matched == "gap"
    assert match_finding("f11", "The returned rate is 0.19 (over the rows dated up to 2023-07-01 only).",
                         SHEET).matched == "web_return_rate"


def test_a_group_phenomenon_needs_its_group_named() -> None:
    north = SHEET.model_copy(update={"phenomena": [PlantedPhenomenon(
        id="north_income", variables=["income", "region"], value=48015.4, rel=0.02, group=["north", "N"])]})
    # v10: four unlabelled region means, one of them within 2% of the north's, is no north figure
    blind = match_finding("f5", "The average income by region is 48616.22, 47885.11, 54265.65 and 49965.90.", north)
    assert blind.matched != "north_income"
    assert match_finding("f6", "Mean income in the North is 48,100.", north).matched == "north_income"
    assert match_finding("f7", "Mean income: N 48100, S 52000.", north).matched == "north_income"  # the data's code
    assert match_finding("f8", "Mean income by region 'N' is 48100.", north).matched == "north_income"
    assert match_finding("f9", "No region's mean income (n = 48100) …", north).matched != "north_income"  # 'n' ≠ N


def test_unrelated_findings_are_unchecked_and_precision_counts_only_checked_ones() -> None:
    score = score_findings([("f2", "Order amount falls with discount_pct."),
                            ("f3", "Amount drops with income."),
                            ("f5", "The returned share is 19%."),
                            ("f8", "Region north has 120 customers.")], SHEET)
    assert (score.correct, score.wrong, score.unchecked, score.checked) == (2, 1, 1, 3)
    assert score.precision == pytest.approx(2 / 3)
    assert score.planted == 4  # three edges with a source + one phenomenon (the seasonal edge has no source)
    assert score.rediscovered == ["discount_pct->amount", "web_return_rate"] and score.recall == 0.5


def test_a_worlds_truth_sheet(tmp_path: Path) -> None:
    from worldsmith.evolution.worlds import build_world, load_template

    world = tmp_path / "world"
    build_world(load_template("commercial_growth", rows=1000), seed=3, out_dir=world, produced_by="test")
    sheet = truth_sheet(world)
    edges = {e.id: e.sign for e in sheet.edges}
    assert edges["discount_pct->amount"] == -1 and edges["income->amount"] == 1 and edges["segment->basket_size"] == 0
    assert {"amount", "discount_pct", "returned"} <= set(sheet.variables)
    assert all(isinstance(p.value, float) for p in sheet.phenomena) and sheet.phenomena
    # the template's order system renames amount in its later yearly files (the file on disk says so)
    assert "amt" in sheet.aliases["amount"] and "amt" in (world / "data" / "orders_2024.csv").read_text().split("\n")[0]
    # the north's mean income is about one region, which the CRM export codes as 'N' (its memo says so)
    north = next(p for p in sheet.phenomena if p.id == "north_income")
    assert north.group == ["north", "N"]
    import pandas as pd

    assert set(pd.read_excel(world / "data" / "crm.xlsx", sheet_name="crm")["region"].dropna()) == {"N", "S", "E", "W"}


@pytest.mark.parametrize(("text", "sign"), [
    ("The correlation between basket_size and amount in the 2023 orders is 0.8294.", 1),  # a year is no coefficient
    ("Pearson r between income and amount: -0.42 (n = 1,200).", -1),
    ("The correlation of amount with discount_pct is \u22120.31.", -1),  # a typographic minus
    ("Amount and income correlate at r=.05", 1),
    ("The correlation between amount and income is 1.0 in 2024.", 0),  # no number strictly inside (-1, 1)
    ("Mean amount is 0.5 higher; no correlation was computed. Income is 0.3.", 0),  # another sentence's number
])
def test_a_correlation_coefficients_sign(text: str, sign: int) -> None:
    from worldsmith.evolution.truth import coefficient_sign

    assert coefficient_sign(text) == sign


def test_a_coefficient_without_direction_words_is_checked_by_its_sign() -> None:
    m = match_finding("f9", "The correlation between income and amount is 0.61.", SHEET)
    assert (m.verdict, m.matched) == ("correct", "income->amount")  # rediscovered: the sign is the planted one
    m = match_finding("f10", "The correlation between discount_pct and amount is 0.12.", SHEET)
    assert (m.verdict, m.matched) == ("wrong", "discount_pct->amount")  # planted negative


def test_a_renamed_column_names_its_variable() -> None:
    """orders_2024.csv calls `amount` `amt` (a rename defect): a finding on amt is a finding on amount."""
    sheet = SHEET.model_copy(update={"aliases": {"amount": ["amt"]}})
    m = match_finding("f5", "The correlation between discount_pct and amt in the 2024 orders is -0.21.", sheet)
    assert (m.verdict, m.matched) == ("correct", "discount_pct->amount")
    assert match_finding("f5", "The correlation between discount_pct and amt is -0.21.", SHEET).verdict == "unchecked"
