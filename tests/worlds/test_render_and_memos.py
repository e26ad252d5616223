"""DAG picture, ledger table, memo round trip, deterministic xlsx."""

from __future__ import annotations

import datetime as dt
import zipfile

import pandas as pd
from rich.console import Console

from worldsmith.evolution.worlds import describe_edge, ledger_table, load_template, render_dag_png
from worldsmith.evolution.worlds.memos import (DateFormatNote, DelayNote, EventNote, RecodeNote, UnitNote,
                                               events_memo, parse_memo)
from worldsmith.evolution.worlds.render import dag
from worldsmith.evolution.worlds.writers import write_xlsx


def test_dag_png(tmp_path):
    c = load_template("transportation")
    p = render_dag_png(c, tmp_path / "dag.png")
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000
    g = dag(c)
    assert g.has_edge("@event:bridge_closure", "duration_min") and g.edges["fare_usd", "tip_usd"]["mechanism"] == \
        "saturating"


def test_ledger_table(commercial_world):
    t = ledger_table(commercial_world)
    assert t.row_count >= 10
    text = Console(width=200, record=True)
    text.print(t)
    out = text.export_text()
    assert "unit_drift" in out and "unlabeled_fk" in out and "c1" in out


def test_memo_sentences_round_trip():
    c = load_template("risk_fraud")
    notes = parse_memo(events_memo(c))
    assert notes == [EventNote("chip_mandate", dt.date(2024, 1, 1))]
    text = "\n".join([
        "- Dates are written like `31/01/2024` (format `%d/%m/%Y`).",
        "- Dates are posting dates: a record is posted 3 day(s) after the event, plus up to 4 more day(s).",
        "- From 2024-06-01, `amount` is recorded in EUR instead of USD (1 USD = 0.92 EUR).",
        '- From 2024-01-01, `merchant_category` uses new labels: "ELEC" means "electronics", "A B" means "a b".'])
    got = parse_memo(text)
    assert got[0] == DateFormatNote("%d/%m/%Y") and got[1] == DelayNote(3)
    assert got[2] == UnitNote("amount", dt.date(2024, 6, 1), 0.92, "USD", "EUR")
    assert got[3] == RecodeNote("merchant_category", dt.date(2024, 1, 1), {"ELEC": "electronics", "A B": "a b"})


def test_describe_edge_in_words():
    c = load_template("energy_iot")
    words = {e.id: describe_edge(c, e) for e in c.edges}
    assert words["outdoor_temp->consumption_kwh"] == "`consumption_kwh` jumps by +80 when `outdoor_temp` is below 5"
    assert "exp(-0.35)" in words["has_solar->consumption_kwh"]


def test_xlsx_is_deterministic_and_readable(tmp_path):
    df = pd.DataFrame({"id": ["A-1", "B & <2>"], "x": [1.5, None], "n": [3, 4]})
    write_xlsx([("one", df), ("two", df.head(1))], tmp_path / "a.xlsx")
    write_xlsx([("one", df), ("two", df.head(1))], tmp_path / "b.xlsx")
    assert (tmp_path / "a.xlsx").read_bytes() == (tmp_path / "b.xlsx").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.xlsx") as z:
        assert {i.date_time for i in z.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    back = pd.read_excel(tmp_path / "a.xlsx", sheet_name=None)
    assert list(back) == ["one", "two"] and back["one"]["id"].tolist() == ["A-1", "B & <2>"]
    assert back["one"]["x"].isna().tolist() == [False, True] and back["two"].shape == (1, 3)
