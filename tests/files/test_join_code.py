"""The join code written from the profile for a text naming two linked tables (tools/files/join_code.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

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
