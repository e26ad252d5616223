"""core/result_lines: a script's prints of a label and one value become `RESULT name = value` prints, by syntax,
with every other character kept; what the rewritten script prints is checked by running it."""

from __future__ import annotations

import subprocess
import sys

from worldsmith.core.claim_numbers import parse_results
from worldsmith.core.result_lines import HELPER, as_result_lines

# the two v13 solver scripts that printed the right numbers their own way (trimmed to their prints)
SCRIPT = """import statistics  # the join — kept as written
r = 0.8294268505308654
print("joined:", 1000, "of", 1000, "rows of data/orders_2023.csv")
print("Mean basket_size across segment in the 2023 orders:")
print("basket_size_amount_corr:", r)  # the teacher's print
means = {"business": 3.20191, "consumer": 2.02105, "small biz": 1.5}
for segment, mean in means.items():
    print(f"segment {segment} = {mean:.2f}")
print(f"Mean amount: {statistics.mean([1, 2, 4]):.3f}"); print("done")
print(f"{r}")
print("note =", "text")
"""


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_labelled_prints_become_result_lines_at_full_precision() -> None:
    new, n = as_result_lines(SCRIPT)
    assert n == 3
    out = _run(new)
    assert parse_results(out) == {"basket_size_amount_corr": 0.8294268505308654, "segment_business": 3.20191,
                                  "segment_consumer": 2.02105, "segment_small_biz": 1.5,
                                  "Mean_amount": 7 / 3}
    # the other prints print as before
    for line in ("joined: 1000 of 1000 rows of data/orders_2023.csv",
                 "Mean basket_size across segment in the 2023 orders:", "done", "0.8294268505308654", "note = text"):
        assert line in out.splitlines()
    # only the rewritten calls changed: comments and the rest are as written
    assert "import statistics  # the join — kept as written" in new and "# the teacher's print" in new
    assert new.startswith(HELPER)  # the rewritten prints call it
    kept = [a for a, b in zip(SCRIPT.splitlines(), new.removeprefix(HELPER).splitlines()) if a == b]
    assert len(kept) == len(SCRIPT.splitlines()) - 3


def test_scripts_without_labelled_values_or_that_do_not_parse_are_left_alone() -> None:
    plain = "x = 3\nprint(x)\nprint('total', x, 'units')\nprint(f'{x} items')\n"
    assert as_result_lines(plain) == (plain, 0)
    broken = "print('r:', r\n"
    assert as_result_lines(broken) == (broken, 0)
    # already a RESULT line: no label separator before the value, so untouched
    done = "r = 1\nprint(f'RESULT r = {r}')\n"
    assert as_result_lines(done) == (done, 0)


def test_a_label_printed_alone_then_its_value_on_the_next_line_become_one_result_line() -> None:
    # v14's teacher printed the right r three times this way, and was lost for printing no RESULT line
    script = ('import statistics\nr = 0.3720349515530092\ntable = {"a": 1}\n'
              'print("RESULT Correlation between Amount and Income:")\nprint(r)\n'
              'print("Means by month:")\nprint(table)\n'
              'if r > 0:\n    print("mean of three:")\n    print(statistics.mean([1, 2, 4]))\n'
              'print("Header:")\n\nprint(r)\n'  # a blank line between: not a pair
              'print("just a heading:")\nprint("a text")\n')
    new, n = as_result_lines(script)
    assert n == 3
    out = _run(new)
    assert parse_results(out) == {"Correlation_between_Amount_and_Income": 0.3720349515530092, "mean_of_three": 7 / 3}
    assert "RESULT Means_by_month = {'a': 1}" in out.splitlines()  # not a number: no RESULT value parsed from it
    assert "Header:" in out.splitlines() and "just a heading:" in out.splitlines() and "a text" in out.splitlines()


def test_a_table_printed_after_its_label_becomes_one_result_line_a_row() -> None:
    """v15's teacher printed `print("RESULT mean_income_by_segment =", frame)` with a frame of segments and their
    means, three times, and was lost for printing no RESULT line. The values are checked against plain pandas."""
    script = ('''from __future__ import annotations
import pandas as pd
df = pd.DataFrame({"segment": ["business", "consumer", "business", "small biz"], "income": [50.0, 40.0, 70.0, 9.0]})
frame = df.groupby("segment")["income"].mean().reset_index(name="mean_income")
print("RESULT mean_income_by_segment =", frame)
print("medians:", df.groupby("segment")["income"].median())
print("overall:", df["income"].mean())
print("wide:", df.assign(units=1.0).describe())
''')
    new, n = as_result_lines(script)
    assert n == 4 and new.startswith("from __future__ import annotations\n" + HELPER)
    out = _run(new)
    import pandas as pd

    df = pd.DataFrame({"segment": ["business", "consumer", "business", "small biz"], "income": [50.0, 40.0, 70.0, 9.0]})
    means, medians = df.groupby("segment")["income"].mean(), df.groupby("segment")["income"].median()
    assert parse_results(out) == {
        **{f"mean_income_by_segment_{k.replace(' ', '_')}": v for k, v in means.items()},
        **{f"medians_{k.replace(' ', '_')}": v for k, v in medians.items()}, "overall": df["income"].mean()}
    assert "RESULT wide =" in out  # a table of numbers only: printed as it was, no number parsed from it
