"""Profiler: semantic types, stats, keys, joins, failures, documents, sampling, prompt budget."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.files.conftest import make_sqlite
from worldsmith.tools.files import TableRef, profile_table, profile_workspace
from worldsmith.tools.files.columns import profile_column


def _by_name(profile, name):
    return next(c for c in profile.columns if c.name == name)


def test_semantic_types_and_numeric_stats(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame(
        {
            "order_id": np.arange(1000, 1000 + n),
            "amount": rng.normal(50, 10, n).round(2),
            "status": rng.choice(["paid", "open", "void"], n),
            "created": pd.date_range("2023-01-01", periods=n, freq="D").strftime("%Y-%m-%d"),
            "comment": [f"customer said thing number {i} about the delivery window" for i in range(n)],
            "is_member": rng.choice(["yes", "no"], n),
            "churned": rng.integers(0, 2, n),
        }
    )
    df.loc[::10, "amount"] = np.nan
    path = tmp_path / "orders.csv"
    df.to_csv(path, index=False)
    prof, _ = profile_table(TableRef(path=str(path), format="csv"))
    types = {c.name: c.semantic_type for c in prof.columns}
    assert types == {
        "order_id": "id",
        "amount": "numeric",
        "status": "categorical",
        "created": "datetime",
        "comment": "text",
        "is_member": "bool",
        "churned": "bool",
    }
    amount = _by_name(prof, "amount")
    assert amount.null_rate == pytest.approx(0.1)
    assert amount.mean == pytest.approx(df["amount"].mean())
    assert amount.std == pytest.approx(df["amount"].std())
    assert (amount.min, amount.max) == (df["amount"].min(), df["amount"].max())
    status = _by_name(prof, "status")
    assert {v.value for v in status.top_values} == {"paid", "open", "void"}
    assert sum(v.count for v in status.top_values) == n
    created = _by_name(prof, "created")
    last_day = (pd.Timestamp("2023-01-01") + pd.Timedelta(days=n - 1)).date().isoformat()
    assert (created.min, created.max) == ("2023-01-01", last_day)
    assert prof.n_rows == n and prof.n_rows_exact and not prof.sampled
    assert prof.candidate_keys[0] == ["order_id"]
    assert len(prof.sample_rows) == 5 and prof.sample_rows[0]["order_id"] == "1000"


def test_numbers_stored_as_text_are_flagged() -> None:
    s = pd.Series(["1.5", "2", "N/A", "4.25"] * 10 + ["7"] * 60, name="price")
    col = profile_column("price", s)
    assert col.semantic_type == "numeric" and col.max == 7.0
    assert any("'N/A'" in note for note in col.notes)


def test_dates_written_as_yyyymmdd_text_are_dates_and_the_same_digits_as_integers_are_not() -> None:
    s = pd.Series(["20230103", "20240601", "20241225", "20230215"] * 5, name="date")
    col = profile_column("date", s)
    assert col.semantic_type == "datetime" and (col.min, col.max) == ("2023-01-03", "2024-12-25")
    assert any('format="%Y%m%d"' in note for note in col.notes)
    assert profile_column("date", s.astype("int64")).semantic_type != "datetime"  # read as numbers: maybe ids
    # eight digits that are no date (month 13) stay numbers stored as text
    assert profile_column("code", pd.Series(["20231301", "20230101", "20230102"] * 5)).semantic_type != "datetime"


def test_padded_column_name_is_noted() -> None:
    col = profile_column("calls ", pd.Series([1, 2, 3]))
    assert any("whitespace" in note for note in col.notes)


def test_pair_key_when_no_single_key(tmp_path: Path) -> None:
    df = pd.DataFrame(
        {"country": ["NO", "NO", "PE", "PE"], "year": [2020, 2021, 2020, 2021], "v": [1.5, 2.5, 1.5, 2.5]}
    )
    path = tmp_path / "panel.csv"
    df.to_csv(path, index=False)
    prof, _ = profile_table(TableRef(path=str(path), format="csv"))
    assert prof.candidate_keys == [["country", "year"]]


def _two_files(root: Path) -> None:
    rng = np.random.default_rng(1)
    codes = [f"C{i:04d}" for i in range(200)]
    pd.DataFrame({"customer_code": codes, "segment": rng.choice(["a", "b", "c"], 200)}).to_csv(
        root / "customers.csv", index=False
    )
    orders = pd.DataFrame(
        {
            "Order ID": np.arange(500),
            "client_ref": rng.choice(codes[:150], 500),  # different name, overlapping values
            "total": rng.gamma(2.0, 30.0, 500).round(2),
        }
    )
    with pd.ExcelWriter(root / "orders.xlsx") as xw:
        orders.to_excel(xw, sheet_name="orders", index=False)
    pd.DataFrame({"order_id": np.arange(0, 500, 5), "shipped": ["y"] * 100}).to_parquet(root / "shipments.parquet")


def test_workspace_keys_and_joins(tmp_path: Path) -> None:
    _two_files(tmp_path)
    ws = profile_workspace(tmp_path)
    assert sorted(t.label for t in ws.tables) == ["customers.csv", "orders.xlsx[orders]", "shipments.parquet"]
    assert not ws.failures
    pairs = {(j.left.label, j.right.label): j for j in ws.joins}
    overlap = pairs[("customers.csv.customer_code", "orders.xlsx[orders].client_ref")]
    assert overlap.reason == "overlap" and overlap.overlap_ratio == 1.0 and overlap.left_unique
    named = pairs[("orders.xlsx[orders].Order ID", "shipments.parquet.order_id")]
    assert "name" in named.reason and named.overlap_ratio == 1.0
    assert not any("segment" in (j.left.column, j.right.column) for j in ws.joins)


def test_sqlite_foreign_keys_become_joins(tmp_path: Path) -> None:
    make_sqlite(tmp_path / "shop.sqlite")
    ws = profile_workspace(tmp_path)
    fks = {(j.left.label, j.right.label) for j in ws.joins if j.reason == "foreign_key"}
    assert fks == {
        ("shop.sqlite[orders].customer_id", "shop.sqlite[customers].id"),
        ("shop.sqlite[orders].sku", "shop.sqlite[products].sku"),
    }
    orders = next(t for t in ws.tables if t.table == "orders")
    assert orders.n_rows == 10 and ["order_id"] in orders.candidate_keys


def test_failures_documents_and_other_files(tmp_path: Path) -> None:
    pd.DataFrame({"a": [1, 2]}).to_csv(tmp_path / "good.csv", index=False)
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n3,4,5\n")
    (tmp_path / "broken.json").write_text('{"a": [1, 2}')
    (tmp_path / "MEMO.md").write_text("# Notes\n\nRevenue is in kEUR.\nQ3 is missing.\n")
    (tmp_path / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (tmp_path / ".hidden.csv").write_text("x\n1\n")
    ws = profile_workspace(tmp_path)
    assert [t.file for t in ws.tables] == ["good.csv"]
    failed = {f.file: f for f in ws.failures}
    assert failed["bad.csv"].reason == "corrupt" and "line 3" in failed["bad.csv"].message
    assert failed["broken.json"].reason == "invalid_json"
    assert str(tmp_path) not in failed["bad.csv"].message  # prompts carry relative names only
    assert ws.documents[0].file == "MEMO.md" and ws.documents[0].first_lines[1] == "Revenue is in kEUR."
    assert [o.file for o in ws.other_files] == ["chart.png"]


def test_empty_sheet_fails_alone(tmp_path: Path) -> None:
    with pd.ExcelWriter(tmp_path / "book.xlsx") as xw:
        pd.DataFrame({"a": [1, 2]}).to_excel(xw, sheet_name="data", index=False)
        pd.DataFrame().to_excel(xw, sheet_name="blank", index=False)
    ws = profile_workspace(tmp_path)
    assert [t.table for t in ws.tables] == ["data"]
    assert [(f.table, f.reason) for f in ws.failures] == [("blank", "empty_sheet")]


def _wide_workspace(root: Path) -> None:
    rng = np.random.default_rng(2)
    for k in range(4):
        pd.DataFrame({f"col_{k}_{i}": rng.normal(size=50) for i in range(30)}).to_csv(root / f"t{k}.csv", index=False)
    (root / "notes.txt").write_text("\n".join(f"line {i} of the analyst memo" for i in range(20)))


@pytest.fixture(scope="module")
def wide_profile(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("wide")
    _wide_workspace(root)
    return profile_workspace(root)


@pytest.mark.parametrize("budget", [300, 800, 2000, 5000, 20000, 200000])
def test_to_prompt_respects_budget(wide_profile, budget: int) -> None:
    text = wide_profile.to_prompt(max_chars=budget)
    assert len(text) <= budget
    assert text.startswith("# Workspace: 4 tables")
    if budget >= 800:
        assert all(f"t{k}.csv" in text for k in range(4))  # every table is still named
    if budget >= 200000:
        assert "first 5 rows:" in text and "mean" in text and "line 7 of the analyst memo" in text


def test_to_prompt_sheds_detail_gradually(wide_profile) -> None:
    sizes = [len(wide_profile.to_prompt(max_chars=b)) for b in (1500, 4000, 12000, 40000)]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]


def test_row_limited_read_estimates_rows(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    pd.DataFrame({"id": range(5000), "v": np.arange(5000) % 7}).to_csv(path, index=False)
    prof, _ = profile_table(TableRef(path=str(path), format="csv"), max_rows_exact=1000, max_rows_read=2000)
    assert prof.sampled and "first 1,000 rows" in (prof.sampling_note or "")
    assert prof.n_rows == 5000 and not prof.n_rows_exact
    assert _by_name(prof, "id").max == 999.0


@pytest.mark.slow
def test_million_row_csv_profiles_from_a_sample(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    n = 1_000_000
    path = tmp_path / "big.csv"
    pd.DataFrame(
        {"id": np.arange(n), "x": rng.normal(size=n).round(4), "g": rng.choice(list("abcdef"), n)}
    ).to_csv(path, index=False)
    start = time.perf_counter()
    ws = profile_workspace(path)
    elapsed = time.perf_counter() - start
    t = ws.tables[0]
    assert t.sampled and t.n_rows == n and t.n_rows_exact
    assert "random sample of 200,000" in (t.sampling_note or "")
    assert _by_name(t, "x").mean == pytest.approx(0.0, abs=0.01)
    print(f"profiled 1M rows x 3 cols in {elapsed:.2f} s")


def test_dabench_tables_profile_without_error(dabench_dir: Path) -> None:
    tables = dabench_dir / "tables"
    if not tables.is_dir():
        pytest.skip(f"{tables} not found")
    ws = profile_workspace(tables)  # read in place, never copied
    assert not ws.failures, [f.message for f in ws.failures]
    assert len(ws.tables) == len([p for p in tables.iterdir() if p.suffix == ".csv"])
    assert all(t.n_rows > 0 and t.columns for t in ws.tables)
    assert len(ws.to_prompt(max_chars=6000)) <= 6000


def test_duplicate_headers_are_noted(tmp_path: Path) -> None:
    path = tmp_path / "dup.csv"
    path.write_text("a,a,b\n1,2,3\n4,5,6\n")
    prof, _ = profile_table(TableRef(path=str(path), format="csv"))
    assert any("duplicate header 'a'" in n for n in _by_name(prof, "a.1").notes)
    assert not _by_name(prof, "b").notes


def test_file_over_size_threshold_is_profiled_from_its_head(tmp_path: Path) -> None:
    from worldsmith.tools.files import FileLimits

    path = tmp_path / "wide.jsonl.gz"
    pd.DataFrame({"k": range(3000), "v": ["x"] * 3000}).to_json(path, orient="records", lines=True)
    prof, _ = profile_table(
        TableRef(path=str(path), format="jsonl.gz"), max_rows_exact=500, limits=FileLimits(max_full_read_bytes=100)
    )
    assert prof.sampled and "first 500 rows" in (prof.sampling_note or "")
    assert prof.n_rows == 3000 and not prof.n_rows_exact


def test_shared_year_column_joins_by_name(tmp_path: Path) -> None:
    pd.DataFrame({"year": [2019, 2020, 2021], "gdp": [1.0, 1.1, 1.3]}).to_csv(tmp_path / "macro.csv", index=False)
    panel = pd.DataFrame({"Year": [2019, 2019, 2020, 2021], "firm": ["a", "b", "a", "b"], "sales": [3, 4, 5, 6]})
    panel.to_csv(tmp_path / "firms.csv", index=False)
    ws = profile_workspace(tmp_path)
    assert [(j.left.label, j.right.label, j.reason) for j in ws.joins] == [
        ("firms.csv.Year", "macro.csv.year", "name")
    ]


def test_truncated_gzip_in_a_workspace_is_a_failure_not_a_crash(tmp_path: Path) -> None:
    import gzip

    whole = gzip.compress(("a,b\n" + "".join(f"{i},{i * 2}\n" for i in range(20_000))).encode())
    (tmp_path / "cut.csv.gz").write_bytes(whole[: len(whole) // 2])
    ws = profile_workspace(tmp_path)
    assert not ws.tables and [(f.file, f.reason) for f in ws.failures] == [("cut.csv.gz", "corrupt")]
