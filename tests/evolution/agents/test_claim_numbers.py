"""The one rule for 'is this stated number backed by printed output' (hand-worked cases)."""

from __future__ import annotations

from worldsmith.core.claim_numbers import (
    parse_results,
    printed_numbers,
    stated_numbers,
    unbacked_numbers,
)


def test_stated_numbers_skip_small_counts_and_keep_precision() -> None:
    assert stated_numbers("In 3 regions, Q1 revenue rose 12.5% to 1,234.56 (2023).") == [
        ("12.5%", 12.5, 1), ("1,234.56", 1234.56, 2), ("2023", 2023.0, 0)]


def test_a_number_is_backed_by_what_rounds_to_it() -> None:
    out = "RESULT total = 1234.5612\nshare 0.125\nmean 19.96"
    printed = printed_numbers(out)
    assert unbacked_numbers("Total 1,234.56, share 12.5%, mean 20.0, not 19.9", printed) == ["19.9"]
    assert unbacked_numbers("Mean is 20", printed) == []  # 19.96 shown as a whole number
    assert unbacked_numbers("Total 1234.6 of 1235", printed) == []
    assert unbacked_numbers("Total 1234.57", printed) == ["1234.57"]


def test_result_lines() -> None:
    assert parse_results("x\nRESULT a = 1.5\nRESULT b: -2e3\nRESULT c = n/a\n  RESULT a = 2\n") == {"a": 2.0, "b": -2000.0}
