"""Which cells read the session setup's files again into the names it made (agents/setup_guard.py). Hand-written
cells: the four shapes the 1.5B model wrote at 3750f22, and the reads that must run as written."""

from __future__ import annotations

from worldsmith.agents.setup_guard import reloaded_note, reloads, restored_note, undone

SETUP = """gl = pd.concat([pd.read_excel("data/ledger.xlsx", sheet_name="gl_2022"),
                pd.read_excel("data/ledger.xlsx", sheet_name="gl_2023")], ignore_index=True)
branch_master = pd.read_json("data/branch_master.json")
gl["_key"] = pd.to_numeric(gl["branch_id"].astype(str).str.extract(r"(\\d+)", expand=False), errors="coerce")
df = gl.merge(branch_master, on="_key", how="left")
df = df.drop(columns=["_key"])
"""


def test_a_setup_file_read_again_into_a_setup_name_is_found() -> None:
    assert reloads('df = pd.read_excel("data/ledger.xlsx", sheet_name="gl_2022")\nprint(df.opex.mean())', SETUP) \
        == ["df"]
    stacked = ('gl = pd.concat([pd.read_excel("data/ledger.xlsx", sheet_name="gl_2022"),\n'
               '                pd.read_excel("data/ledger.xlsx", sheet_name="gl_2023")])\ndf = pd.concat([gl, gl])')
    assert reloads(stacked, SETUP) == ["gl"]  # `df = pd.concat([gl, gl])` reads no file
    both = 'branch_master = pd.read_json("data/branch_master.json")\ndf = pd.read_excel(io="data/ledger.xlsx")'
    assert reloads(both, SETUP) == ["branch_master", "df"]
    inside = 'for s in ["gl_2022"]:\n    df = pd.read_excel("data/ledger.xlsx", sheet_name=s)'
    assert reloads(inside, SETUP) == ["df"]


def test_other_reads_and_other_names_run_as_written() -> None:
    assert reloads('hr = pd.read_csv("data/hr.csv")', SETUP) == []  # a file the setup did not read
    assert reloads('df = pd.read_csv("data/hr.csv")', SETUP) == []
    assert reloads('raw = pd.read_excel("data/ledger.xlsx", sheet_name="gl_2022")', SETUP) == []  # a new name
    assert reloads('df = df[df["size_class"] == "large"]', SETUP) == []
    assert reloads('path = "data/ledger.xlsx"\ndf = pd.read_excel(path)', SETUP) == []  # no literal path: runs
    assert reloads('df = pd.read_excel("data/ledger.xlsx"', SETUP) == []  # a syntax error: runs, and says so
    assert reloads('df = pd.read_excel("data/ledger.xlsx")', "") == []  # no setup


def test_df_counts_as_undone_when_its_columns_shape_or_sum_differ_from_the_setups() -> None:
    setup = "id\x1fbp\x1ftreated\x1e(12, 3)\x1e1788.0\n"
    assert undone(setup, setup) is None  # a faithful copy of the setup
    assert undone(setup, "id\x1fbp\x1e(12, 2)\x1e1776.0") == ["treated"]  # the joined column lost
    assert undone(setup, "id\x1fbp\x1ftreated\x1e(12, 3)\x1e1790.5") == []  # same columns, other values
    assert undone(setup, "") == ["id", "bp", "treated"]  # no df at all
    assert undone("", "id\x1e(1, 1)\x1e1.0") is None  # the setup's probe gave nothing: nothing to compare


def test_the_notes_name_what_came_back() -> None:
    text = reloaded_note(["df", "gl"], ["size_class", "region"])
    assert "into `df`, `gl`" in text and "lost the columns `size_class`, `region`" in text
    assert "unit changes" in reloaded_note(["df"], [])
    assert "`df` holds every row once more" in restored_note("df")


def test_only_a_setup_frame_cut_to_one_group_is_restored() -> None:
    from worldsmith.agents.setup_guard import cut_frame

    split = 'df = df[df["size_class"] == "large"]\nprint(df[df["size_class"] == "small"]["opex"].mean())'
    assert cut_frame(split, SETUP) == "df"
    assert cut_frame(split.replace("df", "x"), SETUP) is None  # a frame of the model's own: its load call remakes it
    assert cut_frame('df = df[df["size_class"] == "large"]\nprint(df["opex"].mean())', SETUP) is None  # one group
    assert cut_frame(split, "") is None


def test_kept_says_whether_df_still_holds_the_setups_work() -> None:
    """The session-side check, run here on hand-made frames: the setup's `df` with rows kept or a column added
    holds its work; a value changed (a unit change undone), a row it never had or no row at all does not."""
    import contextlib
    import io

    import pandas as pd

    from worldsmith.agents.setup_guard import COPY, KEEP, KEPT

    def run(code: str, ns: dict) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(code, ns)
        return out.getvalue().strip()

    def kept_after(change: str) -> str:
        ns = {"pd": pd, "df": pd.DataFrame({"id": [1, 2, 3], "usd": [1.5, 2.5, 4.0], "arm": ["A", "B", "A"]})}
        run(KEEP, ns)
        assert isinstance(ns[COPY], pd.DataFrame)
        exec(change, ns)
        return run(KEPT, ns)

    assert kept_after("df = df[df['arm'] == 'A']") == "1"
    assert kept_after("df['per'] = df['usd'] / 2") == "1"
    assert kept_after("df = df.copy()\ndf['usd'] = df['usd'] * 100") == "0"  # cents again
    assert kept_after("df = pd.concat([df, df.tail(1)], ignore_index=True)") == "0"  # a row the setup's lacked
    assert kept_after("df = df[df['usd'] > 99]") == "0"
    assert kept_after("df = df.drop(columns=['arm'])") == "0"
    assert kept_after("del df") == "0"
