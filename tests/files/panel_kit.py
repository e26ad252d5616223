"""Small data rooms for join tests: two tables of one grain (a ledger and a headcount report, one row per branch
and month each), and yearly order files with the crm they link to."""

from __future__ import annotations

from pathlib import Path


def write_panel(folder: Path) -> Path:
    """ledger.csv and hr.csv in `folder`: ids spelled `BR_k` / `B-0000k`, dates `2023-0m-01` / `2023/0m/01`;
    branch b's opex in month m is 100 b + 10 m and its headcount b + m. The report repeats branch 2's March row with
    another headcount (99: the first row counts) and has a month (April) the ledger lacks. Returns `folder`."""
    ledger = "branch_id,period,opex\n" + "".join(
        f"BR_{b},2023-{m:02d}-01,{100 * b + 10 * m}\n" for b in (1, 2, 3) for m in (1, 2, 3))
    hr = "branch_id,period,headcount\n" + "".join(
        f"B-{b:05d},2023/{m:02d}/01,{b + m}\n" for b in (1, 2, 3) for m in (1, 2, 3, 4)) + "B-00002,2023/03/01,99\n"
    (folder / "ledger.csv").write_text(ledger)
    (folder / "hr.csv").write_text(hr)
    return folder


def yearly_orders_and_crm(tmp_path: Path) -> Path:
    """data/orders_2023.csv (order i: account C-0000((i % 5) + 1), basket i), data/orders_2024.csv (order i: account
    C-0000((i % 4) + 1), basket 2 i) and data/crm.csv (CUST_k, business when k is odd, else consumer)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "orders_2023.csv").write_text("order_id,acct_ref,basket\n" + "".join(
        f"A{i},C-{(i % 5) + 1:05d},{i}\n" for i in range(1, 11)))
    (data / "orders_2024.csv").write_text("order_id,acct_ref,basket\n" + "".join(
        f"B{i},C-{(i % 4) + 1:05d},{2 * i}\n" for i in range(1, 9)))
    (data / "crm.csv").write_text("customer_id,segment\n" + "".join(
        f"CUST_{k},{'business' if k % 2 else 'consumer'}\n" for k in range(1, 6)))
    return data
