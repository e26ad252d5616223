"""Where a request's names are in the files (tools/files/names.py): checked on a small hand-made data room."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from worldsmith.agents.analyst import task_files, user_prompt
from worldsmith.tools.files import profile_workspace
from worldsmith.tools.files.names import (documented_spelling, request_names, request_notes, table_holding_all,
                                          unit_change)

REQUEST = ("Mean of `amount` over the `orders` records, only rows where `region` is 'north', from `data/orders_2024.csv` "
           "and `ledger.xlsx`; `region` is in `customers.csv`.")


def _room(root: Path) -> list[Path]:
    # orders: 2023 calls the measure `amount`, 2024 renames it `amt` (the memo says so); customers code regions N/S
    (root / "orders_2023.csv").write_text("order_id,cust,amount\n1,1,10\n2,2,20\n")
    (root / "orders_2024.csv").write_text("order_id,cust,amt\n3,1,30\n4,2,40\n")
    (root / "customers.csv").write_text("cust,region\n1,N\n2,S\n")
    (root / "memo.md").write_text("# Notes on the order export\n\nFiles: `orders_2024.csv`.\n\n"
                                  "- From the 2024 file onward, `amount` is called `amt`.\n"
                                  "- The export can repeat a record.\n")
    (root / "crm.md").write_text("# CRM notes\n\n- This export labels `region` its own way: \"N\" means \"north\".\n"
                                 "- Unrelated: the office moved.\n")
    return sorted(root.iterdir())


def test_request_names_are_the_backticked_names_without_file_paths() -> None:
    assert request_names(REQUEST) == ["amount", "orders", "region"]


def test_each_name_is_placed_and_the_documents_lines_on_it_are_quoted(tmp_path: Path) -> None:
    ws = profile_workspace(_room(tmp_path), as_mounted=True)
    lines = request_notes(REQUEST, ws)
    text = "\n".join(lines)
    # by hand: only orders_2023.csv has a column `amount`; `orders` names the rows ("the `orders` records"), not a
    # column (a small model made such a name a column and looped on the error); `region` is in customers.csv
    assert "- `amount`: a column of orders_2023.csv" in lines
    assert "- `orders`: names the kind of row the request counts, not a column; nothing needs to be made for it" in lines
    assert "no table has a column by this name" not in text
    assert "- `region`: a column of customers.csv" in lines
    # 'north' is not among region's values (N, S), and crm.md says "N" means "north": the line gives the code
    assert "- 'north' is written 'N' in `region` of customers.csv (crm.md says so): compare with 'N', not 'north'" in lines
    # the documents' lines on these names: the rename, and the label code; the memo about orders_2024.csv is quoted
    # whole (its files hold a named column? no: orders_2024.csv holds `amt`, so only the line naming `amount`)
    assert "- memo.md says: From the 2024 file onward, `amount` is called `amt`." in lines
    assert '- crm.md says: This export labels `region` its own way: "N" means "north".' in lines
    assert "office moved" not in text and "repeat a record" not in text


def test_a_note_about_a_file_holding_a_named_column_is_quoted_whole(tmp_path: Path) -> None:
    ws = profile_workspace(_room(tmp_path), as_mounted=True)
    lines = request_notes("The mean of `amt`.", ws)
    # orders_2024.csv holds `amt`, and memo.md is about orders_2024.csv: both its bullet lines are quoted
    assert "- memo.md says: The export can repeat a record." in lines
    assert "- memo.md says: From the 2024 file onward, `amount` is called `amt`." in lines
    assert not any("crm.md" in x for x in lines)


def test_one_table_and_no_documents_adds_nothing(tmp_path: Path) -> None:
    (tmp_path / "sales.csv").write_text("amount,region\n1,N\n")
    ws = profile_workspace([tmp_path / "sales.csv"], as_mounted=True)
    assert request_notes("The mean of `amount` where `region` is 'north'.", ws) == []
    # so the task turn of a one-file question is exactly what it was
    profile, notes = task_files([str(tmp_path / "sales.csv")], 2500, "The mean of `amount`.")
    assert notes == "" and user_prompt("Q", profile, ["x"], "", notes) == user_prompt("Q", profile, ["x"])


def test_the_task_turn_carries_the_notes_after_the_question(tmp_path: Path) -> None:
    files = [str(p) for p in _room(tmp_path)]
    profile, notes = task_files(files, 2500, REQUEST)
    turn = user_prompt(REQUEST, profile, ["mean_amount"], "", notes)
    assert turn.index(REQUEST) < turn.index("# The task's names in these files") < turn.index("@mean_amount[value]")
    # what the notes say is true of the files (plain pandas): the 2024 file has no `amount`, customers no 'north'
    assert "amount" not in pd.read_csv(tmp_path / "orders_2024.csv").columns
    assert "north" not in set(pd.read_csv(tmp_path / "customers.csv")["region"])


def test_when_one_table_holds_every_named_column_it_says_to_use_that_table_alone(tmp_path: Path) -> None:
    (tmp_path / "trips.csv").write_text("trip_id,fare,km\nT-1,5,2\nT-2,9,4\n")
    (tmp_path / "payments.csv").write_text("trip_id,tip\nTR1,1\nTR2,0\n")
    (tmp_path / "drivers.csv").write_text("driver,city\n1,a\n")
    ws = profile_workspace(sorted(tmp_path.iterdir()), as_mounted=True)
    alone = "- Every column named above that exists is in trips.csv: compute from that table alone"
    assert any(x.startswith(alone) for x in request_notes("Slope of `fare` on `km` over `trip_id`.", ws))
    # `tip` lives in payments.csv only: two tables are needed, so no such line
    assert not any("alone" in x for x in request_notes("Mean `tip` by `km`.", ws))
    # a name no table holds may be another table's column under another name (a memo says so): no such line
    # either; a kind of row ("the `rides` records") is no column and does not count
    assert not any("alone" in x for x in request_notes("Slope of `gratuity` on `km` over `trip_id`.", ws))
    assert any(x.startswith(alone) for x in request_notes("Slope of `fare` on `km` over the `rides` records.", ws))


def test_no_join_is_run_when_one_of_the_two_named_tables_holds_every_named_column(tmp_path: Path) -> None:
    """generated-v1 writes "Other columns used: `period` in data/surveillance.csv.gz, data/hospital.sqlite" for a
    mean of surveillance's `cases`: two files named, one table needed. The task turn says to compute from that
    table alone, and no join runs to contradict it."""
    from worldsmith.tools.files.join_code import plan_join

    (tmp_path / "cases.csv").write_text("district_id,period,cases\n" + "".join(
        f"D-{d:05d},2023-01-{w:02d},{d * w}\n" for d in (1, 2) for w in (2, 9)) + "D-00001,2023-01-02,7\n")
    (tmp_path / "hospital.csv").write_text("district_id,period,hosp_adm\n" + "".join(
        f"d{d},2023-01-{w:02d},{d + w}\n" for d in (1, 2) for w in (2, 9)))
    ws = profile_workspace(sorted(tmp_path.iterdir()), as_mounted=True)
    one = "Mean `cases` by `period` (in cases.csv and hospital.csv)."
    assert plan_join(ws, one) is None and table_holding_all(one, ws) == "cases.csv"
    both = "Correlation of `cases` with `hosp_adm` by `period` (cases.csv, hospital.csv)."
    assert plan_join(ws, both) is not None and table_holding_all(both, ws) is None
    # `admissions` is no table's column (hospital.csv calls it hosp_adm): the join is kept
    renamed = "Correlation of `cases` with `admissions` by `period` (cases.csv, hospital.csv)."
    assert plan_join(ws, renamed) is not None


def test_parts_of_one_table_count_as_that_table(tmp_path: Path) -> None:
    _room(tmp_path)
    ws = profile_workspace(sorted(tmp_path.iterdir()), as_mounted=True)
    lines = request_notes("The total of `amount` over `order_id`.", ws)
    # `amount` is only in orders_2023.csv (2024 calls it `amt`), but the yearly files are one table: name them all
    assert "- Every column named above that exists is in orders_2023.csv, orders_2024.csv: compute from that " \
           "table alone, without merging other tables." in lines


def test_a_key_every_table_carries_does_not_pull_in_every_note(tmp_path: Path) -> None:
    ws = profile_workspace(_room(tmp_path), as_mounted=True)
    # `cust` is in three files, so the note about orders_2024.csv is not quoted for it (it never names `cust`)
    lines = request_notes("Count rows per `cust`, and `amt`.", ws)
    assert "- memo.md says: The export can repeat a record." in lines  # `amt`: one file, its note whole
    lines = request_notes("Count rows per `cust` and `region`.", ws)
    assert not any(x.startswith("- memo.md") for x in lines)


def test_a_name_no_table_holds_is_a_row_kind_only_when_the_request_says_records_or_rows(tmp_path: Path) -> None:
    ws = profile_workspace(_room(tmp_path), as_mounted=True)
    lines = request_notes("Count the `visits` rows and the mean of `orders` over `region`.", ws)
    assert "- `visits`: names the kind of row the request counts, not a column; nothing needs to be made for it" in lines
    assert "- `orders`: no table has a column by this name" in lines  # not written as a kind of row here


def test_file_notes_are_the_list_items_of_the_documents_naming_the_file(tmp_path) -> None:
    from worldsmith.tools.files.names import file_notes

    room = tmp_path / "room"
    (room / "memos").mkdir(parents=True)
    for name in ("orders.csv", "crm.xlsx", "returns.jsonl"):
        (room / name).write_text("x\n1\n")
    (room / "README.md").write_text("Files: `orders.csv`, `crm.xlsx`, `returns.jsonl`.\n\n- `memos/orders.md`: notes\n")
    (room / "memos" / "orders.md").write_text(
        "# orders\n\nFiles: `orders.csv`.\n\n- From 2024-07-01 `amount` is in cents.\n1. Repeated ids: the first counts.\n"
        "Plain prose is not a note.\n")
    (room / "memos" / "big.md").write_text("About big_orders.csv.\n\n- Its ids are spelled B-1.\n")
    inputs = sorted(room.iterdir())
    assert file_notes(inputs, ["orders.csv"]) == [
        "- memos/orders.md says: From 2024-07-01 `amount` is in cents.",
        "- memos/orders.md says: Repeated ids: the first counts.",
    ]  # the README lists every file: an index, not a note; big.md is about another file
    assert file_notes(inputs, ["crm.xlsx"]) == []
    assert file_notes([room / "orders.csv", room / "README.md"], ["orders.csv"]) == []  # no memo mounted


def test_a_question_over_two_linked_tables_gets_their_join_run_before_its_first_cell(tmp_path: Path) -> None:
    import subprocess
    import sys

    from worldsmith.agents.analyst import PRELUDE, opening, opening_turn

    room = tmp_path / "room"
    room.mkdir()
    exams = pd.DataFrame({"student": [f"st{i}" for i in range(30)], "school_id": [f"sc{i % 6}" for i in range(30)],
                          "score": [float(50 + i) for i in range(30)]})
    schools = pd.DataFrame({"school_id": [f"SCH-{i:04d}" for i in range(6)],
                            "school_type": ["state", "independent"] * 3})
    exams.to_csv(room / "exams.csv", index=False)
    schools.to_json(room / "schools.json", orient="records")
    files = [str(p) for p in sorted(room.iterdir())]
    question = ("Mean `score` in `data/exams.csv` by `school_type` (in `data/schools.json`): independent minus state. "
                "Answer as @gap[value].")
    opened = opening(question, files, 1300, ["gap"])
    turn = opened.turn
    assert "# The two tables, joined" in turn and turn.index("# Task") < turn.index("# The two tables")
    assert "has already run in your\nsession" in turn
    code = turn.split("```python\n", 1)[1].split("```", 1)[0]
    assert code.strip() == opened.setup.strip()  # what the turn shows is what the session runs
    # the cell is what the model's session lacks: no import (the prelude ran them) and no comment
    assert not [line for line in code.splitlines() if line.startswith(("import ", "from ", "#"))], code
    # the shown cell, run as the model would run it (after the session's prelude), joins as plain pandas does by
    # the number in the ids
    probe = PRELUDE + "\n" + code + "\nprint(round(df[df.school_type == 'independent'].score.mean() - " \
                   "df[df.school_type == 'state'].score.mean(), 6))\n"
    out = subprocess.run([sys.executable, "-c", probe], cwd=room, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    exams["n"], schools["n"] = exams.school_id.str[2:].astype(int), schools.school_id.str[4:].astype(int)
    joined = exams.merge(schools.drop(columns="school_id"), on="n")
    gap = joined[joined.school_type == "independent"].score.mean() - joined[joined.school_type == "state"].score.mean()
    assert "joined: 30 of 30 rows of exams.csv matched a row of schools.json" in out.stdout
    assert float(out.stdout.strip().splitlines()[-1]) == round(gap, 6)
    one = opening_turn("Mean `score` in `data/exams.csv`. Answer as @m[value].", files, 1300, ["m"])
    assert "joined" not in one and opening("Mean `score` in `data/exams.csv`.", files, 1300, ["m"]).setup == ""


def test_a_value_no_document_spells_lists_the_columns_values(tmp_path: Path) -> None:
    paths = _room(tmp_path)
    (tmp_path / "crm.md").write_text("# CRM notes\n\n- Unrelated: the office moved.\n")
    lines = request_notes(REQUEST, profile_workspace(paths, as_mounted=True))
    assert "- 'north' is not a value of `region` in customers.csv; its values: 'N', 'S'" in lines
    assert not any("is written" in x for x in lines)


def test_documented_spelling_reads_either_direction_and_refuses_two_codes() -> None:
    values = ["state", "independent"]
    said = {"memo.md": ['This export labels `school_type` its own way: "state" means "public", '
                        '"independent" means "private".']}
    assert documented_spelling("private", values, said) == ("independent", "memo.md")
    assert documented_spelling("public", values, said) == ("state", "memo.md")
    assert documented_spelling("Private", values, said) == ("independent", "memo.md")  # the label's case aside
    assert documented_spelling("private", values, {"a.md": ["'private' is coded as 'independent'"]}) == (
        "independent", "a.md")
    assert documented_spelling("xl", ["ECO", "XL"], {"r.md": ["XL = xl, ECO = economy"]}) == ("XL", "r.md")
    # a label two codes are said to stand for is no spelling; nor is a label merely near a code
    assert documented_spelling("private", values, {"m.md": ['"state" means "private"', '"independent" means "private"']}) is None
    assert documented_spelling("private", values, {"m.md": ["independent schools are mostly private"]}) is None
    assert documented_spelling("privately", values, said) is None


def test_unit_change_reads_the_column_date_units_and_the_direction_of_the_factor() -> None:
    line = "From 2024-07-01 (by this export's dates), `amount` is recorded in USD cents instead of USD (1 USD = 100.0 USD cents)."
    assert unit_change(line) == ("amount", "2024-07-01", "USD cents", "USD", "100.0")
    # the factor written the other way round: 1 new unit = k old units, so the new values are multiplied by k
    assert unit_change("Since 2023-01-01 `weight` is stored in g instead of kg (1 g = 0.001 kg).") == (
        "weight", "2023-01-01", "g", "kg", "1/0.001")
    # no factor, or one naming other units: the change without a divisor
    assert unit_change("From 2024-01-01, `no2` is recorded in ug/m3 instead of ppb.") == (
        "no2", "2024-01-01", "ug/m3", "ppb", None)
    assert unit_change("From 2024-01-01, `x` is recorded in A instead of B (1 C = 2.0 D).")[4] is None
    # no date, or no "instead of": not a change from a date
    assert unit_change("`amount` is recorded in USD cents instead of USD (1 USD = 100.0 USD cents).") is None
    assert unit_change("From 2024-07-01, `amount` is called `amt`.") is None



def test_a_name_a_memo_says_a_column_holds_points_at_that_column(tmp_path: Path) -> None:
    """generated-v1's surveillance room: no table has `hospitalisations`; a memo says `hosp_adm` holds it. Said as
    "no table has a column by this name" with the memo line apart, the 1.5B model correlated `cases` with itself."""
    (tmp_path / "hospital.csv").write_text("district_id,period,hosp_adm\nD1,2024-01,5\nD2,2024-01,7\n")
    (tmp_path / "surveillance.csv").write_text("district_id,period,cases\nD1,2024-01,50\nD2,2024-01,70\n")
    (tmp_path / "hospital.md").write_text("# Notes on the `hospital` export\n\n"
                                          "- The column `hosp_adm` holds `hospitalisations`.\n")
    ws = profile_workspace(sorted(tmp_path.iterdir()), as_mounted=True)
    lines = request_notes("Correlation of `cases` with `hospitalisations` by `district_id`.", ws)
    [said] = [line for line in lines if line.startswith("- `hospitalisations`")]
    assert said == ("- `hospitalisations`: no table has a column by this name; hospital.md says the column "
                    "`hosp_adm` of hospital.csv holds it: use `hosp_adm`")
    assert not [line for line in lines if "hospital.md says: The column" in line]  # quoted once, not twice
    # a name no document places keeps the plain line
    other = request_notes("Mean of `admissions` by `district_id`.", ws)
    assert "- `admissions`: no table has a column by this name" in other[0] and "use `" not in other[0]
