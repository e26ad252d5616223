"""What the evolution graph hands the director: the tables' columns, one-table question ideas, last round's refusal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from worldsmith.graphs.evolve_ops import question_ideas, table_columns, table_lines
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
    assert ideas[:2] == ["In orders.csv, how does the mean amount differ across channel?",
                         "In orders.csv, how does the mean units differ across channel?"]
    assert "In orders.csv, how strongly are amount and units correlated?" in ideas
    assert "In orders.csv, how does the monthly mean of amount change over date?" in ideas
    assert not any("stub.csv" in q for q in ideas)  # a table of two rows offers nothing to ask
    assert not any("order_id" in q for q in ideas)  # identifiers are neither measures nor groups
    assert table_columns(files)["orders.csv"] == ["order_id", "channel", "date", "amount", "units"]
    assert "- orders.csv (60 rows): order_id, channel, date, amount, units" in table_lines(files)
