"""Inputs with awkward names load in a real sandbox with the load call the analyst's file list prints, copied
verbatim, and under their plain aliases; the prelude's `profile()` helper prints the statistics the compact
profile leaves out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from worldsmith.agents.analyst import PRELUDE, files_profile
from worldsmith.tools.sandbox import open_sandbox
from tests.sandbox.conftest import fast_config, needs_bwrap

pytestmark = pytest.mark.timeout(180)

# name -> csv text; x sums to 6 in every file, y differs so a wrong file would show
ODD = {
    "a=b+c d.csv": "x,y\n1,10\n2,20\n3,30\n",
    "it's.csv": "x,y\n1,11\n2,21\n3,31\n",
    "données été.csv": "x,y\n1,12\n2,22\n3,32\n",
    'say "hi".csv': "x,y\n1,13\n2,23\n3,33\n",
}
Y_SUM = {"a=b+c d.csv": 60, "it's.csv": 63, "données été.csv": 66, 'say "hi".csv': 69}


@pytest.fixture
def odd_inputs(tmp_path: Path) -> list[Path]:
    d = tmp_path / "inputs"
    d.mkdir()
    d.chmod(0o755)
    paths = []
    for name, text in ODD.items():
        (d / name).write_text(text, encoding="utf-8")
        paths.append(d / name)
    return paths


def _load_lines(profile_text: str) -> list[tuple[str, str, str | None]]:
    """(file name, load call, alias load call) per table, exactly as printed in the file list."""
    blocks = [b for b in re.split(r"^## ", profile_text, flags=re.MULTILINE)[1:] if not b.startswith("Candidate joins")]
    out = []
    for block in blocks:
        load = re.search(r"^load: (.+)$", block, re.MULTILINE)
        alias = re.search(r"^  or: (.+?)  \(the same file under a plain name\)$", block, re.MULTILINE)
        assert load is not None, block
        out.append((block.split(" — ")[0], load.group(1), alias.group(1) if alias else None))
    return out


async def test_printed_load_calls_run_verbatim(backend: str, odd_inputs: list[Path], workspace: Path) -> None:
    text = files_profile([str(p) for p in odd_inputs], 4000)
    calls = _load_lines(text)
    assert len(calls) == len(ODD)
    assert sorted(name for name, _, _ in calls) == sorted(ODD)
    assert all(alias is not None for _, _, alias in calls)  # every name here is awkward, so each has an alias
    async with open_sandbox(fast_config(backend), workspace, inputs=odd_inputs) as sb:
        assert (await sb.run(PRELUDE, timeout=60)).ok  # as the analyst does: pd, sqlite3, json exist
        for name, call, alias in calls:
            r = await sb.run(f"df = {call}\nprint(int(df['y'].sum()), list(df.columns))")
            assert r.ok, (call, r.to_observation())
            assert r.stdout == f"{Y_SUM[name]} ['x', 'y']\n", call
            r = await sb.run(f"df = {alias}\nprint(int(df['y'].sum()))")
            assert r.ok and r.stdout == f"{Y_SUM[name]}\n", (alias, r.to_observation())
        assert await sb.list_files(include_inputs=True) == sorted(ODD)  # aliases are not listed twice


@needs_bwrap
async def test_bwrap_mounts_aliases_under_data(odd_inputs: list[Path], workspace: Path) -> None:
    async with open_sandbox(fast_config("local"), workspace, inputs=odd_inputs) as sb:
        r = await sb.run("import os\nprint(sorted(os.listdir('/data')))")
        assert r.ok, r.to_observation()
        listed = eval(r.stdout)  # our own printed list
        # inputs in the order given: aliases are file_<position>.csv
        assert listed == sorted([*ODD, "file_1.csv", "file_2.csv", "file_3.csv", "file_4.csv"])
        r = await sb.run("print(open('/data/file_1.csv').read() == open('/data/a=b+c d.csv').read())")
        assert r.stdout == "True\n"


async def test_prelude_profile_helper_prints_column_statistics(backend: str, odd_inputs: list[Path]) -> None:
    async with open_sandbox(fast_config(backend), inputs=odd_inputs[:1]) as sb:
        assert (await sb.run(PRELUDE, timeout=60)).ok
        r = await sb.run("df = pd.DataFrame({'v': [1.0, 2.0, None, 5.0], 'c': ['a', 'b', 'a', 'a']})\nprofile(df)")
        assert r.ok, r.to_observation()
        lines = r.stdout.splitlines()
        assert lines[0] == "4 rows x 2 columns"
        # v: 1, 2, 5 -> mean 8/3, median 2, one null; c: a three times, b once
        assert lines[1].startswith("- v: float64; 1 nulls; 3 distinct; min 1, 25% 1.5, 50% 2, mean 2.667")
        assert lines[1].endswith("max 5")
        assert lines[2] == "- c: str; 0 nulls; 2 distinct; most common a (3), b (1)"
        r = await sb.run("profile('file_1.csv')")  # a file name works too (here the alias of 'a=b+c d.csv')
        assert r.ok and r.stdout.startswith("3 rows x 2 columns\n- x: int64; 0 nulls; 3 distinct; min 1"), r.stdout


async def test_scipy_and_stats_work_in_a_cell_that_never_imported_them(backend: str) -> None:
    """The 1.5B model wrote `stats.pearsonr` and `scipy.stats.linregress` without importing scipy (NameError in 36
    cells of four runs); the prelude makes both names import scipy on first use."""
    async with open_sandbox(fast_config(backend)) as sb:
        assert (await sb.run(PRELUDE, timeout=60)).ok
        r = await sb.run("import sys\nprint('scipy.stats' in sys.modules)")
        assert r.stdout == "False\n"  # not imported by the prelude itself
        # x 1, 2, 3; y 1, 2, 4: r = 3 / sqrt(2 * 42/9) = 0.9820 (by hand); y = 2x + 1: slope 2
        r = await sb.run("print(round(float(stats.pearsonr([1, 2, 3], [1, 2, 4])[0]), 4))\n"
                         "print(scipy.stats.linregress([0, 1, 2], [1, 3, 5]).slope)")
        assert r.ok and r.stdout == "0.982\n2.0\n", r.to_observation()
        r = await sb.run("from scipy import stats\nprint(type(stats).__name__)")
        assert r.stdout == "module\n"
