"""A unit change a memo documents, made good in the session before the model's first cell (tools/files/unit_code.py):
checked on hand-made data rooms, the expected values written by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from worldsmith.agents.analyst import PRELUDE, opening

MEMO = ("# Notes on the orders export\n\nFiles: `orders.csv`.\n\n"
        "- From 2024-07-01, `amount` is recorded in USD cents instead of USD ({factor}).\n")
# five orders: two in USD before 2024-07-01, three in cents from then (30, 40 and 50 USD)
ORDERS = ("order_id,cust,date,amount\n1,1,2024-05-01,10\n2,2,2024-06-15,20\n3,1,2024-07-01,3000\n"
          "4,2,2024-08-02,4000\n5,1,2024-09-10,5000\n")


def _room(root: Path, factor: str = "1 USD = 100.0 USD cents", orders: str = ORDERS) -> list[str]:
    root.mkdir()
    (root / "orders.csv").write_text(orders)
    (root / "customers.csv").write_text("cust,region\n1,north\n2,south\n")
    (root / "memo.md").write_text(MEMO.format(factor=factor))
    return [str(p) for p in sorted(root.iterdir())]


def _run(room: Path, setup: str, probe: str) -> str:
    out = subprocess.run([sys.executable, "-c", PRELUDE + "\n" + setup + "\n" + probe], cwd=room,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_one_table_is_loaded_with_the_rows_after_the_change_brought_back(tmp_path: Path) -> None:
    room = tmp_path / "room"
    question = "Mean of `amount` (in USD) over the `orders` records in `data/orders.csv`. Answer as @m[value]."
    opened = opening(question, _room(room), 1300, ["m"])
    turn = opened.turn
    assert "# The table, loaded" in turn and turn.index("# Task") < turn.index("# The table, loaded")
    code = turn.split("```python\n", 1)[1].split("```", 1)[0]
    assert code.strip() == opened.setup.strip()  # what the turn shows is what the session runs
    assert "`amount` in USD on every row" in turn and "do not convert them again" in turn
    names = turn.split("# The task's names in these files", 1)[1].split("\n# ", 1)[0]
    assert "instead of USD" not in names  # the notes no longer quote a change already made
    assert float(_run(room, opened.setup, "print(df['amount'].mean())")) == 30.0  # (10+20+30+40+50)/5
    assert _run(room, opened.setup, "print(len(df))") == "5"


def test_a_factor_written_new_to_old_multiplies(tmp_path: Path) -> None:
    room = tmp_path / "room"
    question = "Mean of `amount` in USD over `data/orders.csv`. Answer as @m[value]."
    opened = opening(question, _room(room, "1 USD cents = 0.01 USD"), 1300, ["m"])
    assert "*= 0.01" in opened.setup
    assert abs(float(_run(room, opened.setup, "print(df['amount'].mean())")) - 30.0) < 1e-9


def test_no_conversion_when_the_question_asks_in_the_new_unit(tmp_path: Path) -> None:
    question = "Mean of `amount` in USD cents over `data/orders.csv`. Answer as @m[value]."
    assert opening(question, _room(tmp_path / "room"), 1300, ["m"]).setup == ""


def test_no_conversion_when_every_date_is_before_the_change(tmp_path: Path) -> None:
    before = "order_id,cust,date,amount\n1,1,2024-05-01,10\n2,2,2024-06-15,20\n3,1,2024-06-30,30\n"
    question = "Mean of `amount` in USD over `data/orders.csv`. Answer as @m[value]."
    assert opening(question, _room(tmp_path / "room", orders=before), 1300, ["m"]).setup == ""


def test_no_conversion_when_two_dates_could_date_the_change(tmp_path: Path) -> None:
    two = ("order_id,cust,date,shipped,amount\n1,1,2024-05-01,2024-05-03,10\n2,2,2024-06-30,2024-07-02,20\n"
           "3,1,2024-07-01,2024-07-04,3000\n")
    question = "Mean of `amount` in USD over `data/orders.csv`. Answer as @m[value]."
    assert opening(question, _room(tmp_path / "room", orders=two), 1300, ["m"]).setup == ""


def test_a_note_on_another_column_changes_nothing(tmp_path: Path) -> None:
    question = "Number of `order_id` values in `data/orders.csv`. Answer as @n[value]."
    assert opening(question, _room(tmp_path / "room"), 1300, ["n"]).setup == ""


def test_the_joined_table_gets_the_conversion_after_the_join(tmp_path: Path) -> None:
    room = tmp_path / "room"
    question = ("Mean `amount` in USD in `data/orders.csv` by `region` (in `data/customers.csv`): north minus south. "
                "Answer as @gap[value].")
    opened = opening(question, _room(room), 1300, ["gap"])
    assert "# The two tables, joined" in opened.turn and "`amount` in USD on every row" in opened.turn
    assert opened.setup.index("merge(") < opened.setup.index("/= 100.0")
    got = _run(room, opened.setup,
               "print(df[df.region == 'north'].amount.mean() - df[df.region == 'south'].amount.mean())")
    # by hand: north is customer 1 (10, 30, 50 USD), south customer 2 (20, 40 USD): 30 - 30
    assert float(got) == 0.0
    north = _run(room, opened.setup, "print(sorted(df[df.region == 'north'].amount.tolist()))")
    assert north == "[10.0, 30.0, 50.0]"


def test_a_join_by_id_and_date_dates_the_lookups_change_by_the_matched_date(tmp_path: Path) -> None:
    room = tmp_path / "room"
    room.mkdir()
    months = ["2023-11-01", "2023-12-01", "2024-01-01", "2024-02-01"]
    (room / "billing.csv").write_text("household_id,period,bill_usd\n" + "".join(
        f"H-{h},{m},{10 * (h + i)}\n" for h in (1, 2) for i, m in enumerate(months)))
    # meters: 100 kWh a month for household 1, 200 for household 2; from 2024-01-01 written in Wh
    (room / "meters.csv").write_text("household_id,period,consumption_kwh\n" + "".join(
        f"H-{h},{m},{100 * h * (1000 if m >= '2024-01-01' else 1)}\n" for h in (1, 2) for m in months))
    (room / "memo.md").write_text("# Notes on the meters export\n\nFiles: `meters.csv`.\n\n"
                                  "- From 2024-01-01, `consumption_kwh` is recorded in Wh instead of kWh "
                                  "(1 kWh = 1000.0 Wh).\n")
    question = ("Mean of `bill_usd` (in `data/billing.csv`) over mean `consumption_kwh` (in `data/meters.csv`), "
                "in USD per kWh. Answer as @p[value].")
    opened = opening(question, [str(p) for p in sorted(room.iterdir())], 1300, ["p"])
    assert "merge(" in opened.setup and "/= 1000.0" in opened.setup, opened.setup
    got = _run(room, opened.setup, "print(sorted(df.consumption_kwh.tolist()))")
    assert got == str([100.0] * 4 + [200.0] * 4)  # every month of each household in kWh


def test_no_conversion_when_the_question_asks_for_the_values_as_recorded(tmp_path: Path) -> None:
    """An evolution task over a finding computed from the file as it is says so (spec_check.AS_RECORDED)."""
    from worldsmith.evolution.spec_check import AS_RECORDED

    question = f"Mean of `amount` in USD over `data/orders.csv`; population: {AS_RECORDED}. Answer as @m[value]."
    assert opening(question, _room(tmp_path / "room"), 1300, ["m"]).setup == ""
