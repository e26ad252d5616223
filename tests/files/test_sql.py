"""Read-only SQL tool: selects, row limits, refusals on both engines, timeouts, schema description."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pandas as pd
import pytest

from worldsmith.tools.sql import SqlError, SqlRefused, SqlTimeout, describe_sqlite, run_sql, sql_tables

ENGINES = ["sqlite", "duckdb"]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("engine", ENGINES)
def test_select_and_join(shop_db: Path, engine: str) -> None:
    res = run_sql(
        "SELECT c.name, SUM(o.qty) AS q FROM orders o JOIN customers c ON c.id = o.customer_id "
        "GROUP BY c.name ORDER BY q DESC",
        [shop_db],
        engine=engine,
    )
    assert res.engine == engine and res.columns == ["name", "q"]
    assert sum(r[1] for r in res.rows) == 55 and len(res.rows) == 5 and not res.truncated


@pytest.mark.parametrize("engine", ENGINES)
def test_row_limit_truncates(shop_db: Path, engine: str) -> None:
    res = run_sql("SELECT * FROM orders ORDER BY order_id", [shop_db], max_rows=4, engine=engine)
    assert [r[0] for r in res.rows] == [1, 2, 3, 4] and res.truncated
    exact = run_sql("SELECT * FROM orders", [shop_db], max_rows=10, engine=engine)
    assert len(exact.rows) == 10 and not exact.truncated


REFUSED = [
    "INSERT INTO customers VALUES (99, 'x', 'NO')",
    "DELETE FROM orders",
    "UPDATE orders SET qty = 0",
    "DROP TABLE orders",
    "CREATE TABLE t (a INT)",
    "ATTACH DATABASE 'other.db' AS other",
    "PRAGMA query_only = OFF",
    "PRAGMA journal_mode = DELETE",
    "SELECT 1; DROP TABLE orders",
    "BEGIN",
]


@pytest.mark.security
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("query", REFUSED)
def test_writes_are_refused(shop_db: Path, engine: str, query: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = _digest(shop_db)
    with pytest.raises(SqlRefused, match="refused"):
        run_sql(query, [shop_db], engine=engine)
    assert _digest(shop_db) == before
    assert not (tmp_path / "other.db").exists()


def test_sqlite_read_pragmas_are_allowed(shop_db: Path) -> None:
    res = run_sql("PRAGMA table_info(orders)", [shop_db])
    assert [r[1] for r in res.rows] == ["order_id", "customer_id", "sku", "qty"]


@pytest.mark.security
def test_duckdb_cannot_read_other_files(tmp_path: Path, people: pd.DataFrame) -> None:
    src = tmp_path / "people.csv"
    people.to_csv(src, index=False)
    secret = tmp_path / "secret.csv"
    secret.write_text("k\nhunter2\n")
    for query in (f"SELECT * FROM read_csv('{secret}')", "SET enable_external_access = true"):
        with pytest.raises(SqlError):
            run_sql(query, [src])


def test_duckdb_over_csv_parquet_xlsx(tmp_path: Path, people: pd.DataFrame) -> None:
    people.to_csv(tmp_path / "people.csv", index=False)
    pd.DataFrame({"city": ["Oslo", "Lima", "Rome"], "pop": [0.7, 10.0, 2.8]}).to_parquet(tmp_path / "cities.parquet")
    with pd.ExcelWriter(tmp_path / "2024 budget.xlsx") as xw:
        pd.DataFrame({"city": ["Oslo"], "eur": [5]}).to_excel(xw, sheet_name="Sheet1", index=False)
    sources = [tmp_path / "people.csv", tmp_path / "cities.parquet", tmp_path / "2024 budget.xlsx"]
    assert set(sql_tables(sources)) == {"people", "cities", "t_2024_budget"}
    res = run_sql(
        "SELECT p.city, COUNT(*) AS n, MAX(c.pop) AS pop, MAX(b.eur) AS eur FROM people p "
        "JOIN cities c USING (city) LEFT JOIN t_2024_budget b USING (city) GROUP BY p.city ORDER BY p.city",
        sources,
    )
    assert res.rows == [["Lima", 2, 10.0, None], ["Oslo", 3, 0.7, 5], ["Rome", 1, 2.8, None]]


@pytest.mark.parametrize(
    ("engine", "query"),
    [
        ("sqlite", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"),
        ("sqlite", "SELECT COUNT(*) FROM " + ", ".join(f"orders t{i}" for i in range(9))),  # 10**9 rows
        ("duckdb", "SELECT COUNT(*) FROM range(100000000) a, range(100000000) b WHERE a.range + b.range = -1"),
    ],
)
def test_timeout_interrupts_huge_query(shop_db: Path, engine: str, query: str) -> None:
    start = time.perf_counter()
    with pytest.raises(SqlTimeout):
        run_sql(query, [shop_db], timeout_s=0.5, engine=engine)
    assert time.perf_counter() - start < 10  # generous: shared CI machines; the point is that it stops at all


def test_sql_errors_name_the_tables(shop_db: Path) -> None:
    with pytest.raises(SqlError) as err:
        run_sql("SELECT * FROM nope", [shop_db])
    assert not isinstance(err.value, SqlRefused) and "customers" in str(err.value)


def test_describe_sqlite(shop_db: Path) -> None:
    schema = describe_sqlite(shop_db)
    tables = {t.name: t for t in schema.tables}
    assert set(tables) == {"customers", "orders", "products"}
    assert {t: tables[t].row_count for t in tables} == {"customers": 5, "orders": 10, "products": 2}
    cols = {c.name: c for c in tables["customers"].columns}
    assert cols["id"].pk and cols["name"].notnull and cols["name"].type == "TEXT"
    fks = {(tuple(f.columns), f.ref_table, tuple(f.ref_columns)) for f in tables["orders"].foreign_keys}
    assert fks == {(("customer_id",), "customers", ("id",)), (("sku",), "products", ())}


def test_duckdb_reads_big_csv_in_full_not_a_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import worldsmith.tools.sql as sql
    from worldsmith.tools.files import FileLimits

    monkeypatch.setattr(sql, "DEFAULT_LIMITS", FileLimits(max_full_read_bytes=1000))
    path = tmp_path / "big.csv"
    frame = pd.DataFrame({"n": range(5000), "city": ["Genève", "Zürich"] * 2500})
    path.write_bytes(frame.to_csv(index=False, sep=";").encode("cp1252"))
    res = run_sql("SELECT COUNT(*), SUM(n), MIN(city) FROM big", [path])
    assert res.rows == [[5000, sum(range(5000)), "Genève"]]
