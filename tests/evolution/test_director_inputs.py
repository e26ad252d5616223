"""What the evolution graph hands the director: the tables' columns, one-table question ideas, last round's refusal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import pandas as pd

import math

from worldsmith.evolution.ideas import correlation_ratio, id_number, join_ideas, question_ideas, spearman
from worldsmith.core.workspace_types import Node
from worldsmith.graphs.evolve_ops import offered_ideas, table_columns, table_lines
from worldsmith.tools.files.profile import profile_workspace


def _folder(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    n = 60
    pd.DataFrame({"order_id": [f"o{i}" for i in range(n)], "channel": rng.choice(["web", "store"], n),
                  "date": pd.date_range("2024-01-01", periods=n, freq="D").strftime("%Y-%m-%d"),
                  "amount": rng.normal(50, 5, n).round(2), "units": rng.integers(1, 5, n)}).to_csv(
        tmp_path / "orders.csv", index=False)
    pd.DataFrame({"k": ["a", "b"], "v": [1.0, 2.0]}).to_csv(tmp_path / "stub.csv", index=False)  # 2 rows
    return tmp_path


def test_ideas_are_one_table_questions_built_from_the_column_types(tmp_path: Path) -> None:
    files = profile_workspace(_folder(tmp_path))
    ideas = question_ideas(files)
    assert "In orders.csv, how does the mean amount differ across channel?" in ideas
    assert "In orders.csv, how strongly are amount and units correlated?" in ideas
    assert "In orders.csv, how does the monthly mean of amount change over date?" in ideas
    assert not any("stub.csv" in q for q in ideas)  # a table of two rows offers nothing to ask
    assert not any("order_id" in q for q in ideas)  # identifiers are neither measures nor groups
    assert table_columns(files)["orders.csv"] == ["order_id", "channel", "date", "amount", "units"]
    assert "- orders.csv (60 rows): order_id, channel, date, amount, units" in table_lines(files)


def test_ideas_put_the_relations_the_data_shows_first(tmp_path: Path) -> None:
    """`price` moves with `size` and differs by `tier`; `noise` and `channel` are unrelated to anything. The
    related pairs come before every unrelated one, whatever the column order."""
    rng = np.random.default_rng(1)
    n = 400
    size = rng.uniform(1, 10, n)
    tier = rng.choice(["basic", "pro"], n)
    pd.DataFrame({"channel": rng.choice(["web", "store"], n), "noise": rng.normal(0, 1, n),
                  "tier": tier, "size": size.round(2),
                  "price": (5 * size + np.where(tier == "pro", 20, 0) + rng.normal(0, 2, n)).round(2)}
                 ).to_csv(tmp_path / "sales.csv", index=False)
    ideas = question_ideas(profile_workspace(tmp_path))
    assert ideas[0] == "In sales.csv, how strongly are size and price correlated?"
    assert ideas.index("In sales.csv, how does the mean price differ across tier?") < min(
        ideas.index(q) for q in ideas if "noise" in q or "across channel" in q)


def test_association_strengths_match_hand_computed_values() -> None:
    # two groups of 10 each: 'a' takes 0 and 2, 'b' 10 and 12 -> between SS 500, within SS 20, total 520
    groups = pd.Series(["a", "b"] * 20)
    values = pd.Series([0, 10, 2, 12] * 10, dtype=float)
    assert correlation_ratio(groups, values) == pytest.approx(math.sqrt(1 - (20 / 520) * (39 / 38)))
    assert correlation_ratio(pd.Series(["a", "b"] * 20), pd.Series([1.0] * 40)) == 0.0  # a constant measure
    x = pd.Series(np.arange(30, dtype=float))
    assert spearman(x, x ** 3) == pytest.approx(1.0)  # monotone: rank correlation 1
    y = pd.Series(np.random.default_rng(0).normal(size=30))
    assert spearman(x, y) == pytest.approx(abs(x.corr(y, method="spearman")))
    assert spearman(x[:10], x[:10]) == 0.0  # under 20 pairs: no evidence either way


def _joined_room(tmp_path: Path) -> Path:
    """Orders (ids 'C-0007') and a customer master (ids 'c7', unique): an order's amount rises with its customer's
    income; `tier` and `noise` are unrelated to amount. Two yearly parts of one returns table share columns."""
    rng = np.random.default_rng(2)
    n_cust, n = 80, 600
    income = rng.uniform(20, 100, n_cust)
    pd.DataFrame({"customer_id": [f"c{i}" for i in range(1, n_cust + 1)], "income": income.round(1),
                  "tier": rng.choice(["gold", "silver"], n_cust), "noise": rng.normal(0, 1, n_cust)}
                 ).to_csv(tmp_path / "customers.csv", index=False)
    cust = rng.integers(1, n_cust + 1, n)
    pd.DataFrame({"order_id": [f"o{i}" for i in range(n)], "acct": [f"C-{c:04d}" for c in cust],
                  "channel": rng.choice(["web", "store"], n),
                  "amount": (2 * income[cust - 1] + rng.normal(0, 5, n)).round(2)}).to_csv(
        tmp_path / "orders.csv", index=False)
    for year in (2023, 2024):
        pd.DataFrame({"case": [f"r{year}-{i}" for i in range(40)], "days": rng.integers(1, 30, 40),
                      "kind": rng.choice(["a", "b"], 40)}).to_csv(tmp_path / f"returns_{year}.csv", index=False)
    return tmp_path


def test_id_number_reads_the_number_in_each_spelling() -> None:
    assert id_number(pd.Series(["C-0007", "c7", "CUST_7", "7", "none"])).tolist()[:4] == [7, 7, 7, 7]
    assert math.isnan(id_number(pd.Series(["none"]))[0])


def test_join_ideas_pair_the_two_tables_and_rank_the_planted_relation_first(tmp_path: Path) -> None:
    files = profile_workspace(_joined_room(tmp_path))
    ideas = join_ideas(files)
    assert ideas, "the profile links orders.acct to customers.customer_id: there are join ideas"
    # the order's amount against its customer's income, on ids matched by their number, comes first
    assert ideas[0] == ("Joining orders.csv (acct) to customers.csv (customer_id), matching the ids by the number in "
                        "them, how strongly are amount and income correlated?")
    # the check on the data itself, in plain pandas: matched by number, income and amount are strongly related
    o, c = pd.read_csv(tmp_path / "orders.csv"), pd.read_csv(tmp_path / "customers.csv")
    o["k"], c["k"] = o.acct.str[2:].astype(int), c.customer_id.str[1:].astype(int)
    assert o.merge(c, on="k")[["amount", "income"]].corr(method="spearman").iloc[0, 1] > 0.9
    # a measure of one table across a group of the other, both ways round
    assert any("how does the mean amount differ across tier?" in q for q in ideas)
    assert any("how does the mean income differ across channel?" in q for q in ideas)
    # the yearly parts of one table are stacked, never joined: no idea pairs them
    assert not any("returns_2023.csv" in q and "returns_2024.csv" in q for q in ideas)
    assert all(q.startswith("Joining ") for q in ideas)


def _node(i: int, depth: int, status: str) -> Node:
    return Node(id=i, mode="deepen" if depth else "root", status=status, depth=depth, goal=f"goal {i}")


def test_join_ideas_are_offered_only_once_a_node_below_the_root_is_verified() -> None:
    tables = {"ideas": ["s1", "s2", "s3"], "join_ideas": ["j1", "j2"]}
    never = lambda q: False  # noqa: E731
    assert offered_ideas(tables, [_node(0, 0, "supported")], never) == ["s1", "s2", "s3"]
    assert offered_ideas(tables, [_node(0, 0, "supported"), _node(1, 1, "unsupported")], never) == ["s1", "s2", "s3"]
    nodes = [_node(0, 0, "supported"), _node(1, 1, "supported")]
    assert offered_ideas(tables, nodes, never) == ["j1", "s1", "j2", "s2", "s3"]
    assert offered_ideas(tables, nodes, lambda q: q in ("j1", "s1")) == ["j2", "s2", "s3"]
    assert offered_ideas(tables, nodes, never, n=2) == ["j1", "s1"]
