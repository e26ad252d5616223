"""Two tables of one grain for join tests: a ledger and a headcount report, one row per branch and month each."""

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
