"""The one rule for 'is this stated number backed by printed output' (hand-worked cases)."""

from __future__ import annotations

from worldsmith.core.claim_numbers import (
    misreadings,
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


def test_a_claim_that_reads_its_own_numbers_wrong() -> None:
    # v14's node 8: 55.78 is below 58.74, and the statement called it an increase
    july_dec = {"mean_2023-07": 58.74, "mean_2023-12": 55.78}
    [issue] = misreadings("The monthly mean of `amount` increased from 58.74 in July to 55.78 in December.", july_dec)
    assert "calls the change from 58.74 to 55.78 an increase" in issue and "is a decrease" in issue
    assert misreadings("The monthly mean fell from 58.74 in July to 55.78 in December.", july_dec) == []
    assert misreadings("Sales fell from 1,200 to 1,900.", {}) == [
        "the conclusion calls the change from 1,200 to 1,900 a decrease ('fell from 1,200 to 1,900'); from 1,200 "
        "to 1,900 is an increase"]
    assert misreadings("Revenue rose from 10.5 to 12.25 and then dropped to 9.5.", {}) == []  # no 'from' after drop
    # v14's node 9: 59.89 and 56.25 are January's and February's web means, stated as July's and December's
    web = {"monthly_mean_2023-01_web": 59.89, "monthly_mean_2023-02_web": 56.25, "monthly_mean_2023-07_web": 56.98}
    issues = misreadings("The mean went from 59.89 in July to 56.25 in December.", web)
    assert issues == ["the conclusion puts 59.89 in July, but the script printed it as RESULT monthly_mean_2023-01_web",
                      "the conclusion puts 56.25 in December, but the script printed it as RESULT "
                      "monthly_mean_2023-02_web"]
    assert misreadings("The mean was 56.98 in Jul.", web) == []  # the July mean, abbreviated
    assert misreadings("The mean was 56.98 USD in Sept.", {"mean_sep": 56.98}) == []
    assert misreadings("The mean was 56.98 USD in March.", {"mean_sep": 56.98}) != []
    assert misreadings("The mean was 56.98 in July.", {"web_mean": 56.98}) == []  # a name without a month
    assert misreadings("Orders grew from 6335.57 in July to 6634.01 in December.",  # v14's node 3, read right
                       {"monthly_mean_2024-07": 6335.57, "monthly_mean_2024-12": 6634.01}) == []


def test_a_comparison_without_a_number_is_found() -> None:
    """v15's node 7 printed the consumers' mean income alone and concluded, wrongly, that it is higher than the
    business segment's; no number in the sentence, so no number check could refuse it."""
    from worldsmith.core.claim_numbers import unnumbered_comparisons

    claim = ("The mean basket size is higher for the business segment compared to the consumer segment. The mean "
             "income of consumer segments is higher than the mean income of business segments.")
    assert unnumbered_comparisons(claim) == [
        "The mean basket size is higher for the business segment compared to the consumer segment.",
        "The mean income of consumer segments is higher than the mean income of business segments."]
    assert unnumbered_comparisons("Business baskets are larger than consumer ones (3.32 against 1.92).") == []
    assert unnumbered_comparisons("The monthly mean of amount fell from 62.69 in January to 53.72 in December.") == []
    assert unnumbered_comparisons("The correlation is weak; more data would help.") == []
