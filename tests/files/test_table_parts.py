"""Parts of one table (yearly files, sheets of a workbook) are shown as one table to stack, on hand-made files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from worldsmith.tools.files import profile_workspace


def _yearly(root: Path) -> None:
    (root / "orders_2023.csv").write_text("order_id,region,amount\n1,N,10\n2,S,20\n")
    (root / "orders_2024.csv").write_text("order_id,region,amt\n3,N,30\n4,S,40\n5,N,50\n")  # renamed from 2024 on
    (root / "customers.csv").write_text("id,name\n1,a\n")
    (root / "suppliers.csv").write_text("id,name\n1,b\n")  # same columns, but not one table's parts


def test_yearly_files_are_one_table_to_stack_with_the_rename_undone(tmp_path: Path) -> None:
    _yearly(tmp_path)
    text = profile_workspace(sorted(tmp_path.iterdir()), as_mounted=True).to_prompt(max_chars=6000, compact=True)
    block = text[text.index("## Parts of one table"):].split("\n\n")[0]
    line = block.splitlines()[1]
    assert line.startswith("- orders_2023.csv, orders_2024.csv: one table in parts")
    assert "`amt` in orders_2024.csv is `amount`" in line
    assert "customers.csv" not in block and "suppliers.csv" not in block
    # the printed call, run as written, stacks 5 rows with every amount in one column (by hand: 10..50, sum 150)
    call = line[line.index("`pd.concat") + 1:line.rindex("`")]
    import os
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        stacked = eval(call, {"pd": pd})  # noqa: S307 - the profile's own text, on test data
    finally:
        os.chdir(here)
    assert list(stacked.columns) == ["order_id", "region", "amount"] and stacked["amount"].sum() == 150
    # parts are not offered as a join of each other
    assert "orders_2023.csv.order_id ↔ orders_2024.csv.order_id" not in text


def test_sheets_with_the_same_columns_are_parts_and_other_sheets_are_not(tmp_path: Path) -> None:
    book = tmp_path / "ledger.xlsx"
    with pd.ExcelWriter(book) as xw:
        pd.DataFrame({"branch": ["B1", "B2"], "opex": [1.0, 2.0]}).to_excel(xw, sheet_name="gl_2022", index=False)
        pd.DataFrame({"branch": ["B1", "B2"], "opex": [3.0, 4.0]}).to_excel(xw, sheet_name="gl_2023", index=False)
        pd.DataFrame({"branch": ["B1"], "manager": ["x"], "city": ["y"]}).to_excel(xw, sheet_name="master",
                                                                                 index=False)
    text = profile_workspace([book], as_mounted=True).to_prompt(max_chars=6000, compact=True)
    line = next(x for x in text.splitlines() if "one table in parts" in x)
    assert line.startswith("- ledger.xlsx[gl_2022], ledger.xlsx[gl_2023]:") and "master" not in line
    assert "renamed" not in line and ".rename(" not in line  # nothing renamed between these parts


def test_one_file_has_no_parts(tmp_path: Path) -> None:
    (tmp_path / "sales_2024.csv").write_text("a,b\n1,2\n")
    text = profile_workspace([tmp_path / "sales_2024.csv"], as_mounted=True).to_prompt(max_chars=6000, compact=True)
    assert "Parts of one table" not in text
