"""Observation formats and defects: cancellations (rows dropped), undocumented defects, free-text logs, quarter
partitions. Expected values are recomputed here with plain pandas (and a regex written here), never with the
project's recipes or kernels."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.worlds.worlds_testkit import contract, mini_contract
from worldsmith.evolution.worlds import (
    build_world,
    parse_answer,
    reference_solution_code,
)
from worldsmith.evolution.worlds.validate import validate_contract


def _truth(world: Path, pid: str) -> float:
    items = json.loads((world / ".truth" / "phenomena.json").read_text())["phenomena"]
    return next(p["value"] for p in items if p["id"] == pid)


def _solution(world: Path, pid: str) -> float:
    code = reference_solution_code(world, pid)
    out = subprocess.run([sys.executable, "-c", code], cwd=world, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    return float(parse_answer(out.stdout, pid))


def _audit(world: Path) -> dict:
    return json.loads((world / "AUDIT.json").read_text())


def _all_passed(world: Path) -> bool:
    a = _audit(world)
    return all(r["status"] != "fail" for k in ("edges", "invariants", "phenomena") for r in a[k])


# ----------------------------------------------------------------------------- cancellations
@pytest.fixture(scope="module")
def cancelled_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Orders cancelled more often the larger the amount (30 % on average): the kept orders are cheaper."""
    d = mini_contract()
    d["systems"][1]["defects"] = [{"type": "cancellations", "rate": 0.3, "depends_on": "amount"}]
    out = tmp_path_factory.mktemp("obs") / "cancelled"
    build_world(contract(d), seed=4, out_dir=out)
    return out


def test_cancelled_orders_are_missing_from_the_export(cancelled_world: Path) -> None:
    shop = pd.read_csv(cancelled_world / "data" / "shop.csv")
    canon = pd.read_parquet(cancelled_world / ".truth" / "canonical" / "orders.parquet")
    assert len(canon) == 4000 and 0.6 * 4000 < len(shop) < 0.8 * 4000
    assert shop["order_id"].is_unique and set(shop["order_id"]) < set(canon["order_id"])
    memo = (cancelled_world / "data" / "memos" / "shop.md").read_text()
    assert "Cancelled records are not in this export" in memo


def test_expected_values_are_what_the_observed_files_give(cancelled_world: Path) -> None:
    shop = pd.read_csv(cancelled_world / "data" / "shop.csv")
    canon = pd.read_parquet(cancelled_world / ".truth" / "canonical" / "orders.parquet")
    observed_mean = shop["amount"].mean()  # plain pandas on the delivered file
    truth = _truth(cancelled_world, "mean_amount")
    assert abs(truth - observed_mean) < 0.01  # the file rounds amounts to cents
    assert canon["amount"].mean() - truth > 1.0  # not the mean over every order ever placed
    assert abs(_solution(cancelled_world, "mean_amount") - observed_mean) < 1e-9
    assert _all_passed(cancelled_world)


def test_cancelling_the_parent_of_other_rows_is_refused() -> None:
    d = mini_contract()
    d["systems"][0]["defects"] = [{"type": "cancellations", "rate": 0.1}]
    errors = [p for p in validate_contract(contract(d)) if p.severity == "error"]
    assert any(p.code == "cancellations" and "orders" in p.message for p in errors), errors


# ----------------------------------------------------------------------------- undocumented defects
@pytest.fixture(scope="module")
def hidden_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """From 2024 the shop records amounts in cents, and nobody wrote it down."""
    d = mini_contract()
    d["systems"][1]["defects"] = [{"type": "unit_drift", "variable": "amount", "since": "2024-01-01", "factor": 100,
                                   "from_unit": "USD", "to_unit": "cents", "memo": False}]
    out = tmp_path_factory.mktemp("obs") / "hidden"
    build_world(contract(d), seed=4, out_dir=out)
    return out


def test_an_undocumented_change_has_no_memo_but_the_audit_knows_it(hidden_world: Path) -> None:
    memos = hidden_world / "data" / "memos"
    assert not memos.exists() or not any("amount" in p.read_text() for p in memos.glob("*.md"))
    shop = pd.read_csv(hidden_world / "data" / "shop.csv", parse_dates=["date"])
    late = shop["date"] >= "2024-01-01"
    ratio = shop.loc[late, "amount"].median() / shop.loc[~late, "amount"].median()
    assert 60 < ratio < 160  # the change is there in the data, in cents
    fixed = shop["amount"].where(~late, shop["amount"] / 100).mean()  # what a careful analyst computes
    assert abs(_truth(hidden_world, "mean_amount") - fixed) < 0.01
    assert abs(_solution(hidden_world, "mean_amount") - fixed) < 1e-6
    audit = _audit(hidden_world)
    assert any("undocumented" in line for line in audit["reconciliation"])
    assert _all_passed(hidden_world)
    ledger = json.loads((hidden_world / ".truth" / "ledger.json").read_text())["entries"]
    assert [e["documented"] for e in ledger if e["defect"] == "unit_drift"] == [False]


def test_the_validator_flags_undocumented_defects() -> None:
    d = mini_contract()
    d["systems"][1]["defects"] = [{"type": "delay", "days": 3, "memo": False}]
    warnings = [p for p in validate_contract(contract(d)) if p.code == "undocumented_defect"]
    assert len(warnings) == 1 and "posting delay" in warnings[0].message
    assert warnings[0].path == "systems[1](shop).defects[0](delay).memo"


# ----------------------------------------------------------------------------- free-text logs + quarter files
@pytest.fixture(scope="module")
def log_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = mini_contract()
    d["systems"][0]["format"] = "txt"
    d["systems"][1].update(format="txt", partition="quarter")
    out = tmp_path_factory.mktemp("obs") / "logs"
    build_world(contract(d), seed=2, out_dir=out)
    return out


LINE = re.compile(r"^(?:\[(\w+) ([^\]]*)\] )?(\w+): (.*)$")
PAIR = re.compile(r'(\w+)=("[^"]*"|\S+)')


def _parse_log(path: Path) -> pd.DataFrame:
    """What a reference solution does: one regex for the line, one for its key=value pairs."""
    rows = []
    for line in path.read_text().splitlines():
        m = LINE.match(line)
        assert m, line
        row = {m.group(1): m.group(2)} if m.group(1) else {}
        row.update({k: v.strip('"') for k, v in PAIR.findall(m.group(4))})
        rows.append(row)
    return pd.DataFrame(rows)


def test_a_log_is_one_parseable_record_per_line(log_world: Path) -> None:
    crm = _parse_log(log_world / "data" / "crm.txt")
    canon = pd.read_parquet(log_world / ".truth" / "canonical" / "customers.parquet")
    assert len(crm) == len(canon) == 400
    m = crm.merge(canon, on="customer_id", suffixes=("_log", ""))
    assert (m["region_log"] == m["region"]).all()
    assert (m["income_log"].astype(float) - m["income"].round(2)).abs().max() < 1e-9
    first = (log_world / "data" / "crm.txt").read_text().splitlines()[0]
    assert re.fullmatch(r"crm: customer_id=C-\d+ region=(north|south) income=[\d.]+", first), first


def test_quarter_files_hold_their_quarter_and_together_every_order(log_world: Path) -> None:
    files = sorted((log_world / "data").glob("shop_*.txt"))
    assert [f.stem for f in files] == [f"shop_{y}Q{q}" for y in (2023, 2024) for q in (1, 2, 3, 4)]
    parts = []
    for f in files:
        df = _parse_log(f)
        dates = pd.to_datetime(df["date"])
        year, quarter = int(f.stem[5:9]), int(f.stem[-1])
        assert (dates.dt.year == year).all() and (dates.dt.quarter == quarter).all()
        parts.append(df)
    shop = pd.concat(parts, ignore_index=True)
    assert len(shop) == 4000 and shop["order_id"].is_unique
    mean = shop["amount"].astype(float).mean()
    assert abs(_truth(log_world, "mean_amount") - mean) < 0.01
    assert abs(_solution(log_world, "mean_amount") - mean) < 1e-9
    assert _all_passed(log_world)


def test_text_with_spaces_and_quotes_survives_a_log(tmp_path: Path) -> None:
    from worldsmith.evolution.worlds.kernels import read_log
    from worldsmith.evolution.worlds.writers import write_log

    df = pd.DataFrame({"date": ["2024-01-02", "2024-01-03"], "note": ['said "hi" = ok', None], "n": [1.5, 2.0]})
    write_log(df, tmp_path / "x.txt", "desk")
    lines = (tmp_path / "x.txt").read_text().splitlines()
    assert lines == ['[date 2024-01-02] desk: note="said \\"hi\\" = ok" n=1.5', "[date 2024-01-03] desk: n=2.0"]
    back = read_log(tmp_path / "x.txt")
    assert back["note"].tolist()[0] == 'said "hi" = ok' and pd.isna(back["note"].tolist()[1])
    assert back["n"].tolist() == ["1.5", "2.0"]


def _read_parts(world: Path, fmt: str) -> dict[str, pd.DataFrame]:
    """Every quarter part of the shop system, read with plain pandas / sqlite3: {part name: table}."""
    import sqlite3

    data = world / "data"
    if fmt == "xlsx":
        return pd.read_excel(data / "shop.xlsx", sheet_name=None)
    if fmt == "sqlite":
        with sqlite3.connect(data / "shop.sqlite") as con:
            names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            return {n: pd.read_sql_query(f'SELECT * FROM "{n}"', con) for n in names}
    return {p.name.split(".")[0]: pd.read_csv(p) for p in sorted(data.glob("shop_*.csv.gz"))}


@pytest.mark.parametrize("fmt", ["xlsx", "sqlite", "csv.gz"])
def test_quarter_partitions_in_every_container_format(tmp_path: Path, fmt: str) -> None:
    d = mini_contract()
    d["entities"][1]["count"] = 800
    d["systems"][1].update(format=fmt, partition="quarter")
    d["systems"][1]["defects"] = [{"type": "rename", "column": "amount", "new_name": "amt", "from_partition": 1}]
    build_world(contract(d), seed=3, out_dir=tmp_path / "w")
    parts = _read_parts(tmp_path / "w", fmt)
    assert sorted(parts) == [f"shop_{y}Q{q}" for y in (2023, 2024) for q in (1, 2, 3, 4)]
    for name, df in parts.items():  # 2023 parts say `amount`, 2024 parts `amt` (the documented rename)
        assert ("amt" in df.columns) == name.startswith("shop_2024") and len(df) > 0
    amounts = pd.concat([df.get("amount", df.get("amt")) for df in parts.values()])
    assert len(amounts) == 800
    assert abs(_truth(tmp_path / "w", "mean_amount") - amounts.astype(float).mean()) < 0.01
    assert _all_passed(tmp_path / "w")
