"""The answer guards as pure functions: hand-written answers, cells and data facts (agents/answer_guards.py)."""

from __future__ import annotations

import re
from types import SimpleNamespace

from worldsmith.agents import answer_guards as g
from worldsmith.agents.answer_guards import Cell, DataFacts

FILES = ["/data/sales.csv"]
READ = Cell("df = pd.read_csv('sales.csv')\nprint(df['amount'].sum())", ok=True, observation="60")
FACTS = DataFacts(columns=("region", "price", "quantity", "revenue"),
                  ranges={"price": (2.0, 9.5), "quantity": (1.0, 40.0), "revenue": (10.0, 300.0)})


def kinds(findings) -> list[str]:
    return [f.kind for f in findings]


# --------------------------------------------------------------------------------------------- evidence


def test_no_cell_means_no_evidence() -> None:
    assert g.no_evidence([], FILES).detail == "no code has run"


def test_every_cell_failed_is_no_evidence() -> None:
    failed = Cell("df = pd.read_csv('sales.csv')", ok=False, observation="FileNotFoundError")
    assert g.no_evidence([failed, failed], FILES).detail == "every code cell failed"


def test_a_successful_cell_that_reads_nothing_is_no_evidence() -> None:
    made_up = Cell("df = pd.DataFrame({'amount': [1, 2]})\nprint(df['amount'].sum())", ok=True, observation="3")
    assert g.no_evidence([made_up], FILES).detail == "no code cell that ran read the data files"


def test_reading_a_file_is_evidence_whatever_its_name() -> None:
    assert g.no_evidence([READ], FILES) is None
    odd = Cell("df = pd.read_csv('a=b+c d.csv')\nprint(len(df))", ok=True)
    assert g.no_evidence([odd], ["/in/a=b+c d.csv"]) is None
    by_name = Cell("import sqlite3\ncon = sqlite3.connect('shop.db')", ok=True)
    assert g.no_evidence([by_name], ["/in/shop.db"]) is None


def test_a_variable_a_failed_reading_cell_made_carries_the_data_into_a_later_cell() -> None:
    # the read ran, the next line failed (wrong column): df exists, and the fixed cell uses it
    half = Cell("df = pd.read_csv('sales.csv')\nprint(df['Amount'].sum())", ok=False, observation="KeyError")
    fixed = Cell("total = df['amount'].sum()\nprint(total)", ok=True, observation="60")
    assert g.no_evidence([half, fixed], FILES) is None
    unrelated = Cell("x = 3\nprint(x)", ok=True)
    assert g.no_evidence([half, unrelated], FILES) is not None


def test_no_files_nothing_to_touch() -> None:
    assert g.no_evidence([], []) is None


# --------------------------------------------------------------------------------------------- the worked example


def test_the_worked_examples_names_never_pass_unless_requested() -> None:
    f = g.example_copy("@mean_age[41.27] @n_over_60[18]", ["total"], [READ])
    assert f is not None and f.kind == "example_copy" and "@mean_age" in f.detail and "@n_over_60" in f.detail
    assert g.example_copy("@mean_age[37.5]", ["mean_age"], [READ]) is None  # requested: an ordinary name


def test_the_worked_examples_sentence_is_a_copy() -> None:
    answer = "The average age is 41.27 and 18 people are older than 60.\n@total[60]"
    assert g.example_copy(answer, ["total"], [READ]).detail.startswith("it repeats the sentence")


def test_the_examples_value_under_a_requested_name_is_a_copy_unless_an_output_shows_it() -> None:
    assert g.example_copy("@total[41.27]", ["total"], [READ]) is not None  # the output showed 60
    shown = Cell("print(df['x'].mean())", ok=True, observation="41.27")
    assert g.example_copy("@total[41.27]", ["total"], [READ, shown]) is None
    in_a_year = Cell("print(2018)", ok=True, observation="2018")  # 18 inside 2018 is not 18
    assert g.example_copy("@count[18]", ["count"], [in_a_year]) is not None


# --------------------------------------------------------------------------------------------- names


def test_names_outside_the_request_fire_and_missing_ones_are_left_to_the_format_check() -> None:
    f = g.extra_names("@total[60] @sum[60]", ["total"])
    assert f.kind == "names" and f.detail.startswith("@sum,")
    assert g.extra_names("@total[60]", ["total", "mean"]) is None  # missing: answer_problems says so
    assert g.extra_names("@anything[1]", []) is None  # nothing requested
    assert g.extra_names("@total[60] @mean_age[41.27]", ["total"]) is None  # the worked example's: example_copy


# --------------------------------------------------------------------------------------------- self-correlation


def test_the_target_named_as_its_own_strongest_correlate_fires() -> None:
    q = "Which numeric column is most strongly correlated with revenue? Answer as @column[name]."
    f = g.self_correlation("@column[revenue]", q, ["column"], FACTS)
    assert f is not None and "revenue" in f.detail
    assert g.self_correlation("@column[price]", q, ["column"], FACTS) is None


def test_a_column_among_the_candidates_is_not_the_target() -> None:
    q = "Of price and quantity, which correlates more strongly with revenue? Answer as @column[name]."
    assert g.correlation_targets(q, FACTS.columns) == ["revenue"]
    assert g.self_correlation("@column[quantity]", q, ["column"], FACTS) is None
    assert g.self_correlation("@column[Revenue]", q, ["column"], FACTS) is not None  # case does not hide it


def test_not_a_correlation_question_never_fires() -> None:
    assert g.self_correlation("@column[revenue]", "Which column has most missing values?", ["column"], FACTS) is None


# --------------------------------------------------------------------------------------------- out of range


def test_a_mean_outside_the_columns_range_fires() -> None:
    q = "What is the mean price? Answer as @mean_price[value] rounded to two decimals."
    f = g.out_of_range("@mean_price[12.40]", q, ["mean_price"], FACTS)
    assert f is not None and "price" in f.detail and "2 to 9.5" in f.detail
    assert g.out_of_range("@mean_price[5.25]", q, ["mean_price"], FACTS) is None


def test_rounding_of_an_extreme_is_not_out_of_range() -> None:
    facts = DataFacts(columns=("price",), ranges={"price": (0.123, 9.5)})
    q = "What is the minimum price? Answer as @min_price[value] rounded to two decimals."
    assert g.out_of_range("@min_price[0.12]", q, ["min_price"], facts) is None  # 0.123 shown at 2 decimals
    assert g.out_of_range("@min_price[0.11]", q, ["min_price"], facts) is not None


def test_the_column_comes_from_the_question_when_the_name_does_not_say() -> None:
    q = "What is the median quantity ordered? Answer as @answer[value]."
    assert g.out_of_range("@answer[55]", q, ["answer"], FACTS) is not None


def test_derived_quantities_are_not_range_checked() -> None:
    assert g.out_of_range("@total_revenue[5000]", "What is the total revenue?", ["total_revenue"], FACTS) is None
    assert g.out_of_range("@mean_price[0.0]", "Standardize price, then give its mean. @mean_price[value]",
                          ["mean_price"], FACTS) is None
    assert g.out_of_range("@std_price[20]", "Give the standard deviation of price.", ["std_price"], FACTS) is None
    assert g.out_of_range("@answer[66.5]", "What is seven times the maximum price?", ["answer"], FACTS) is None


def test_data_facts_keep_no_range_from_a_sampled_table() -> None:
    col = lambda name, lo, hi: SimpleNamespace(name=name, semantic_type="numeric", min=lo, max=hi)  # noqa: E731
    text = SimpleNamespace(name="city", semantic_type="categorical", min=None, max=None)
    ws = SimpleNamespace(tables=[SimpleNamespace(sampled=False, columns=[col("a", 1, 5), text], label="x.csv"),
                                 SimpleNamespace(sampled=False, columns=[col("a", -2, 3)], label="y.xlsx[s1]"),
                                 SimpleNamespace(sampled=True, columns=[col("b", 0, 1)], label="z.csv")])
    facts = DataFacts.from_profile(ws)
    assert facts.columns == ("a", "city", "b") and facts.ranges == {"a": (-2.0, 5.0)}
    assert facts.tables == {"x.csv": ("a", "city"), "y.xlsx[s1]": ("a",), "z.csv": ("b",)}
    assert DataFacts.from_state(facts.to_state()) == facts


# --------------------------------------------------------------------------------------------- the check node's rule


def test_check_answer_lists_findings_in_order_and_pick_respects_budgets() -> None:
    found = g.check_answer("@mean_age[41.27] @n_over_60[18]", "What is the total?", ["total"], [], FILES, FACTS)
    assert kinds(found) == ["no_evidence", "example_copy"]  # the example's names are the copy guard's alone
    found = g.check_answer("@mean_age[41.27] @sum[60]", "What is the total?", ["total"], [], FILES, FACTS)
    assert kinds(found) == ["no_evidence", "example_copy", "names"]
    assert g.pick_reask(found, set(), format_first=False).kind == "no_evidence"
    assert g.pick_reask(found, {"no_evidence"}, format_first=False).kind == "example_copy"
    assert g.pick_reask(found, {"no_evidence", "example_copy", "names"}, format_first=False) is None
    late = [g.Finding("out_of_range", "x")]
    assert g.pick_reask(late, set(), format_first=True) is None  # format problems take the turn first
    assert g.blocks(kinds(found)) and not g.blocks(["names", "out_of_range"])


def test_every_guard_has_feedback_that_names_the_request() -> None:
    for kind in g.ORDER:
        text = g.feedback(g.Finding(kind, "DETAIL"), ["total"])
        # the report guard fires only where no @names are asked
        assert "DETAIL" in text and ("@total[value]" in text or kind in ("no_evidence", "report_sources"))


def test_profile_facts_read_the_real_profiler(tmp_path) -> None:
    p = tmp_path / "shop.csv"
    p.write_text("city,price,quantity\nOslo,2.5,10\nRome,8,3\nLima,4,7\n")
    facts = g.profile_facts([str(p)])
    assert facts.columns == ("city", "price", "quantity")
    assert facts.ranges == {"price": (2.5, 8.0), "quantity": (3.0, 10.0)}
    assert g.profile_facts([str(p)]) is facts  # unchanged file: not profiled again
    p.write_text("city,price,quantity\nOslo,2.5,10\nRome,80,3\n")
    assert g.profile_facts([str(p)]).ranges["price"] == (2.5, 80.0)


def test_respelled_merge_note_fires_only_for_an_unmatched_merge_on_a_respelled_key(tmp_path) -> None:
    from worldsmith.agents.analyst import respelled_merges
    from worldsmith.agents.answer_guards import profile_facts

    (tmp_path / "a.csv").write_text("site_id,v\n" + "".join(f"S-{i:05d},{i}\n" for i in range(1, 6)))
    (tmp_path / "b.csv").write_text("site_id,w,region\n" + "".join(f"SITE_{i},{i},r{i % 2}\n" for i in range(1, 6)))
    facts = profile_facts([str(tmp_path / "a.csv"), str(tmp_path / "b.csv")])
    assert set(facts.respelled) == {"site_id"}
    assert facts.respelled["site_id"] == "a.csv 'S-00001', b.csv 'SITE_1'"
    merge = "m = a.merge(b, on='site_id')\nprint(m['v'].mean())"
    assert respelled_merges(merge, "nan\n", facts.respelled) == ["site_id"]
    assert respelled_merges(merge, "Empty DataFrame\nColumns: [site_id, v, w]\nIndex: []\n", facts.respelled)
    assert respelled_merges(merge, "3.0\n", facts.respelled) == []  # it matched: nothing to say
    rebuilt = "a['k'] = a['site_id'].str.extract(r'(\\d+)')\n" + merge
    assert respelled_merges(rebuilt, "nan\n", facts.respelled) == []  # the ids were rebuilt
    other = "m = a.merge(b, on='region')\nprint(m['v'].mean())"
    assert respelled_merges(other, "nan\n", facts.respelled) == []  # not a respelled key
    assert respelled_merges("print(a['site_id'].mean())", "nan\n", facts.respelled) == []  # no merge


def test_a_column_compared_with_a_text_it_does_not_hold_gets_its_values(tmp_path) -> None:
    """The 1.5B model filtered `department == "engineering"` where the data codes it 'ENG' (the memo said so), got
    NaN and looped. The note lists the column's values; a text it holds, or a column whose values the profile
    does not know in full, gets nothing."""
    from worldsmith.agents.analyst import compared_literals, observation_text, unheld_values
    from worldsmith.agents.answer_guards import profile_facts
    from worldsmith.tools.sandbox.base import ExecResult

    (tmp_path / "hr.csv").write_text("emp,department,city\n" + "".join(
        f"E{i},{['ENG', 'OPS', 'SLS'][i % 3]},c{i}\n" for i in range(60)))
    facts = profile_facts([str(tmp_path / "hr.csv")])
    assert sorted(facts.values["department"]) == ["ENG", "OPS", "SLS"]
    assert "city" not in facts.values  # 60 distinct cities: not listed in full, so nothing is claimed about them
    code = ("eng = df[df['department'] == \"engineering\"]\nops = df[df.department != 'OPS']\n"
            "both = df[df['department'].isin(['ENG', 'sales'])]\nx = df[df['city'] == 'nowhere']")
    assert compared_literals(code) == [("department", "engineering"), ("department", "OPS"), ("department", "ENG"),
                                       ("department", "sales"), ("city", "nowhere")]
    notes = unheld_values(code, facts.values)
    assert len(notes) == 2 and notes[0].startswith("'engineering' is not a value of `department` (its values: ")
    assert all(v in notes[0] for v in ("'ENG'", "'OPS'", "'SLS'")) and notes[1].startswith("'sales' is not")
    text = observation_text(ExecResult(ok=True, stdout="nan\n"), 2000, facts, code=code)
    assert "'engineering' is not a value of `department`" in text and "Compare with the data's own values" in text
    assert "not a value" not in observation_text(ExecResult(ok=True, stdout="3\n"), 2000, facts,
                                                 code="df[df['department'] == 'ENG']")


def test_a_text_a_memo_spells_otherwise_gets_the_datas_value(tmp_path) -> None:
    """generated-v1 at eb32daa: told "'private' is not a value of `school_type` (its values: 'state',
    'independent')" with the memo's line elsewhere in the turn, the 1.5B model compared with 'private' four more
    times. When a memo item says which value stands for the text, the note names it."""
    from worldsmith.agents.analyst import observation_text
    from worldsmith.agents.answer_guards import profile_facts
    from worldsmith.tools.sandbox.base import ExecResult

    (tmp_path / "schools.csv").write_text("school,school_type\n" + "".join(
        f"s{i},{['state', 'independent'][i % 2]}\n" for i in range(20)))
    (tmp_path / "schools.md").write_text('# Notes\n\n- This export labels `school_type` its own way: "state" means '
                                         '"public", "independent" means "private".\n')
    facts = profile_facts([str(tmp_path / "schools.csv"), str(tmp_path / "schools.md")])
    code = "a = df[df['school_type'] == 'private']\nb = df[df['school_type'] == 'public']\nprint(len(a), len(b))"
    text = observation_text(ExecResult(ok=True, stdout="0 0\n"), 2000, facts, code=code)
    assert "'private' is not a value of `school_type`" in text
    assert "schools.md says 'independent' stands for 'private': compare with 'independent'" in text
    assert "schools.md says 'state' stands for 'public': compare with 'state'" in text


def test_unshown_numbers_by_hand() -> None:
    from worldsmith.agents.answer_guards import Cell, unshown

    cells = [Cell("print(a)", True, "engineering mean 85349.2\noperations mean 61184.6\n"),
             Cell("print(b)", False, "10253.0\nKeyError: 'x'")]  # a failed cell's output backs nothing
    assert unshown("@gap[24164.6]", ["gap"], cells) is not None  # the difference was never printed
    assert unshown("@gap[10253]", ["gap"], cells).detail == "@gap[10253]"
    assert unshown("@mean[85349]", ["mean"], cells) is None  # 85349.2 at the answer's precision
    # v15's teacher printed r = 0.8462576394538522 and answered 0.84 three times: cut, not rounded
    r = [Cell(code="print(r)", ok=True, observation="0.8462576394538522")]
    assert unshown("@r[0.84]", ["r"], r).detail == (
        "@r[0.84] (the printed 0.8462576394538522 rounds to 0.85 at 2 decimal places)")
    assert unshown("@r[0.85]", ["r"], r) is None
    assert unshown("@r[0.71]", ["r"], r).detail == "@r[0.71]"  # not a rounding of anything printed
    assert unshown("@mean[85349.2]", ["mean"], cells) is None
    assert unshown("@mean[85349.9]", ["mean"], cells) is not None  # not within half its last place (0.05)
    assert unshown("@n[3]", ["n"], cells) is None  # a small whole number is a count or a label: not checked
    assert unshown("@kind[engineering]", ["kind"], cells) is None  # a name the output shows
    assert unshown("@gap[10253] @other[1]", ["other"], cells) is None  # only the requested names are checked


def test_unshown_named_values_by_hand() -> None:
    """dabench-252: the 0.5B student printed one skewness and named the first country of the prompt's sample rows."""
    from worldsmith.agents.answer_guards import Cell, unshown

    q = ('Determine which country had the highest skewness.\n@highest_skewness_country[country_name] where '
         '"country_name" is a string')
    skew = [Cell('print(df["gdpPercap_1992"].skew())', True, "1.2307354913526567")]
    assert unshown("@highest_skewness_country[Afghanistan]", ["highest_skewness_country"], skew, q).detail == (
        "@highest_skewness_country[Afghanistan]")
    table = [Cell("print(s.sort_values().tail(2))", True, "country\nJapan      1.91\nSaudi Arabia    2.30\n")]
    assert unshown("@highest_skewness_country[Saudi Arabia]", ["highest_skewness_country"], table, q) is None
    assert unshown("@highest_skewness_country[saudi arabia.]", ["highest_skewness_country"], table, q) is None
    assert unshown("@c[Japan, Saudi Arabia]", ["c"], table, q) is None  # each part shown
    assert unshown("@c[Japan, India]", ["c"], table, q).detail == "@c[Japan, India]"  # India is not
    assert unshown("@c[Arabia]", ["c"], [Cell("print(x)", True, "Arabian")], q) is not None  # whole words only
    failed = [Cell("print(x)", False, "Saudi Arabia\nKeyError: 'y'")]  # a failed cell's output backs nothing
    assert unshown("@c[Saudi Arabia]", ["c"], failed, q) is not None
    normal = 'Is it normal? @normality[result] where "result" is "Normal" or "Not Normal".'
    assert unshown("@normality[Not Normal]", ["normality"], skew, normal) is None  # a choice the question writes
    for judgement in ("Yes", "false", "None"):  # a test's outcome, shown as a p-value or a bool
        assert unshown(f"@normal[{judgement}]", ["normal"], skew, q) is None
    for mixed in ("2019-03-04", "Q3 2020", "[1, 2]"):  # dates and mixed values are not names
        assert unshown(f"@d[{mixed}]", ["d"], skew, q) is None


def test_the_answer_lines_example_value_unshown_is_an_example_copy() -> None:
    """The 1.5B model answered @marketing_lag_corr[0.43], the answer line's own "e.g. 0.43", which no cell printed."""
    from worldsmith.agents.answer_guards import Cell, check_answer, format_example_copy

    q = "The lagged correlation. End your answer with @lag_corr[value as a correlation coefficient, e.g. 0.43]"
    cells = [Cell("df = pd.read_csv('d.csv')\nprint(df['x'].corr(df['y']))", True, "0.2822\n")]
    f = format_example_copy("@lag_corr[0.43]", q, ["lag_corr"], cells)
    assert f is not None and f.kind == "example_copy" and "@lag_corr[0.43] is the example value" in f.detail
    assert format_example_copy("@lag_corr[0.28]", q, ["lag_corr"], cells) is None  # its own number
    shown = [Cell("print(r)", True, "0.43\n")]
    assert format_example_copy("@lag_corr[0.43]", q, ["lag_corr"], shown) is None  # computed: the same by chance
    assert format_example_copy("@lag_corr[0.43]", "Answer as @lag_corr[value].", ["lag_corr"], cells) is None
    pct = "Answer as @share[value in percent, e.g. 12.5%]"
    assert format_example_copy("@share[12.5%]", pct, ["share"], cells) is not None
    # through the guard list: an example copy blocks, so the answer is re-asked, then unsupported
    assert [x.kind for x in check_answer("@lag_corr[0.43]", q, ["lag_corr"], cells, ["d.csv"])] == ["example_copy"]


def test_the_answer_lines_description_written_back_is_an_example_copy() -> None:
    """generated-v1 at 453da4c: the 1.5B model ended with @adherence_ae_lag[value as a correlation coefficient
    (unitless, between -1 and 1), e.g. 0.432] — the answer line itself, no number — and it was graded as an answer."""
    from worldsmith.agents.answer_guards import Cell, check_answer, format_example_copy

    line = "value as a correlation coefficient (unitless, between -1 and 1), e.g. 0.432"
    q = f"The lag-1 correlation. End your answer with @adherence_ae_lag[{line}]"
    cells = [Cell("df = pd.read_csv('d.csv')\nprint(df['x'].corr(df['y']))", True, "0.1771\n")]
    f = format_example_copy(f"@adherence_ae_lag[{line}]", q, ["adherence_ae_lag"], cells)
    assert f is not None and f.kind == "example_copy" and "description of the value" in f.detail
    # the first words are enough: a copy cut short, or with the example dropped
    assert format_example_copy("@adherence_ae_lag[Value as a correlation coefficient]", q, ["adherence_ae_lag"],
                               cells) is not None
    assert format_example_copy("@adherence_ae_lag[0.177]", q, ["adherence_ae_lag"], cells) is None
    # a bare "value" in the answer line is the template's word: answering "value" is the format check's business
    assert format_example_copy("@r[value]", "Answer as @r[value].", ["r"], cells) is None
    assert [x.kind for x in check_answer(f"@adherence_ae_lag[{line}]", q, ["adherence_ae_lag"], cells,
                                         ["d.csv"])] == ["example_copy"]


def _pandas_error(fn) -> object:  # noqa: ANN001
    """The ExecError the sandbox would report for what `fn` raises in real pandas."""
    from worldsmith.tools.sandbox.base import ExecError

    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return ExecError(type=type(e).__name__, message=str(e))
    raise AssertionError("expected an error")


def test_pandas_date_slips_get_their_notes() -> None:
    """Dates written two ways across tables (2023-01-02 and 2023/01/02) with a fixed format=, and `.dt` on text
    dates: the 1.5B model repeated the failing cell five times. Errors raised by pandas itself."""
    import pandas as pd

    from worldsmith.agents.analyst import pandas_notes

    mixed = pd.Series(["2023-01-02", "2023/01/09"])
    fmt = _pandas_error(lambda: pd.to_datetime(mixed, format="%Y-%m-%d"))
    assert 'format="mixed"' in pandas_notes("pd.to_datetime(df['period'], format='%Y-%m-%d')", fmt)
    text = _pandas_error(lambda: pd.Series(["2023-01-02"]).dt.month)
    note = pandas_notes("df['date'].dt.month", text)
    assert "holds dates as text" in note and "written in the format you gave" not in note
    other = _pandas_error(lambda: pd.Series([1]).loc[5])
    assert pandas_notes("s.loc[5]", other) == ""


def test_text_dates_compared_with_a_date_get_parsed_in_place() -> None:
    """At f4ca853 `df["date"] >= pd.Timestamp("2024-02-01")` on dates read as text raised, and the 1.5B model loaded
    the file again to parse them, losing the session's unit change. The note's two lines, run on such a frame,
    keep the rows on or after the date (2 of 3, by hand). Errors raised by pandas and Python."""
    import pandas as pd

    from worldsmith.agents.analyst import pandas_notes

    df = pd.DataFrame({"date": ["2024-01-15", "2024/02/03", "2024-03-01"], "hours": [1.0, 2.0, 4.0]})
    for fn in (lambda: df[df["date"] >= pd.Timestamp("2024-02-01")], lambda: "2024-01-15" < pd.Timestamp("2024-02-01")):
        note = pandas_notes('df[df["date"] >= pd.Timestamp("2024-02-01")]', _pandas_error(fn))
        assert "no need to load the file again" in note
    lines = re.findall(r"`([^`]+)`", note)
    ns = {"pd": pd, "df": df.copy()}
    exec(lines[0].replace('"col"', '"date"'), ns)  # noqa: S102
    assert eval(lines[1].replace('"col"', '"date"'), ns)["hours"].tolist() == [2.0, 4.0]  # noqa: S307
    assert "no need to load" not in pandas_notes("x", _pandas_error(lambda: 1 < "a"))  # not a date: no note


def test_a_date_method_on_text_names_both_causes() -> None:
    """v14's dual-evidence solver looped over `frame.items()` of a one-column DataFrame of monthly means and called
    `.strftime` on what it got (the column's name) until its attempts ran out. Errors raised by Python and pandas."""
    import pandas as pd

    from worldsmith.agents.analyst import pandas_notes

    def loop() -> None:
        frame = pd.DataFrame({"amt": [1.0, 2.0]}, index=pd.to_datetime(["2024-01-01", "2024-02-01"]))
        for date, _ in frame.items():
            date.strftime("%Y-%m")

    note = pandas_notes("for date, mean in monthly.items(): date.strftime('%Y-%m')", _pandas_error(loop))
    assert 'frame["col"].items()' in note and 'pd.to_datetime(df["col"]' in note
    # `.resample()` on text dates, or with the month-end "M" pandas 3 no longer takes: the month grouping, which runs
    df = pd.DataFrame({"date": ["2024-01-05", "2024-01-20", "2024-02-01"], "col": [1.0, 3.0, 10.0]})
    for fn in (lambda: df.set_index("date").resample("ME").mean(), lambda: df.resample("M", on="date").mean()):
        note = pandas_notes("df.resample(...)", _pandas_error(fn))
        call = note[note.index("df.groupby("):note.index(".mean()") + len(".mean()")]
        assert eval(call, {"pd": pd, "df": df}).to_dict() == {pd.Period("2024-01", "M"): 2.0,  # noqa: S307
                                                                pd.Period("2024-02", "M"): 10.0}
    year = _pandas_error(lambda: pd.Series(["2024-01-01"]).map(lambda d: d.year))
    assert "That value is text, not a date" in pandas_notes("df['d'].map(lambda d: d.year)", year)
    assert "not a date" not in pandas_notes("x.upper_case()", _pandas_error(lambda: "a".upper_case()))


def test_a_series_method_on_one_number_and_str_on_numbers_are_named() -> None:
    """v14's validator check took `df["amount"].median()` (one number) and looped over its `.items()`; a check
    that never runs leaves the finding unchecked. Errors raised by pandas and numpy themselves."""
    import pandas as pd

    from worldsmith.agents.analyst import pandas_notes

    df = pd.DataFrame({"month": ["2024-07", "2024-12"], "amount": [58.74, 55.78]})
    median = df["amount"].median()
    for fn in (lambda: median.items(), lambda: list(iter(median)), lambda: median["2024-07"],
               lambda: float(median).items()):
        note = pandas_notes("for month, m in median_amount.items(): ...", _pandas_error(fn))
        assert "That value is one number" in note and 'df.groupby("key")["col"].median()' in note
    # `.str` cleaning of a column pandas read as numbers (v16's check on `amount`), which needs none
    for column in (df["amount"], pd.Series([1, 2]), pd.Series([True, False])):
        note = pandas_notes('df["amount"].str.replace(",", "")', _pandas_error(lambda c=column: c.str.replace(",", "")))
        assert "That column already holds numbers" in note
    assert "already holds numbers" not in pandas_notes("s.str.x", _pandas_error(lambda: pd.Series(["a"]).str.x))
    # the grouping it shows gives a value per group
    assert df.groupby("month")["amount"].median().to_dict() == {"2024-07": 58.74, "2024-12": 55.78}
    assert "one number" not in pandas_notes("s.items()", _pandas_error(lambda: "a".items()))


def test_a_classification_metric_on_regression_output_is_named() -> None:
    """A solver fitted LinearRegression to a 0/1 target and called accuracy_score on its predictions five times.
    Errors raised by scikit-learn itself; the classifier the note names gives labels the metric takes."""
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.metrics import accuracy_score

    from worldsmith.agents.analyst import pandas_notes

    X, y = [[0.0], [1.0], [2.0], [3.0]], [0, 0, 1, 1]
    continuous = LinearRegression().fit(X, y).predict(X)
    note = pandas_notes("accuracy_score(y_test, y_pred)", _pandas_error(lambda: accuracy_score(y, continuous)))
    assert "The predictions are continuous numbers" in note and "`LogisticRegression`" in note
    assert accuracy_score(y, LogisticRegression().fit(X, y).predict(X)) == 1.0
    assert "continuous" not in pandas_notes("accuracy_score(a, b)", _pandas_error(lambda: accuracy_score([0, 1], [0])))


def test_error_output_pasted_back_as_a_cell_is_named() -> None:
    """v14's teacher pasted each SyntaxError back as its next cell, eight turns: each failed on the pasted frame."""
    from worldsmith.agents.analyst import observation_notes
    from worldsmith.tools.sandbox.base import ExecError, ExecResult

    def ran(code: str):
        try:
            compile(code, "<cell-4>", "exec")
        except SyntaxError as exc:
            return ExecResult(ok=False, stdout="", error=ExecError(type=type(exc).__name__, message=str(exc),
                                                                    traceback=""))
        return ExecResult(ok=True, stdout="")

    echo = 'File "<cell-3>", line 13\n    correlation = df["amount"].\nSyntaxError: invalid syntax'
    assert "the error message itself, pasted back" in observation_notes(ran(echo), DataFacts(), echo)
    traceback = "Traceback (most recent call last):\n  File \"<cell-2>\", line 1\nKeyError: 'x'"
    assert "pasted back" in observation_notes(ran(traceback), DataFacts(), traceback)
    slip = 'x = df["amount"].'
    assert "pasted back" not in observation_notes(ran(slip), DataFacts(), slip)


def test_a_text_column_in_a_numeric_operation_gets_the_numeric_forms() -> None:
    """generated-v1: `df.corr()` over a joined frame with its id columns raised "could not convert string to float:
    'S-00001'", and the 1.5B model ran the same cell four times. Errors raised by pandas itself."""
    import pandas as pd

    from worldsmith.agents.analyst import pandas_notes

    df = pd.DataFrame({"id": ["S-00001", "S-00002", "S-00003"], "a": [1.0, 2.0, 4.0], "b": [2.0, 3.0, 9.0]})
    for code, fn in [("df.corr()", df.corr), ("df.mean()", df.mean),
                     ("df.groupby('a').mean()", lambda: df.groupby("a").mean()),
                     ("df['id'].astype(float)", lambda: df["id"].astype(float))]:
        note = pandas_notes(code, _pandas_error(fn))
        assert 'df["a"].corr(df["b"])' in note and "numeric_only=True" in note, code
    assert "numeric_only" not in pandas_notes("df.loc[7]", _pandas_error(lambda: df.loc[7]))


def test_an_argument_a_call_does_not_take_is_named() -> None:
    """`df["a"].corr(df["b"], ddof=0)`: three falsification checks of embedded evolution runs crashed on it."""
    import pandas as pd

    from worldsmith.agents.analyst import pandas_notes

    s = pd.Series([1.0, 2.0, 4.0])
    note = pandas_notes("s.corr(s, ddof=0)", _pandas_error(lambda: s.corr(s, ddof=0)))
    assert "`Series.corr()` takes no argument `ddof`" in note
    assert "takes no argument" not in pandas_notes("s.loc[7]", _pandas_error(lambda: s.loc[7]))


def test_a_name_a_memo_says_another_column_holds_gets_that_memo_line_after_a_keyerror(tmp_path) -> None:
    """generated-v1: the task turn quoted "The column `amount_due` holds `bill_usd`.", and the 1.5B model still
    looked `bill_usd` up three times. The KeyError now quotes the item; an item naming no column of the data, or a
    key that is a column, gets nothing."""
    from worldsmith.agents.analyst import observation_text
    from worldsmith.agents.answer_guards import documented_columns, profile_facts
    from worldsmith.tools.sandbox.base import ExecError, ExecResult

    (tmp_path / "billing.csv").write_text("household_id,amount_due\nH-1,10.5\nH-2,7.25\n")
    (tmp_path / "billing.md").write_text("# Notes on billing\n\n- The column `amount_due` holds `bill_usd`.\n"
                                         "- `bill_usd` is in USD.\n- Ids look like `H-1`.\n")
    facts = profile_facts([str(tmp_path / "billing.csv"), str(tmp_path / "billing.md")])
    said = "billing.md says: The column `amount_due` holds `bill_usd`."
    assert documented_columns("bill_usd", facts) == [said]
    failed = ExecResult(error=ExecError(type="KeyError", message="'bill_usd'"))
    text = observation_text(failed, 2000, facts, code="df['bill_usd'].mean()")
    assert said in text and "Use that column" in text and "`bill_usd` is in USD" not in text
    other = ExecResult(error=ExecError(type="KeyError", message="'amount_due'"))
    assert "the documents say" not in observation_text(other, 2000, facts, code="x['amount_due']")
    # the facts survive the graph state's round trip
    assert DataFacts.from_state(facts.to_state()).documents == facts.documents


REPORT_Q = ("Question: how strongly are amount and income correlated?\n\nWrite a Markdown report (`answer.md`) that "
            "answers the question: state each number you computed with its definition, explain how you computed it, "
            "and say what it means and which caveats apply.")


def test_a_report_that_names_none_of_the_files_its_code_read_is_sent_back(tmp_path) -> None:
    data = tmp_path / "data"  # a task's inputs: its workspace's top-level entries, here one folder
    (data / "memos").mkdir(parents=True)
    for name in ("orders_2023.csv", "crm.xlsx", "README.md", "memos/crm.md"):
        (data / name).write_text("x\n")
    files = [str(data)]
    ran = [g.Cell("o = pd.read_csv('data/orders_2023.csv')\nc = pd.read_excel('data/crm.xlsx')", ok=True),
           g.Cell("pd.read_csv('data/README.md')", ok=False)]  # failed: not a file it read
    bare = "Over the data, the correlation between amount and income is 0.4672."  # the folder's name is no file
    [f] = [x for x in g.check_answer(bare, REPORT_Q, [], ran, files) if x.kind == "report_sources"]
    assert f.detail == "crm.xlsx, orders_2023.csv"  # the files inside the folder, not "data"
    assert "name the data files your code read (crm.xlsx, orders_2023.csv)" in g.feedback(f, [])
    for named in ("From orders_2023.csv joined to the CRM: r = 0.4672 (Pearson).", "Source: the orders_2023 table."):
        assert g.report_sources(named, REPORT_Q, [], ran, files) is None
    assert g.report_sources(bare, REPORT_Q, ["r"], ran, files) is None  # a closed form: its tags are its answer
    assert g.report_sources(bare, "What is r? Answer as @r[value].", [], ran, files) is None  # no report asked
    assert g.report_sources(bare, REPORT_Q, [], ran[1:], files) is None  # no cell that ran read a file: not this


def test_a_keyerror_on_a_key_other_tables_hold_under_another_name_gets_the_two_names(tmp_path) -> None:
    """26 failed evolution scripts merged the orders with crm on `customer_id`, which the orders call `acct_ref`;
    the note said only "merge on a column both of them have", and they have none. The link comes from the file
    profiler's join detection over the files themselves."""
    import pandas as pd

    from worldsmith.agents.analyst import observation_notes
    from worldsmith.agents.answer_guards import DataFacts, profile_facts
    from worldsmith.tools.sandbox.base import ExecError, ExecResult

    ids = [f"C-{i:03d}" for i in range(1, 41)]
    pd.DataFrame({"order_id": [f"O-{i:04d}" for i in range(120)], "acct_ref": [ids[i % 40] for i in range(120)],
                  "amount": [float(i % 17) for i in range(120)]}).to_csv(tmp_path / "orders.csv", index=False)
    pd.DataFrame({"customer_id": ids, "segment": ["a", "b"] * 20}).to_csv(tmp_path / "crm.csv", index=False)
    facts = profile_facts([str(tmp_path / "orders.csv"), str(tmp_path / "crm.csv")])
    code = "df = pd.merge(orders, crm, on='customer_id')"
    failed = ExecResult(ok=False, error=ExecError(type="KeyError", message="'customer_id'"))
    note = observation_notes(failed, facts, code)
    assert 'left_on="acct_ref", right_on="customer_id"' in note and "`acct_ref` in orders.csv" in note
    assert DataFacts.from_state(facts.to_state()).links == facts.links  # kept across graph turns
    other = ExecResult(ok=False, error=ExecError(type="KeyError", message="'segmnt'"))
    assert "left_on" not in observation_notes(other, facts, "crm['segmnt']")


def test_columns_picked_by_a_list_of_the_frames_own_columns_get_the_names_form() -> None:
    """`df[[df["distance_km"], df["fare_usd"]]]`: the 1.5B model wrote it for a slope's two columns and repeated it
    until its context was full. The error pandas itself raises; the note's call, run, picks the two columns."""
    import pandas as pd

    from worldsmith.agents.analyst import pandas_notes

    df = pd.DataFrame({"distance_km": [1.0, 2.0], "fare_usd": [3.0, 5.0], "other": [0, 0]})
    code = 'd = df[[df["distance_km"], df["fare_usd"]]].dropna()'
    note = pandas_notes(code, _pandas_error(lambda: df[[df["distance_km"], df["fare_usd"]]]))
    call = note[note.index("Pick columns by their names: `") + 30:note.rindex("`")]
    assert call == 'df[["distance_km", "fare_usd"]]'
    assert list(eval(call, {"df": df}).columns) == ["distance_km", "fare_usd"]  # noqa: S307
    assert pandas_notes('df[["distance_km", "fare_usd"]]', _pandas_error(lambda: df[["nope"]])) == ""
    # one column as a Series, one by name: pandas raises a TypeError, and the note names both
    mixed = 'd = df[[df["distance_km"], "fare_usd"]].dropna()'
    note = pandas_notes(mixed, _pandas_error(lambda: df[[df["distance_km"], "fare_usd"]]))
    assert 'df[["distance_km", "fare_usd"]]' in note


def test_a_write_into_the_read_only_inputs_says_where_to_write() -> None:
    """v18's synthesis solver created `data/metrics` three times on the read-only mount, so its task had fewer than
    two solver runs and was dropped. Errors as Python itself words them (the sandbox reports `str(exc)`)."""
    from worldsmith.agents.analyst import pandas_notes
    from worldsmith.tools.sandbox.base import ExecError

    for exc in (OSError(30, "Read-only file system", "data/metrics"),
                PermissionError(13, "Permission denied", "data/metrics/")):
        note = pandas_notes("os.makedirs('data/metrics')", ExecError(type=type(exc).__name__, message=str(exc)))
        assert "`data/metrics" in note and "read-only" in note and "(e.g. `metrics`)" in note
    other = OSError(2, "No such file or directory", "data/x.csv")
    assert pandas_notes("open('data/x.csv')", ExecError(type="FileNotFoundError", message=str(other))) == ""


def test_a_cell_that_never_reached_the_inputs_is_told_their_load_calls(tmp_path, monkeypatch) -> None:
    """Qwen2.5-Coder-0.5B read the few-shot example's `people.csv` (and `sales.csv`) for several turns, and began
    with `df[...]` before loading anything: the bare errors said nothing of the task's files. The errors are Python's
    own, from running the cells; the suggested load, run, reads the real file."""
    import pandas as pd

    from worldsmith.agents.analyst import observation_notes
    from worldsmith.tools.sandbox.base import ExecError, ExecResult

    monkeypatch.chdir(tmp_path)
    pd.DataFrame({"SibSp": [1, 0], "Parch": [2, 0], "Fare": [7.25, 71.28]}).to_csv("test_ave.csv", index=False)
    facts = DataFacts(columns=("SibSp", "Parch", "Fare"), loads={"test_ave.csv": 'pd.read_csv("test_ave.csv")'})

    def ran(code: str, scope: dict | None = None) -> ExecResult:
        scope = {"pd": pd} if scope is None else scope
        try:
            exec(code, scope)  # noqa: S102 - the test's own cells
        except Exception as exc:  # noqa: BLE001
            return ExecResult(ok=False, stdout="", error=ExecError(type=type(exc).__name__, message=str(exc)))
        return ExecResult(ok=True, stdout="")

    wrong = 'df = pd.read_csv("people.csv")\nprint(df["Fare"].mean())'
    note = observation_notes(ran(wrong), facts, wrong)
    assert "no file `people.csv`" in note
    cell = note[note.index("```python\n") + 10:note.rindex("\n```")]
    assert cell == 'df = pd.read_csv("test_ave.csv")\nprint(df["Fare"].mean())'
    assert ran(cell).ok
    nested = 'df = pd.read_csv("people.csv", usecols=list(range(2)))'  # a read it cannot rewrite: the load call
    note = observation_notes(ran(nested), facts, nested)
    assert 'load calls exactly: pd.read_csv("test_ave.csv").]' in note and "```" not in note
    first = 'df["FamilySize"] = df["SibSp"] + df["Parch"]'
    note = observation_notes(ran(first), facts, first)
    cell = note[note.index("```python\n") + 10:note.rindex("\n```")]
    assert cell.splitlines()[0] == 'df = pd.read_csv("test_ave.csv")'
    scope = {"pd": pd}  # the whole cell again, loaded first: it runs and makes the column the first cell meant
    assert ran(cell, scope).ok and scope["df"]["FamilySize"].tolist() == [3, 0]
    two = DataFacts(loads={"a.csv": 'pd.read_csv("a.csv")', "b.csv": 'pd.read_csv("b.csv")'})
    note = observation_notes(ran(first), two, first)  # which file `df` was meant to be is not known: both loads
    assert 'pd.read_csv("a.csv"); pd.read_csv("b.csv")' in note and "```" not in note
    long_cell = first + "\n" + "# ...\n" * 400
    assert 'first: df = pd.read_csv("test_ave.csv").]' in observation_notes(ran(long_cell), facts, long_cell)
    # an input read through another folder is the wrong-reader note's; an unknown module is not a frame to load
    other = 'df = pd.read_csv("data/test_ave.csv")'
    assert "no file" not in observation_notes(ran(other), facts, other)
    module = "print(stats.pearsonr([1, 2, 3], [2, 4, 7]))"
    assert "does not exist yet" not in observation_notes(ran(module), facts, module)
    assert observation_notes(ran(wrong), DataFacts(), wrong) == ""  # no load call known: nothing to suggest
