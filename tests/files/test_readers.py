"""read_table / list_tables: every format round-trips; bad input gives a precise FileReadError."""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import pandas as pd
import pytest
from openpyxl import Workbook

from worldsmith.tools.files import FileLimits, FileReadError, list_tables, read_table
from worldsmith.tools.files.readers import SAMPLE_ATTR

# --- round trips ----------------------------------------------------------------------------------------------


def _same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True), check_dtype=False)


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".csv.gz", ".tsv.gz"])
def test_delimited_round_trip(tmp_path: Path, people: pd.DataFrame, suffix: str) -> None:
    path = tmp_path / f"people{suffix}"
    people.to_csv(path, index=False, sep="\t" if ".tsv" in suffix else ",", compression="infer")
    _same(read_table(path), people)
    assert [r.kind for r in list_tables(path)] == ["file"]


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".ndjson"])
def test_jsonl_round_trip(tmp_path: Path, people: pd.DataFrame, suffix: str) -> None:
    path = tmp_path / f"people{suffix}"
    people.to_json(path, orient="records", lines=True, compression="infer")
    _same(read_table(path), people)


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_json_records_round_trip(tmp_path: Path, people: pd.DataFrame, suffix: str) -> None:
    path = tmp_path / f"people{suffix}"
    people.to_json(path, orient="records", compression="infer")
    _same(read_table(path), people)


def test_json_dict_of_lists_and_pandas_columns_orient(tmp_path: Path, people: pd.DataFrame) -> None:
    cols = tmp_path / "cols.json"
    cols.write_text(json.dumps({c: people[c].tolist() for c in people.columns}).replace("NaN", "null"))
    _same(read_table(cols), people)
    orient = tmp_path / "orient.json"
    people.to_json(orient)  # pandas default orient="columns": {col: {row: value}}
    _same(read_table(orient), people)


def test_json_nested_records_are_flattened(tmp_path: Path) -> None:
    path = tmp_path / "nested.json"
    recs = [{"id": 1, "geo": {"lat": 1.5, "lon": 2.0}}, {"id": 2, "geo": {"lat": 3.0, "lon": 4.5}}]
    path.write_text(json.dumps({"meta": {"source": "x"}, "items": recs}))
    df = read_table(path)
    assert list(df.columns) == ["id", "geo.lat", "geo.lon"]
    assert df["geo.lon"].tolist() == [2.0, 4.5]


def test_json_with_two_record_lists_is_two_tables(tmp_path: Path) -> None:
    path = tmp_path / "two.json"
    path.write_text(json.dumps({"users": [{"u": 1}, {"u": 2}], "orders": [{"o": 7, "u": 1}]}))
    refs = list_tables(path)
    assert [(r.table, r.kind) for r in refs] == [("users", "json_key"), ("orders", "json_key")]
    assert read_table(path, table="orders")["o"].tolist() == [7]
    with pytest.raises(FileReadError) as err:
        read_table(path)
    assert err.value.reason == "ambiguous" and "users" in err.value.hint


def test_parquet_round_trip(tmp_path: Path, people: pd.DataFrame) -> None:
    path = tmp_path / "people.parquet"
    people.to_parquet(path, index=False)
    _same(read_table(path), people)
    _same(read_table(path, nrows=2), people.head(2))


def test_sqlite_tables(shop_db: Path) -> None:
    refs = list_tables(shop_db)
    assert [r.table for r in refs] == ["customers", "orders", "products"]
    assert all(r.kind == "sqlite_table" for r in refs)
    orders = read_table(shop_db, table="orders")
    assert orders.shape == (10, 4) and orders["qty"].sum() == 55
    with pytest.raises(FileReadError) as err:
        read_table(shop_db, table="nope")
    assert err.value.reason == "no_such_table" and "customers" in err.value.hint


def _workbook(path: Path, people: pd.DataFrame) -> Path:
    wb = Workbook()
    ws = wb.active
    ws.title = "people"
    ws.append(list(people.columns))
    for row in people.itertuples(index=False):
        ws.append([None if pd.isna(v) else v for v in row])
    wb.create_sheet("empty")
    extra = wb.create_sheet("totals")
    extra.append(["city", "n"])
    extra.append(["Oslo", 3])
    wb.save(path)
    return path


def test_xlsx_three_sheets_including_an_empty_one(tmp_path: Path, people: pd.DataFrame) -> None:
    path = _workbook(tmp_path / "book.xlsx", people)
    assert [r.table for r in list_tables(path)] == ["people", "empty", "totals"]
    _same(read_table(path, sheet="people"), people)
    assert read_table(path, sheet="totals").to_dict("records") == [{"city": "Oslo", "n": 3}]
    with pytest.raises(FileReadError) as err:
        read_table(path, sheet="empty")
    assert err.value.reason == "empty_sheet" and err.value.where == "sheet 'empty'"
    with pytest.raises(FileReadError) as err:
        read_table(path)
    assert err.value.reason == "ambiguous"


# --- encodings and delimiters ---------------------------------------------------------------------------------

CITIES = pd.DataFrame(
    {
        "ville": ["Zürich", "Genève", "São Paulo", "Málaga", "Köln", "Besançon", "Nîmes", "Ålesund"] * 5,
        "note": ["très élevé", "déjà vu", "naïve façade", "crème brûlée", "größer", "señor", "garçon", "fjæra"]
        * 5,
        "n": list(range(40)),
    }
)


@pytest.mark.parametrize("encoding", ["latin-1", "utf-16", "utf-16-le", "cp1252", "utf-8-sig"])
def test_encodings_are_detected(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "cities.csv"
    path.write_bytes(CITIES.to_csv(index=False).encode(encoding))
    _same(read_table(path), CITIES)


def test_explicit_wrong_encoding_is_an_encoding_error(tmp_path: Path) -> None:
    path = tmp_path / "cities.csv"
    path.write_bytes(CITIES.to_csv(index=False).encode("latin-1"))
    with pytest.raises(FileReadError) as err:
        read_table(path, encoding="utf-8")
    assert err.value.reason == "encoding" and "utf-8" in str(err.value)


@pytest.mark.parametrize("sep", [";", "|", "\t"])
def test_delimiter_is_sniffed(tmp_path: Path, people: pd.DataFrame, sep: str) -> None:
    path = tmp_path / "people.csv"
    frame = people.assign(name=people["name"].str.replace(" ", ", "))  # commas inside quoted fields
    frame.to_csv(path, index=False, sep=sep)
    _same(read_table(path), frame)


def test_single_column_csv(tmp_path: Path) -> None:
    path = tmp_path / "one.csv"
    path.write_text("value\n1\n2\n3\n")
    assert read_table(path)["value"].tolist() == [1, 2, 3]


# --- bad input ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where", "detail"),
    [
        ("a,b,c\n1,2,3\n4,5,6\n7,8,9,10\n11,12,13\n", "line 4", "Expected 3 fields"),
        ('a,b\n1,2\n3,"unterminated\n4,5\n', "line 3", "EOF inside string"),
    ],
)
def test_corrupt_csv_names_the_line(tmp_path: Path, text: str, where: str, detail: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(FileReadError) as err:
        read_table(path)
    assert err.value.reason == "corrupt"
    assert err.value.where == where
    assert detail in err.value.detail


@pytest.mark.parametrize("content", [b"", b"  \n\n \n"])
def test_empty_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.csv"
    path.write_bytes(content)
    with pytest.raises(FileReadError) as err:
        read_table(path)
    assert err.value.reason == "empty"


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, "PNG"),
        (b"PK\x03\x04" + b"\x00" * 100, "zip"),
        (gzip.compress(b"a,b\n1,2\n"), "gzip"),
        (b"a,b\n1,2\n\x00\x01\x02\x00\x00\x07garbage\x00", "NUL byte"),
    ],
)
def test_binary_disguised_as_csv(tmp_path: Path, payload: bytes, expected: str) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes(payload)
    with pytest.raises(FileReadError) as err:
        read_table(path)
    assert err.value.reason == "binary"
    assert expected in str(err.value)


def test_invalid_json_gives_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('[\n  {"a": 1},\n  {"a": 2,,}\n]\n')
    with pytest.raises(FileReadError) as err:
        read_table(path)
    assert err.value.reason == "invalid_json"
    assert err.value.where is not None and err.value.where.startswith("line 3, column")


def test_json_lines_in_a_json_file_gets_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "lines.json"
    path.write_text('{"a": 1}\n{"a": 2}\n')
    with pytest.raises(FileReadError) as err:
        read_table(path)
    assert err.value.reason == "invalid_json" and ".jsonl" in err.value.hint


def test_invalid_jsonl_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n{"a": \n')
    with pytest.raises(FileReadError) as err:
        read_table(path)
    assert err.value.reason == "invalid_json" and err.value.where == "line 4, column 7"


@pytest.mark.parametrize(("name", "hint"), [("data.xyz", ".parquet"), ("old.xls", "xlsx"), ("noext", ".csv")])
def test_unsupported_extension_lists_supported(tmp_path: Path, name: str, hint: str) -> None:
    path = tmp_path / name
    path.write_text("a,b\n1,2\n")
    with pytest.raises(FileReadError) as err:
        read_table(path)
    assert err.value.reason == "unsupported" and hint in err.value.hint


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileReadError) as err:
        read_table(tmp_path / "nope.csv")
    assert err.value.reason == "not_found"


@pytest.mark.parametrize(
    ("name", "payload"),
    [
        ("fake.parquet", b"a,b\n1,2\n"),
        ("fake.xlsx", b"a,b\n1,2\n"),
        ("fake.sqlite", b"a,b\n1,2\n"),
        ("plain.csv.gz", b"a,b\n1,2\n"),
        ("broken.xlsx", b"PK\x03\x04" + b"\x00" * 64),
    ],
)
def test_wrong_container_is_corrupt(tmp_path: Path, name: str, payload: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(payload)
    with pytest.raises(FileReadError) as err:
        list_tables(path) if name.endswith((".xlsx", ".sqlite")) else read_table(path)
    assert err.value.reason == "corrupt"


def test_truncated_gzip_is_corrupt(tmp_path: Path, people: pd.DataFrame) -> None:
    path = tmp_path / "cut.csv.gz"
    whole = gzip.compress(people.to_csv(index=False).encode() * 50)
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(FileReadError) as err:
        read_table(path)
    assert err.value.reason == "corrupt"


def test_too_large_file_is_read_as_a_sample(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    pd.DataFrame({"x": range(5000), "y": ["v"] * 5000}).to_csv(path, index=False)
    limits = FileLimits(max_full_read_bytes=1000, sample_read_rows=100)
    df = read_table(path, limits=limits)
    assert len(df) == 100 and "first 100 rows" in df.attrs[SAMPLE_ATTR]
    assert SAMPLE_ATTR not in read_table(path).attrs
    js = tmp_path / "big.json"
    js.write_text(json.dumps([{"x": i} for i in range(500)]))
    with pytest.raises(FileReadError) as err:
        read_table(js, limits=FileLimits(max_json_bytes=100))
    assert err.value.reason == "too_large"


def test_error_message_and_pickling(tmp_path: Path) -> None:
    err = FileReadError(tmp_path / "x.csv", "corrupt", "fix row", detail="Expected 3 fields", where="line 4")
    text = str(err)
    assert "x.csv" in text and "line 4" in text and "corrupt" in text and "fix row" in text
    back = pickle.loads(pickle.dumps(err))
    assert (back.reason, back.where, back.detail, back.hint) == (err.reason, "line 4", "Expected 3 fields", "fix row")


def test_table_name_on_a_single_table_format_is_an_error(tmp_path: Path, people: pd.DataFrame) -> None:
    path = tmp_path / "people.csv"
    people.to_csv(path, index=False)
    with pytest.raises(FileReadError) as err:
        read_table(path, sheet="Sheet1")
    assert err.value.reason == "no_such_table"


def test_non_ascii_after_the_sniffed_head_is_redetected(tmp_path: Path) -> None:
    path = tmp_path / "late.csv"
    ascii_rows = "".join(f"{i},plain text row\n" for i in range(60_000))  # > encoding_sniff_bytes (1 MiB)
    path.write_bytes(("n,word\n" + ascii_rows + "60000,Genève\n60001,Besançon\n").encode("cp1252"))
    df = read_table(path)
    assert df["word"].iloc[-2:].tolist() == ["Genève", "Besançon"]


def test_mixed_encodings_are_an_encoding_error(tmp_path: Path) -> None:
    path = tmp_path / "mixed.csv"
    body = "n,word\n0,Zürich\n" + "".join(f"{i},plain text row\n" for i in range(1, 60_000))
    path.write_bytes(body.encode("utf-8") + "60000,Genève\n".encode("latin-1"))
    with pytest.raises(FileReadError) as err:
        read_table(path)
    assert err.value.reason == "encoding" and "mix" in err.value.detail
