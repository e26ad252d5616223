"""Which replies count as a degenerate repetition loop (agents/analyst.loop_span): only a reply that ends in one
span written four or more times in a row; tables, like lines and long scripts are not loops."""

from __future__ import annotations

from worldsmith.agents.analyst import loop_cut, loop_span

SENTENCE = "The script is running and the results are being printed correctly. "


def test_a_reply_ending_in_one_sentence_over_and_over_is_a_loop_starting_at_its_first_copy() -> None:
    head = "<think>\nThe output was printed.\n\n"
    reply = head + SENTENCE * 20 + "The script is run"  # cut mid-copy by the token budget
    start, unit = loop_span(reply)
    assert (start, unit) == (len(head), len(SENTENCE))
    cut = loop_cut(reply)
    assert cut.startswith(head + SENTENCE.strip()) and cut.count("The script is running") == 1


def test_like_lines_a_long_script_and_a_loop_that_ended_are_not_loops() -> None:
    per_group = "".join(f'print("RESULT mean_{g} = ", means["{g}"])\n' for g in ("north", "south", "east", "west"))
    assert loop_span(per_group) is None  # four like lines differ in their names
    script = "import pandas as pd\n" + "".join(f"df{i} = pd.read_csv('part{i}.csv')\n" for i in range(60))
    assert loop_span(script) is None
    # the same sentence four times and then something else: it stopped repeating, so it is no loop at the end
    assert loop_span(SENTENCE * 4 + "Then I computed the mean of amount by region and printed it.") is None
    assert loop_span(SENTENCE * 3) is None  # three copies: too few
    assert loop_cut("plain reply") == "plain reply"
