"""The compact profile the analyst reads, and the load calls it prints: content checked by hand on small files."""

from __future__ import annotations

import re

import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from worldsmith.core.inputs import input_aliases, input_mounts, is_safe_name
from worldsmith.tools.files import profile_workspace
from worldsmith.tools.files.loadcall import load_call, py_str

WEATHER = "id,city,temp,rain\n1,Oslo,3.14159,\n2,Rome,18.5,2\n3,Oslo,-1.25,0\n4,Lima,22.0,\n5,Oslo,7.0,1\n6,Rome,12345.678,3\n"


def test_compact_profile_of_a_small_csv(tmp_path: Path) -> None:
    path = tmp_path / "weather 2024.csv"
    path.write_text(WEATHER)
    text = profile_workspace([path], as_mounted=True).to_prompt(max_chars=2500, compact=True)
    # by hand: 6 rows; rain has 2 empty cells; temp spans -1.25 .. 12345.678 (12346 at 4 significant digits);
    # the first rows' 3.14159 shows as 3.142; the awkward name (a space) gets the alias of input 1
    assert text == "\n".join([
        "## weather 2024.csv — 6 rows × 4 columns",
        'load: pd.read_csv("weather 2024.csv")',
        '  or: pd.read_csv("file_1.csv")  (the same file under a plain name)',
        "columns (dtype; nulls; range or values):",
        "- id: int64; 1..6",
        "- city: str; values Oslo, Rome, Lima",
        "- temp: float64; -1.25..12346",
        "- rain: float64; 2 nulls; 0..3",
        "first 3 rows:",
        "id | city | temp | rain",
        "1 | Oslo | 3.142 | NA",
        "2 | Rome | 18.5 | 2.0",
        "3 | Oslo | -1.25 | 0.0",
    ])


def test_compact_profile_is_shorter_and_keeps_the_schema_within_budget(tmp_path: Path) -> None:
    wide = pd.DataFrame({f"col_{i}": [i * 1.123456, i * 2.5, None] for i in range(40)})
    wide.to_csv(tmp_path / "wide.csv", index=False)
    ws = profile_workspace([tmp_path / "wide.csv"], as_mounted=True)
    compact, full = ws.to_prompt(max_chars=6000, compact=True), ws.to_prompt(max_chars=6000)
    assert len(compact) < len(full) / 2
    assert all(f"- col_{i}: float64; 1 nulls" in compact for i in range(40))  # every column, with its nulls
    assert "first 3 rows (first 12 of 40 columns):" in compact
    tight = ws.to_prompt(max_chars=1200, compact=True)
    assert len(tight) <= 1200 and 'load: pd.read_csv("wide.csv")' in tight


@pytest.mark.parametrize("text", ["a=b+c d.csv", "it's.csv", 'say "hi".csv', "both ' and \".csv", "back\\slash.csv",
                                  "données été.csv", "tab\there.csv"])
def test_py_str_is_a_python_literal_of_the_name(text: str) -> None:
    literal = py_str(text)
    assert eval(literal) == text  # the point: Python reads it back
    if '"' not in text:
        assert literal.startswith('"')


def test_load_calls_per_format() -> None:
    assert load_call("a=b+c d.csv", "csv") == 'pd.read_csv("a=b+c d.csv")'
    assert load_call("x.tsv", "tsv") == 'pd.read_csv("x.tsv", sep="\\t")'
    assert load_call("x.jsonl", "jsonl") == 'pd.read_json("x.jsonl", lines=True)'
    assert load_call("x.json", "json") == 'pd.read_json("x.json")'
    assert load_call("x.json", "json", "orders") == 'pd.json_normalize(json.load(open("x.json"))["orders"])'
    assert load_call("x.parquet", "parquet") == 'pd.read_parquet("x.parquet")'
    assert load_call("book.xlsx", "xlsx", "Q1 sales") == 'pd.read_excel("book.xlsx", sheet_name="Q1 sales")'
    assert load_call("it's.db", "sqlite", 'odd "t"') == \
        'pd.read_sql(\'SELECT * FROM "odd ""t"""\', sqlite3.connect("it\'s.db"))'


def test_profiled_load_calls_read_the_file_as_profiled(tmp_path: Path) -> None:
    (tmp_path / "semi colon.csv").write_text("a;b\n1;2,5\n3;4,25\n", encoding="latin-1")
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as con:
        con.execute('CREATE TABLE "order items" (id INTEGER, qty INTEGER)')
        con.execute('INSERT INTO "order items" VALUES (1, 2), (2, 5)')
    (tmp_path / "doc.json").write_text(json.dumps({"orders": [{"id": 1}, {"id": 2}], "users": [{"n": "x"}]}))
    ws = profile_workspace(sorted(tmp_path.iterdir()), as_mounted=True)
    loads = {t.label: t.load for t in ws.tables}
    assert loads == {
        "doc.json[orders]": 'pd.json_normalize(json.load(open("doc.json"))["orders"])',
        "doc.json[users]": 'pd.json_normalize(json.load(open("doc.json"))["users"])',
        "semi colon.csv": 'pd.read_csv("semi colon.csv", sep=";", decimal=",")',
        "shop.db[order items]": 'pd.read_sql(\'SELECT * FROM "order items"\', sqlite3.connect("shop.db"))',
    }
    # run each call from the files' folder, as the sandbox does, and compare with what was written
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        frames = {label: eval(call, {"pd": pd, "json": json, "sqlite3": sqlite3}) for label, call in loads.items()}
    finally:
        os.chdir(cwd)
    assert frames["semi colon.csv"]["b"].tolist() == [2.5, 4.25]
    assert frames["shop.db[order items]"]["qty"].tolist() == [2, 5]
    assert frames["doc.json[orders]"]["id"].tolist() == [1, 2]


def test_aliases_only_for_awkward_names_and_never_clash() -> None:
    assert is_safe_name("sales_2024-v2.csv") and not is_safe_name("a b.csv") and not is_safe_name("été.csv")
    names = ["plain.csv", "a=b+c d.csv", "file_3.csv", "it's.CSV.GZ", "no extension here"]
    # by hand: positions 2, 4, 5 are awkward; position 4's suffix is kept (lower-cased); file_3.csv exists already
    # but belongs to position 3 itself, which needs no alias
    assert input_aliases(names) == {"a=b+c d.csv": "file_2.csv", "it's.CSV.GZ": "file_4.csv.gz",
                                    "no extension here": "file_5"}
    assert input_aliases(["x y.csv", "file_1.csv"]) == {"x y.csv": "file_1_2.csv"}  # the real file_1.csv wins
    mounts = input_mounts([Path("/d/x y.csv"), Path("/d/ok.csv")])
    assert mounts == [("x y.csv", Path("/d/x y.csv")), ("ok.csv", Path("/d/ok.csv")), ("file_1.csv", Path("/d/x y.csv"))]


def test_compact_profile_lists_joins_that_share_values_only(tmp_path: Path) -> None:
    (tmp_path / "orders.csv").write_text("customer_id,total\n1,10\n2,20\n2,5\n")
    (tmp_path / "customers.csv").write_text("customer_id,total\n1,100\n2,200\n")
    ws = profile_workspace([tmp_path / "orders.csv", tmp_path / "customers.csv"], as_mounted=True)
    full, compact = ws.to_prompt(max_chars=4000), ws.to_prompt(max_chars=4000, compact=True)
    # by hand: customer_id shares 1 and 2; total shares no value (10, 20, 5 against 100, 200)
    assert "orders.csv.total ↔ customers.csv.total" in full
    assert "orders.csv.total ↔ customers.csv.total" not in compact
    assert "orders.csv.customer_id ↔ customers.csv.customer_id" in compact


def _respelled_room(root: Path) -> None:
    # one patient register spelled three ways, as three systems export it (visits twice a patient)
    (root / "visits.csv").write_text("patient_id,bp\n" + "".join(f"P-{i:05d},{120 + i}\nP-{i:05d},{130 + i}\n"
                                                                   for i in range(1, 7)))
    (root / "enrolment.csv").write_text("patient_id,treated\n" + "".join(f"PAT_{i},{i % 2}\n" for i in range(1, 7)))
    (root / "safety.csv").write_text("patient_id,ae\n" + "".join(f"p{i},0\n" for i in range(1, 9)))


def test_ids_spelled_differently_are_one_join_with_a_merge_that_works(tmp_path: Path) -> None:
    _respelled_room(tmp_path)
    files = [tmp_path / n for n in ("visits.csv", "enrolment.csv", "safety.csv")]
    text = profile_workspace(files, as_mounted=True).to_prompt(max_chars=6000, compact=True)
    line = next(x for x in text.splitlines() if "different spellings" in x)
    for shown in ("visits.csv.patient_id ('P-00001')", "enrolment.csv.patient_id ('PAT_1')",
                  "safety.csv.patient_id ('p1')"):
        assert shown in line
    assert "100% match" in line  # by hand: visits' and enrolment's 1..6 all lie in safety's 1..8
    # the merge the line gives, run as printed: every visit finds its enrolment row (12 visits, by hand)
    expr = line[line.rindex("`", 0, line.rindex("`")) + 1:line.rindex("`")]
    frames = {n: pd.read_csv(tmp_path / n) for n in ("visits.csv", "enrolment.csv")}
    for df in frames.values():
        df["key"] = eval(expr, {"pd": pd, "df": df})  # noqa: S307 - the profile's own text, on test data
    merged = frames["visits.csv"].merge(frames["enrolment.csv"], on="key")
    assert len(merged) == 12 and merged["treated"].tolist()[:4] == [1, 1, 0, 0]
    # merged as written, nothing matches: the line is needed
    assert pd.read_csv(files[0]).merge(pd.read_csv(files[1]), on="patient_id").empty


def test_ids_of_different_entities_are_not_called_respellings(tmp_path: Path) -> None:
    # customers C-1..C-20 and orders O-1..O-40 share numbers, and both columns are named "id": not the same ids
    (tmp_path / "customers.csv").write_text("id,region\n" + "".join(f"C-{i},r{i % 3}\n" for i in range(1, 21)))
    (tmp_path / "orders.csv").write_text("id,total\n" + "".join(f"O-{i},{i * 2}\n" for i in range(1, 41)))
    # a column spelled as written on both sides is a plain join
    (tmp_path / "returns.csv").write_text("id,reason\n" + "".join(f"O-{i},late\n" for i in range(1, 11)))
    ws = profile_workspace(sorted(tmp_path.iterdir()), as_mounted=True)
    assert not [j for j in ws.joins if j.spellings is not None]
    assert "different spellings" not in ws.to_prompt(max_chars=6000, compact=True)
    plain = {(j.left.label, j.right.label): j.overlap_ratio for j in ws.joins}
    assert plain[("orders.csv.id", "returns.csv.id")] == 1.0


def test_respelled_ids_under_different_column_names_get_each_tables_own_column(tmp_path: Path) -> None:
    # the same patients, P-00001.. in visits.patient_id and PAT_1.. in enrolment.subject
    (tmp_path / "visits.csv").write_text("patient_id,bp\n" + "".join(f"P-{i:05d},{120 + i}\n" for i in range(1, 7)))
    (tmp_path / "enrolment.csv").write_text("subject,treated\n" + "".join(f"PAT_{i},{i % 2}\n" for i in range(1, 7)))
    text = profile_workspace(sorted(tmp_path.iterdir()), as_mounted=True).to_prompt(max_chars=6000, compact=True)
    line = next(x for x in text.splitlines() if "different spellings" in x)
    assert "visits.csv.patient_id ('P-00001')" in line and "enrolment.csv.subject ('PAT_1')" in line
    # each table gets its own call, on its own column (one call naming one column for both failed on a KeyError)
    calls = dict((table.strip().rstrip("."), expr) for expr, table in re.findall(r"`(pd\.to_numeric\(.+?\))` in ([\w.\[\]]+)",
                                                                       line))
    assert set(calls) == {"visits.csv", "enrolment.csv"}
    assert 'df["patient_id"]' in calls["visits.csv"] and 'df["subject"]' in calls["enrolment.csv"]
    v, e = pd.read_csv(tmp_path / "visits.csv"), pd.read_csv(tmp_path / "enrolment.csv")
    v["key"] = eval(calls["visits.csv"], {"pd": pd, "df": v})  # noqa: S307 - the profile's own text
    e["key"] = eval(calls["enrolment.csv"], {"pd": pd, "df": e})  # noqa: S307
    assert len(v.merge(e, on="key")) == 6  # by hand: 1..6 on both sides
