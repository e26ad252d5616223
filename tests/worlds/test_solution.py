"""Reference solutions: standalone scripts that read data/ and reproduce the auditor's value."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from worldsmith.evolution.worlds import load_world, parse_answer, read_audit, reference_solution_code


def run_solution(world, pid) -> str:
    code = reference_solution_code(world, pid)
    assert "import worldsmith" not in code and ".truth" not in code
    out = subprocess.run([sys.executable, "-c", code], cwd=world, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    value = parse_answer(out.stdout, pid)
    assert value is not None, out.stdout
    return value


@pytest.mark.parametrize("pid", ["business_order_gap", "campaign_uplift", "web_return_rate", "value_per_item",
                                 "active_customers", "north_income"])
def test_reference_solution_reproduces_the_value(commercial_world, pid):
    value = run_solution(commercial_world, pid)
    audited = {r.id: r for r in read_audit(commercial_world).phenomena}[pid]
    truth = {p.id: p for p in load_world(commercial_world).phenomena()}[pid]
    assert float(value) == pytest.approx(float(audited.observed), rel=1e-9, abs=1e-12)
    assert truth.tolerance.allows(float(value), float(truth.value))


@pytest.mark.parametrize("pid", ["business_order_gap", "web_return_rate", "north_income"])
def test_staged_cells_reach_the_value_in_short_turns(commercial_world, pid):
    from worldsmith.evolution.worlds.solution import CELL_CHARS, reference_solution_cells

    cells = reference_solution_cells(commercial_world, pid)
    codes = [c for _, c in cells]
    assert all(t.strip() and c.strip() for t, c in cells)
    assert "import worldsmith" not in "\n".join(codes) and "read_table(" not in "\n".join(codes)
    # the workbook is read as an analyst reads it (pandas), not with the kernels' streaming XML reader
    assert "pd.read_excel('data/crm.xlsx'" in "\n".join(codes) and "zipfile" not in "\n".join(codes)
    # short turns: only a lone helper or one system's load may exceed the budget
    assert all(len(c) <= CELL_CHARS or c.count("\ndef ") + c.startswith("def ") <= 1 for c in codes)
    # run one cell after another in one interpreter, as a session: the last prints the truth within tolerance
    session = "import sys\n" + "\n".join(f"exec(compile({c!r}, 'cell-{i}', 'exec'))\nprint('<<{i}>>')"
                                          for i, c in enumerate(codes))
    out = subprocess.run([sys.executable, "-c", session], cwd=commercial_world, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("<<") == len(codes)
    last = out.stdout.split(f"<<{len(codes) - 2}>>")[1]
    value = parse_answer(last, pid)
    truth = {p.id: p for p in load_world(commercial_world).phenomena()}[pid]
    assert value is not None and truth.tolerance.allows(float(value), float(truth.value))
    # each system's load cell prints its table's size: "(rows, columns)"
    assert sum(".shape)" in c for c in codes) == len([t for t, _ in cells if t.startswith("Load ")]) >= 1


def test_reference_solution_on_panel_and_label_answers(panel_world, tmp_path):
    value = run_solution(panel_world, "marketing_lag_corr")
    truth = {p.id: p for p in load_world(panel_world).phenomena()}["marketing_lag_corr"]
    assert truth.tolerance.allows(float(value), float(truth.value))


def test_label_answer(tmp_path):
    from worldsmith.evolution.worlds import build_world, load_template

    build_world(load_template("customer_pricing", rows=3000), 1, tmp_path / "w")
    assert run_solution(tmp_path / "w", "priciest_tier") == "enterprise"


def _same_cells(ours, theirs) -> None:
    """Same header, same blanks, same numbers (a float written as 12.0 may read back as '12') and same text."""
    assert list(ours.columns) == list(theirs.columns) and ours.shape == theirs.shape
    for col in ours.columns:
        a, b = pd.to_numeric(ours[col], errors="coerce"), pd.to_numeric(theirs[col], errors="coerce")
        text = a.isna() & b.isna()
        assert ((a == b) | text).all(), col
        assert (ours[col][text].fillna("") == theirs[col][text].fillna("")).all(), col


def test_fast_xlsx_reader_reads_what_openpyxl_reads(panel_world, tmp_path):
    """The stdlib reader the reference solutions use agrees with pandas' openpyxl engine, on the world's own
    workbook (inline strings) and on one openpyxl wrote (shared strings, blank cells, several sheets)."""
    from worldsmith.evolution.worlds.kernels import read_sheets

    book = next((panel_world / "data").glob("*.xlsx"))
    ours = read_sheets(book)
    theirs = pd.read_excel(book, sheet_name=None, dtype=str, keep_default_na=False, na_values=[""])
    assert list(ours) == list(theirs)
    for name in ours:
        _same_cells(ours[name], theirs[name])
    other = tmp_path / "other.xlsx"
    frames = {"a": pd.DataFrame({"id": ["x1", "x2", "x1"], "v": [1.5, None, 3.0], "n": [1, 2, 3]}),
              "b": pd.DataFrame({"w": ["é", "", "z"]})}
    with pd.ExcelWriter(other, engine="openpyxl") as xw:
        for name, df in frames.items():
            df.to_excel(xw, sheet_name=name, index=False)
    ours = read_sheets(other, ["b", "a"])
    assert list(ours) == ["b", "a"]
    _same_cells(ours["a"], frames["a"].astype(object))
    assert ours["b"]["w"].tolist()[0::2] == ["é", "z"] and pd.isna(ours["b"]["w"][1])
    with pytest.raises(ValueError, match="no sheet 'c'"):
        read_sheets(other, ["c"])
