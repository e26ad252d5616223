"""Hostile and malformed files: every reader, the profiler and the SQL tool end with a clear error, fast and small.

The corpus (a 10 GiB gzip bomb, a 24 MiB single-line CSV, 80k repeated header names, 100k-deep JSON, a 24 MiB
JSONL line, an xlsx with a 300 MiB shared-strings table, xlsx zip bombs, damaged SQLite files, a never-ending
view) is generated into tmp by a fixture; see `hostile_corpus.py`. Each read must stop within 10 s with a
`FileReadError` naming the reason, the file and the `FileLimits` setting to raise; the whole corpus, read in a
fresh process, must peak under 1 GiB.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.files.hostile_corpus import CASES, Case, build_corpus, gzip_bomb, one_line_csv
from worldsmith.tools.files import FileLimits, FileReadError, profile_workspace, read_table
from worldsmith.tools.files.readers import count_rows, list_tables
from worldsmith.tools.sql import SqlError, SqlTimeout, describe_sqlite, run_sql

BUDGET_S = 10.0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_corpus(tmp_path_factory.mktemp("hostile"))


def _cases(sql_only: bool = False) -> list:  # type: ignore[type-arg]
    chosen = [c for c in CASES if c.sql or not sql_only]
    return [pytest.param(c, id=c.file, marks=[pytest.mark.slow] if c.slow else []) for c in chosen]


def _assert_clear(message: str, case: Case) -> None:
    assert case.file in message, message
    assert f": {case.reason}" in message, message
    if case.setting is not None:
        assert f"FileLimits({case.setting}=" in message, message  # the hint names the limit and how to raise it
    else:
        assert "hint:" in message, message


def _timed(fn):  # type: ignore[no-untyped-def]
    start = time.monotonic()
    try:
        return fn(), time.monotonic() - start
    except Exception as exc:  # the test inspects whatever ended the call
        return exc, time.monotonic() - start


@pytest.mark.parametrize("case", _cases())
def test_reader_ends_with_a_clear_error(corpus: dict[str, Path], case: Case) -> None:
    outcome, elapsed = _timed(lambda: read_table(corpus[case.file]))
    assert elapsed < BUDGET_S, f"{case.file}: read took {elapsed:.1f} s"
    assert isinstance(outcome, FileReadError), f"{case.file}: expected FileReadError, got {outcome!r}"
    assert outcome.reason == case.reason
    _assert_clear(str(outcome), case)


@pytest.mark.parametrize("case", _cases())
def test_profiler_records_a_clear_failure(corpus: dict[str, Path], case: Case) -> None:
    outcome, elapsed = _timed(lambda: profile_workspace([corpus[case.file]]))
    assert elapsed < BUDGET_S, f"{case.file}: profiling took {elapsed:.1f} s"
    assert not isinstance(outcome, BaseException), f"{case.file}: the profiler raised {outcome!r}"
    assert outcome.tables == []
    assert [f.reason for f in outcome.failures] == [case.reason]
    _assert_clear(outcome.failures[0].message, case)


@pytest.mark.parametrize("case", _cases(sql_only=True))
def test_sql_tool_ends_with_its_own_clear_error(corpus: dict[str, Path], case: Case) -> None:
    query = "SELECT * FROM t" if case.file.endswith(".sqlite") else "SELECT 1"
    outcome, elapsed = _timed(lambda: run_sql(query, [corpus[case.file]], timeout_s=5))
    assert elapsed < BUDGET_S, f"{case.file}: SQL took {elapsed:.1f} s"
    assert isinstance(outcome, SqlError), f"{case.file}: expected SqlError, got {outcome!r}"
    _assert_clear(str(outcome), case)


@pytest.mark.parametrize("name", ["gzip_bomb.csv.gz", "one_line.csv", "long_second_line.csv", "huge_line.jsonl"])
def test_row_count_stops_at_the_same_budgets(corpus: dict[str, Path], name: str) -> None:
    ref = list_tables(corpus[name])[0]
    outcome, elapsed = _timed(lambda: count_rows(ref))
    assert elapsed < BUDGET_S
    assert isinstance(outcome, FileReadError) and outcome.reason == "too_large", outcome


def test_recursive_view_is_stopped_by_the_sql_time_limit(corpus: dict[str, Path]) -> None:
    path = corpus["recursive_view.sqlite"]
    assert read_table(path)["id"].tolist() == list(range(20))  # the reader lists tables only; views may not end
    start = time.monotonic()
    with pytest.raises(SqlTimeout, match="time limit"):
        run_sql("SELECT count(*) FROM forever", [path], timeout_s=1)
    assert time.monotonic() - start < 5


def test_sqlite_read_has_a_time_budget(tmp_path: Path) -> None:
    """The SQLite reader's progress handler turns a read past max_read_seconds into a timeout error."""
    path = tmp_path / "rows.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (a INTEGER, b TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, str(i)) for i in range(50_000)])
    conn.commit()
    conn.close()
    assert len(read_table(path)) == 50_000
    with pytest.raises(FileReadError) as err:
        read_table(path, limits=FileLimits(max_read_seconds=0))
    assert err.value.reason == "timeout" and "FileLimits(max_read_seconds=" in str(err.value)
    assert "rows.sqlite" in str(err.value)


def test_describe_sqlite_names_the_damaged_file(corpus: dict[str, Path]) -> None:
    for name in ("garbled_header.sqlite", "truncated.sqlite"):
        with pytest.raises(SqlError, match=r"corrupt: sqlite: .*\.recover") as err:
            describe_sqlite(corpus[name])
        assert name in str(err.value)


def test_json_depth_ignores_brackets_inside_strings(tmp_path: Path) -> None:
    """Brackets in strings (with escaped quotes and backslashes around them) are not nesting."""
    path = tmp_path / "strings.json"
    text = '[{"a": "' + "[" * 1000 + '", "b": "\\\\", "c": "\\"{{{{' + "{" * 1000 + '"}]'
    path.write_text(text)
    assert json.loads(text)[0]["a"] == "[" * 1000  # the file is valid JSON, two levels deep
    df = read_table(path, limits=FileLimits(max_json_depth=3))
    assert df.shape == (1, 3) and df["a"].iloc[0] == "[" * 1000
    with pytest.raises(FileReadError, match=r"max_json_depth=1\b"):
        read_table(path, limits=FileLimits(max_json_depth=1))


def test_decimal_comma_is_read_as_numbers_and_noted(corpus: dict[str, Path]) -> None:
    df = read_table(corpus["decimal_comma.csv"])
    assert df["price"].tolist() == [1234.5, 2.25, -0.5]  # 1.234,5 / 2,25 / -0,5 in the file
    assert df["qty"].tolist() == [3, 4, 5]
    ws = profile_workspace([corpus["decimal_comma.csv"]])
    price = next(c for c in ws.tables[0].columns if c.name == "price")
    assert any("decimal comma detected" in n for n in price.notes)
    assert price.semantic_type == "numeric" and price.max == 1234.5


def test_decimal_comma_leaves_dotted_dates_as_text(corpus: dict[str, Path]) -> None:
    df = read_table(corpus["decimal_comma_dates.csv"])
    assert df["price"].tolist() == [3.5, 2.25]
    assert df["when"].tolist() == ["01.02.2020", "02.02.2020"]


def test_comma_delimited_file_keeps_decimal_points(tmp_path: Path) -> None:
    path = tmp_path / "plain.csv"
    path.write_text('a,b\n"1,5",2.5\n"3,5",4.5\n')
    df = read_table(path)
    assert df["b"].tolist() == [2.5, 4.5] and df["a"].tolist() == ["1,5", "3,5"]


def test_semicolon_file_with_decimal_points_is_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "points.csv"
    path.write_text("a;b\n1.5;x\n2.25;y\n")
    df = read_table(path)
    assert df["a"].tolist() == [1.5, 2.25]
    assert "worldsmith_decimal" not in df.attrs


def test_lower_limits_are_honoured_and_named(tmp_path: Path) -> None:
    """Every budget is a setting: a small bomb and a short long line fail under tightened limits."""
    bomb = gzip_bomb(tmp_path / "small_bomb.csv.gz", b"a,b\n", b"1,2\n", total=64 * 2**20)
    with pytest.raises(FileReadError, match=r"max_decompressed_bytes=1,048,576"):
        read_table(bomb, limits=FileLimits(max_decompressed_bytes=2**20))
    line = one_line_csv(tmp_path / "line.csv", size=2 * 2**20)
    with pytest.raises(FileReadError, match=r"max_line_bytes=65,536"):
        read_table(line, limits=FileLimits(max_line_bytes=65_536))
    rows = tmp_path / "rows.csv"
    rows.write_text("a,b\n" + "1,2\n" * 10 + "3," + "x" * 200_000 + "\n" + "5,6\n" * 10)
    with pytest.raises(FileReadError, match=r"max_line_bytes=100,000") as err:
        read_table(rows, limits=FileLimits(max_line_bytes=100_000))
    assert err.value.where == "line 12"
    with pytest.raises(FileReadError, match=r"FileLimits\(max_read_seconds=") as err:
        read_table(rows, limits=FileLimits(max_read_seconds=0))
    assert err.value.reason == "timeout"


def test_genuine_gzip_over_the_full_read_cap_is_sampled(tmp_path: Path) -> None:
    """A compressed file past max_full_read_bytes (but no bomb) is read as a sample, and says so."""
    path = tmp_path / "big.csv.gz"
    frame = pd.DataFrame({"a": range(50_000), "b": [f"row {i}" for i in range(50_000)]})
    frame.to_csv(path, index=False, compression="gzip")
    df = read_table(path, limits=FileLimits(max_full_read_bytes=100_000, sample_read_rows=1000))
    assert df["a"].tolist() == list(range(1000))
    assert "max_full_read_bytes=100,000" in df.attrs["worldsmith_sampling"]


_PROBE = r"""
import json, resource, sys, time
from pathlib import Path
from worldsmith.tools.files import profile_workspace, read_table, FileReadError
from worldsmith.tools.sql import run_sql, SqlError
out = {}
for name in json.loads(sys.argv[2]):
    path = Path(sys.argv[1]) / name
    start = time.monotonic()
    for call in (lambda: read_table(path), lambda: profile_workspace([path]), lambda: run_sql("SELECT 1", [path])):
        try:
            call()
        except (FileReadError, SqlError):
            pass
    out[name] = time.monotonic() - start
# VmHWM is this process image's own peak: ru_maxrss survives exec, so a child spawned by a big pytest process (vfork)
# would report the parent's peak instead
hwm = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")]
out["peak_rss_bytes"] = int(hwm[0]) * 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(out))
"""


@pytest.mark.slow
def test_whole_corpus_stays_under_one_gib(corpus: dict[str, Path]) -> None:
    """Reader, profiler and SQL tool over every hostile file in one fresh process: peak RSS under 1 GiB."""
    names = [c.file for c in CASES]
    folder = corpus[names[0]].parent
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(folder), json.dumps(names)],
        capture_output=True, text=True, timeout=300, cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result.pop("peak_rss_bytes") < 2**30
    slow = {name: round(s, 1) for name, s in result.items() if s > 3 * BUDGET_S}
    assert not slow, slow
