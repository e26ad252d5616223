"""The join code written from the profile for a text naming two linked tables (tools/files/join_code.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

from tests.files.panel_kit import write_panel
from worldsmith.tools.files import profile_workspace
from worldsmith.tools.files.join_code import plan_join

# facts: 12 orders over 5 accounts spelled "C-0000k" and one of an unknown account; lookup: the 5 accounts spelled
# "CUST_k" (+ one without orders)
ORDERS = "order_id,acct_ref,amount\n" + "".join(
    f"O{i},C-{(i % 5) + 1:05d},{10 * i}\n" for i in range(1, 13)) + "O13,C-00099,999\n"
CRM = "customer_id,segment,income\n" + "".join(
    f"CUST_{k},{'gold' if k % 2 else 'basic'},{1000 * k}\n" for k in range(1, 7))


def _room(tmp_path: Path) -> Path:
    (tmp_path / "orders.csv").write_text(ORDERS)
    (tmp_path / "crm.csv").write_text(CRM)
    return tmp_path


def _run(code: str, cwd: Path, tail: str) -> str:
    return subprocess.run([sys.executable, "-c", code + "\n" + tail], cwd=cwd, capture_output=True, text=True,
                          check=True).stdout


def test_ids_spelled_differently_are_joined_by_their_number(tmp_path: Path) -> None:
    room = _room(tmp_path)
    ws = profile_workspace([room / "orders.csv", room / "crm.csv"], as_mounted=True)
    plan = plan_join(ws, "Joining orders.csv to crm.csv, how does the mean amount differ across segment?")
    assert plan is not None and plan.spelled
    assert (plan.facts.file, plan.fkey, plan.lookup.file, plan.lkey) == ("orders.csv", "acct_ref", "crm.csv",
                                                                       "customer_id")
    out = _run(plan.code(), room, "print(len(df)); print(df.groupby('segment')['amount'].mean().to_dict())")
    # by hand: order i belongs to account (i % 5) + 1; odd accounts are gold
    gold = [10 * i for i in range(1, 13) if ((i % 5) + 1) % 2]
    basic = [10 * i for i in range(1, 13) if not ((i % 5) + 1) % 2]
    lines = out.strip().splitlines()
    assert lines[0] == "joined: 12 of 13 rows of orders.csv matched a row of crm.csv"
    assert lines[1] == "13"  # every order is kept; the unknown account's has no segment
    assert eval(lines[2]) == {"basic": sum(basic) / len(basic), "gold": sum(gold) / len(gold)}  # noqa: S307


def test_a_plain_key_keeps_the_facts_columns_and_suffixes_the_lookups_clash(tmp_path: Path) -> None:
    (tmp_path / "visits.csv").write_text("site,value,note\n" + "".join(f"s{i % 3},{i},v\n" for i in range(9)))
    (tmp_path / "sites.csv").write_text("site,region,note\ns0,north,a\ns1,south,b\ns2,north,c\n")
    ws = profile_workspace([tmp_path / "visits.csv", tmp_path / "sites.csv"], as_mounted=True)
    plan = plan_join(ws, "Using visits.csv and sites.csv, compare the mean value by region.")
    assert plan is not None and not plan.spelled and (plan.fkey, plan.lkey) == ("site", "site")
    out = _run(plan.code(), tmp_path, "print(sorted(df.columns)); print(df.groupby('region')['value'].sum().to_dict())")
    cols, sums = out.strip().splitlines()[1:]
    assert eval(cols) == ["note", "note_sites", "region", "site", "value"]  # noqa: S307
    expected = pd.read_csv(tmp_path / "visits.csv").assign(region=lambda d: d["site"].map(
        {"s0": "north", "s1": "south", "s2": "north"})).groupby("region")["value"].sum().to_dict()
    assert eval(sums) == expected == {"north": 0 + 3 + 6 + 2 + 5 + 8, "south": 1 + 4 + 7}  # noqa: S307


def test_no_join_unless_the_text_names_exactly_two_linked_tables(tmp_path: Path) -> None:
    room = _room(tmp_path)
    (room / "notes.csv").write_text("k,x\n1,2\n2,3\n")
    ws = profile_workspace([room / "orders.csv", room / "crm.csv", room / "notes.csv"], as_mounted=True)
    assert plan_join(ws, "In orders.csv, what is the mean amount?") is None  # one table
    assert plan_join(ws, "What is the mean amount by segment?") is None  # names no file
    assert plan_join(ws, "Compare orders.csv, crm.csv and notes.csv.") is None  # three tables
    assert plan_join(ws, "Join orders.csv and notes.csv.") is None  # not linked
    assert plan_join(ws, "Join orders.csv and crm.csv.") is not None
    assert plan_join(ws, "Join big_orders.csv and crm.csv.") is None  # another file's name holds "orders.csv"


def test_parts_of_one_table_are_never_joined(tmp_path: Path) -> None:
    for year in (2023, 2024):
        (tmp_path / f"orders_{year}.csv").write_text(
            "order_id,acct,amount\n" + "".join(f"{year}-{i},a{i % 3},{i}\n" for i in range(10)))
    ws = profile_workspace([tmp_path / "orders_2023.csv", tmp_path / "orders_2024.csv"], as_mounted=True)
    assert plan_join(ws, "Join orders_2023.csv and orders_2024.csv on acct.") is None


def test_parts_of_one_table_named_with_a_linked_table_are_stacked_then_joined(tmp_path: Path) -> None:
    """v11: a goal over orders_2023.csv and orders_2024.csv whose segment column only crm.csv holds named three
    tables, and no join was written. The yearly parts (2024 renames `amount` to `amt`) are one table."""
    (tmp_path / "orders_2023.csv").write_text("order_id,acct_ref,amount\n" + "".join(
        f"A{i},C-{(i % 5) + 1:05d},{10 * i}\n" for i in range(1, 9)))
    (tmp_path / "orders_2024.csv").write_text("order_id,acct_ref,amt\n" + "".join(
        f"B{i},C-{(i % 3) + 1:05d},{7 * i}\n" for i in range(1, 7)))
    (tmp_path / "crm.csv").write_text(CRM)
    ws = profile_workspace([tmp_path / n for n in ("orders_2023.csv", "orders_2024.csv", "crm.csv")],
                           as_mounted=True)
    text = "Using orders_2023.csv and orders_2024.csv, what is the mean amount by segment?\ncrm.csv"
    plan = plan_join(ws, text)
    assert plan is not None and plan.spelled and plan.parts is not None
    assert plan.facts_label == "orders_2023.csv + orders_2024.csv" and (plan.fkey, plan.lkey) == ("acct_ref",
                                                                                                   "customer_id")
    assert plan.names()[0] == "orders"
    out = _run(plan.code(), tmp_path, "print(len(df)); print(df.groupby('segment')['amount'].mean().to_dict())")
    # by hand: 2023 order i → account (i % 5) + 1, amount 10 i; 2024 order i → account (i % 3) + 1, amount 7 i;
    # odd accounts are gold
    rows = [((i % 5) + 1, 10 * i) for i in range(1, 9)] + [((i % 3) + 1, 7 * i) for i in range(1, 7)]
    gold = [a for k, a in rows if k % 2]
    basic = [a for k, a in rows if not k % 2]
    lines = out.strip().splitlines()
    assert lines[0] == "joined: 14 of 14 rows of orders_2023.csv + orders_2024.csv matched a row of crm.csv"
    assert lines[1] == "14"
    assert eval(lines[2]) == {"basic": sum(basic) / len(basic), "gold": sum(gold) / len(gold)}  # noqa: S307
    # one part alone with the lookup is a plain two-table join, as before
    single = plan_join(ws, "Join orders_2024.csv and crm.csv.")
    assert single is not None and single.parts is None and single.facts.file == "orders_2024.csv"


def test_one_named_part_of_a_lookup_family_is_joined_as_a_table(tmp_path: Path) -> None:
    """crm_2023.csv is one of two yearly crm files; named alone with the orders it is the lookup, as before."""
    (tmp_path / "orders.csv").write_text(ORDERS)
    for year in (2023, 2024):
        (tmp_path / f"crm_{year}.csv").write_text(CRM)
    ws = profile_workspace([tmp_path / n for n in ("orders.csv", "crm_2023.csv", "crm_2024.csv")], as_mounted=True)
    plan = plan_join(ws, "Join orders.csv and crm_2023.csv.")
    assert plan is not None and plan.parts is None and plan.lookup.file == "crm_2023.csv"
    assert plan_join(ws, "Join orders.csv, crm_2023.csv and crm_2024.csv.") is None  # a stack of lookups: no join


def test_tables_of_one_grain_join_on_the_id_and_the_date_together(tmp_path: Path) -> None:
    """generated-v1: opex in a ledger against headcount in an HR report, each one row per branch and month. Neither
    id is unique alone, so no many-to-one join existed and the model stacked the tables with pd.concat (every
    cell failed in 5 such questions of 27)."""
    write_panel(tmp_path)
    ws = profile_workspace([tmp_path / "ledger.csv", tmp_path / "hr.csv"], as_mounted=True)
    plan = plan_join(ws, "The slope of opex (ledger.csv) on headcount (hr.csv).")
    assert plan is not None and plan.dated and plan.spelled
    # the facts are the side unique on id and date (the ledger); the report's repeat is the lookup's to drop
    assert (plan.facts.file, plan.fkey, plan.fwhen, plan.lookup.file, plan.lkey, plan.lwhen) == (
        "ledger.csv", "branch_id", "period", "hr.csv", "branch_id", "period")
    out = _run(plan.code(), tmp_path, "print(len(df)); print(sorted(df.columns));"
                                      "print(df.set_index(['branch_id', 'period'])['headcount'].to_dict())")
    lines = out.strip().splitlines()
    assert lines[0] == "joined: 9 of 9 rows of ledger.csv matched a row of hr.csv"
    assert lines[1] == "9"
    assert eval(lines[2]) == ["branch_id", "branch_id_hr", "headcount", "opex", "period"]  # noqa: S307
    # by hand: branch b in month m has headcount b + m, except that the repeat (99) does not count
    expected = {(f"BR_{b}", f"2023-{m:02d}-01"): b + m for b in (1, 2, 3) for m in (1, 2, 3)}
    assert eval(lines[3]) == expected  # noqa: S307


def test_a_single_key_join_is_preferred_and_no_date_pair_means_no_dated_join(tmp_path: Path) -> None:
    write_panel(tmp_path)
    (tmp_path / "branches.csv").write_text("branch_id,region\nb1,north\nb2,south\nb3,north\n")
    ws = profile_workspace([tmp_path / n for n in ("ledger.csv", "hr.csv", "branches.csv")], as_mounted=True)
    plan = plan_join(ws, "Join hr.csv and branches.csv.")
    assert plan is not None and not plan.dated and plan.lookup.file == "branches.csv"
    # a report with no date column: the id alone repeats on both sides, so there is nothing to join on
    (tmp_path / "notes.csv").write_text("branch_id,note\n" + "".join(f"BR_{b % 3 + 1},n{b}\n" for b in range(6)))
    ws = profile_workspace([tmp_path / "ledger.csv", tmp_path / "notes.csv"], as_mounted=True)
    assert plan_join(ws, "Join ledger.csv and notes.csv.") is None


def test_yearly_parts_join_a_report_on_the_id_and_the_date(tmp_path: Path) -> None:
    """The ledger is one file a year, the second calling the date `month`: stacked (renamed back), it is the facts
    of a dated join."""
    (tmp_path / "ledger_2023.csv").write_text("branch_id,period,opex\n" + "".join(
        f"BR_{b},2023-{m:02d}-01,{100 * b + m}\n" for b in (1, 2) for m in (1, 2)))
    (tmp_path / "ledger_2024.csv").write_text("branch_id,month,opex\n" + "".join(
        f"BR_{b},2024-{m:02d}-01,{200 * b + m}\n" for b in (1, 2) for m in (1, 2)))
    (tmp_path / "hr.csv").write_text("branch_id,period,headcount\n" + "".join(
        f"B-{b:05d},{y}-{m:02d}-01,{b * y % 7 + m}\n" for b in (1, 2) for y in (2023, 2024) for m in (1, 2))
        + "B-00001,2024-01-01,50\n")
    ws = profile_workspace([tmp_path / n for n in ("ledger_2023.csv", "ledger_2024.csv", "hr.csv")], as_mounted=True)
    plan = plan_join(ws, "opex in ledger_2023.csv and ledger_2024.csv against headcount in hr.csv")
    assert plan is not None and plan.dated and plan.parts is not None and plan.lookup.file == "hr.csv"
    out = _run(plan.code(), tmp_path, "print(df.set_index(['branch_id', 'period'])['headcount'].to_dict())")
    expected = {(f"BR_{b}", f"{y}-{m:02d}-01"): b * y % 7 + m for b in (1, 2) for y in (2023, 2024) for m in (1, 2)}
    assert eval(out.strip().splitlines()[-1]) == expected  # noqa: S307
