"""What the evolution graph hands the director: the tables' columns, one-table question ideas, last round's refusal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import pandas as pd

import math

from worldsmith.evolution.ideas import correlation_ratio, question_ideas, spearman
from worldsmith.graphs.evolve_ops import table_columns, table_lines
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
