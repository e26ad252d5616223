"""The deterministic rules of modes and backward synthesis, by hand-built cases."""

from __future__ import annotations

import pytest

from worldsmith.core.evolution_schemas import (
    CriterionVerdict,
    GoalPackage,
    NodeRun,
    RubricCriterion,
    RubricValidation,
)
from worldsmith.core.workspace_types import Node
from worldsmith.evolution.modes import (
    OfflineWebSearch,
    node_of,
    node_records,
    split_objective,
)
from worldsmith.evolution.synthesis import (
    choose_deliverable,
    instruction,
    pick_targets,
    requirements,
    restated,
    section_of,
    to_rubric,
)


def node(i: int, depth: int, mode: str = "deepen", status: str = "supported", parents=None, goal: str = "") -> Node:
    return Node(id=i, depth=depth, mode=mode, status=status, parents=parents if parents is not None else
                ([] if mode == "root" else [i - 1]), goal=goal or f"goal {i}", conclusion="" if mode == "root"
                else f"finding {i}")


def test_split_objective_by_its_own_punctuation_and_conjunctions() -> None:
    assert split_objective("Which region sells most; and how did its share change over 2024?") == [
        "Which region sells most.", "How did its share change over 2024?"]
    assert split_objective("Compute the mean basket size and what share of orders are returned") == [
        "Compute the mean basket size.", "What share of orders are returned."]
    assert split_objective("Which region sells most?") == ["Which region sells most?"]  # not compound


def test_node_records_speak_the_directors_statuses_and_the_root_states_the_overview() -> None:
    recs = node_records([node(1, 0, "root"), node(2, 1), node(3, 1, status="running"),
                         node(4, 1, status="unsupported")], "Sales by region.")
    assert [(r.id, r.status) for r in recs] == [("1", "verified"), ("2", "verified"), ("3", "pending"),
                                                ("4", "unsupported")]
    assert recs[0].findings[0].id == "f1" and "Sales by region." in recs[0].findings[0].statement
    assert node_of("f12") == 12
    with pytest.raises(ValueError):
        node_of("x3")


async def test_web_search_is_off_offline() -> None:
    web = OfflineWebSearch()
    assert not web.enabled and await web.search("anything", 3) == []


def test_targets_alternate_shallow_and_deep() -> None:
    nodes = [node(1, 0, "root"), node(2, 1), node(3, 2), node(4, 3), node(5, 1, status="unsupported"), node(6, 4)]
    assert [n.id for n in pick_targets(nodes, 2)] == [2, 6]
    assert [n.id for n in pick_targets(nodes, 3)] == [2, 3, 6]
    assert [n.id for n in pick_targets(nodes, 10)] == [2, 3, 4, 6]  # unsupported and root never


def test_a_finding_restating_earlier_numbers_is_found_at_the_precision_it_was_written() -> None:
    """v13's graph: node 5 (depth 3) printed 0.8294 and 0.4672, its grandparent's and parent's r's, rounded."""
    nodes = [node(1, 0, "root"), node(2, 1, parents=[1]), node(4, 2, parents=[2]), node(5, 3, parents=[4]),
             node(6, 3, parents=[4]), node(7, 3, parents=[4]), node(13, 1, parents=[1]),
             node(9, 2, parents=[2]), node(10, 2, parents=[2]), node(11, 2, parents=[2], status="unsupported"),
             node(12, 3, parents=[10])]
    numbers = {2: {"r_basket_amount": 0.8294268505308654}, 4: {"r_amount_income": 0.46723452443370833},
               5: {"basket_size_amount": 0.8294, "amount_income": 0.4672},  # both its ancestors' numbers
               6: {"mean_business": 3.2, "mean_consumer": 2.02},  # new numbers
               7: {"mean_business": 3.07, "r": 0.47},  # 0.47 is 0.4672 at two decimals, 3.07 is new
               13: {"r_discount_amount": -0.1950231515318033},
               9: {"r": -0.195},  # not an ancestor's: an earlier node's (13, depth 1) number
               10: {"r": 0.4682},  # 0.4682 is not 0.4672 at four decimals
               11: {"r": 9.5},  # unsupported: neither restates nor is restated
               12: {"r": 9.5}}
    assert restated(nodes, numbers) == {5: [2, 4], 9: [13]}
    assert restated(nodes, {**numbers, 12: {}}) == {5: [2, 4], 9: [13]}  # no number is no repeat
    assert restated(nodes, {**numbers, 10: {"r": 0.83}}) == {5: [2, 4], 9: [13], 10: [2]}


def _run(i: int, mode: str, question: str, retrieved=()) -> NodeRun:
    return NodeRun(node=i, mode=mode, parents=[i - 1], question=question, goal=GoalPackage(goal=question),
                   retrieved=list(retrieved), status="supported")


def test_requirements_follow_the_path() -> None:
    path = [node(1, 0, "root"), node(2, 1, "search"), node(3, 2, "deepen"), node(4, 3, "decompose"),
            node(5, 4, "deepen")]
    runs = {2: _run(2, "search", "What does the memo say?", ["memos/q3.md", "f1"]),
            3: _run(3, "deepen", "Total by region?"), 4: _run(4, "decompose", "North only?"),
            5: _run(5, "deepen", "Target question")}
    reqs = requirements(path, runs)
    assert [(r.kind, r.node, r.text) for r in reqs] == [("retrieval", 2, "What does the memo say?"),
                                                         ("prerequisite", 3, "Total by region?"),
                                                         ("decomposition", 4, "North only?")]
    assert reqs[0].sources == ["memos/q3.md"]  # findings are not documents a solver can read
    text = instruction("Target question", reqs, "markdown")
    assert "`data/memos/q3.md`" in text and "Total by region?" in text and "answer.md" in text
    assert "Target question" in text and "finding" not in text
    # an ancestor's search question is background, not a second question to answer (v11's report read as two)
    assert "an earlier question this one builds on" in text and "not a second question to answer" in text
    assert "as recorded" not in text  # nothing said about the rows unless the path's scripts show it


def test_a_search_target_asks_for_the_documents_on_its_own_question_once() -> None:
    path = [node(1, 0, "root"), node(2, 1, "search")]
    runs = {2: _run(2, "search", "In orders.csv, how strongly are discount and amount correlated?",
                    ["memos/orders.md", "f1"])}
    reqs = requirements(path, runs)
    assert [(r.kind, r.text, r.sources) for r in reqs] == [("retrieval", "", ["memos/orders.md"])]
    text = instruction("To compute the correlation between discount and amount in the 2023 orders.", reqs, "json")
    assert "Question: Compute the correlation between discount and amount in the 2023 orders." in text
    assert "say about the question (`data/memos/orders.md`)" in text
    assert text.count("correlat") == 1  # v9: the requirement repeated the question in other words


def test_a_report_computed_over_the_rows_as_recorded_says_so() -> None:
    from worldsmith.evolution.synthesis import as_recorded

    plain = "import pandas as pd\ndf = pd.read_csv('data/orders.csv')\nprint(df.amount.corr(df.discount))"
    assert as_recorded([plain, "print(1)  # no drop_duplicates() here, only in a comment"])
    assert not as_recorded([plain, "df = df.drop_duplicates('order_id')"])  # repeats dropped
    assert not as_recorded(["df = df[~df.order_id.duplicated()]"])
    assert not as_recorded(["df['amt'] = df.amt / 100"])  # cents converted
    # the generated join keeps one crm row per key: that is the join's lookup, not a repeated record dropped (v11)
    assert as_recorded([plain, 'crm = crm.dropna(subset=["_key"]).drop_duplicates("_key")'])
    text = instruction("How do discount and amount move together?", [], "markdown", recorded=True)
    assert "rows of the files as recorded: keep repeated records and convert no value" in text
    assert text.index("as recorded") < text.index("answer.md")  # before the deliverable's wording
    tagged = instruction("q", [], "answer_tags", "@r[value]", recorded=True)
    assert "as recorded" not in tagged  # a closed form's answer block pins its own population


def test_a_report_names_the_method_its_target_script_used() -> None:
    """v11's discount-amount report said "the correlation"; its script called `.corr(` (Pearson's r, -0.1950), and
    a blind solve with Spearman's rho got -0.2126, outside the rubric's 2%."""
    from worldsmith.evolution.synthesis import methods_in

    script = "import pandas as pd\ndf = pd.read_csv('data/orders.csv')\nprint(df.discount.corr(df.amount))"
    text = instruction("Compute the correlation between discount and amount.", [], "markdown",
                       methods=methods_in(script))
    assert "Where the question asks for a correlation, a regression or a test, use this method: Pearson " \
           "correlation." in text and text.index("Pearson") < text.index("answer.md")
    plain = instruction("Compute the mean amount.", [], "markdown", methods=methods_in("print(df.amount.mean())"))
    assert "use this method" not in plain  # a mean has no method to name


def test_deliverables_alternate_closed_form_and_reports() -> None:
    nums = {"x": 1.0}
    assert [choose_deliverable(i, nums) for i in range(6)] == ["answer_tags", "markdown", "answer_tags", "json",
                                                               "answer_tags", "xlsx"]  # reports rotate formats
    assert choose_deliverable(0, {}) == "markdown"  # no printed number: no closed form


def test_rubric_dimensions_map_onto_the_four_sections() -> None:
    c = RubricCriterion(id="c", dimension="x", text="t", type="preference", provenance="generated")
    assert section_of("Numerical accuracy", c) == "computation"
    assert section_of("Interpretation of the trend", c) == "insight"
    assert section_of("Data cleaning", c) == "method"
    assert section_of("Clarity of the report", c) == "presentation"
    assert section_of("Domain sense", c) == "insight"
    assert section_of("Domain sense", c.model_copy(update={"expected_value": 3.0})) == "computation"


def test_to_rubric_keeps_revised_text_weights_filters_and_defaults_a_tolerance() -> None:
    kept = [RubricCriterion(id="c1", dimension="Accuracy", text="States 30.", type="filter", provenance="gt",
                            expected_value=30.0),
            RubricCriterion(id="c2", dimension="Clarity", text="Names the file used.", type="preference",
                            provenance="generated", names=["orders.csv"])]
    verdict = {"status": "verified", "grounded": True, "observable": True, "well_formed": True, "action": "keep"}
    v = RubricValidation(verdicts=[CriterionVerdict(criterion="c1", **verdict),
                                   CriterionVerdict(criterion="c2", **{**verdict, "status": "over-specified",
                                                                       "action": "revise"})],
                         criteria=kept, dimensions=["Accuracy", "Clarity", "Method", "Insight"])
    r = to_rubric(v)
    assert [(c.id, c.section, c.weight, c.source, c.confidence) for c in r.criteria] == [
        ("c1", "computation", 2.0, "gt", 1.0), ("c2", "presentation", 1.0, "generated", 0.8)]
    assert r.criteria[0].tolerance.rel == 0.01 and r.criteria[1].tolerance is None
    assert r.criteria[1].names == ["orders.csv"] and r.criteria[0].names == []


def test_a_task_over_two_linked_tables_names_the_key(tmp_path) -> None:
    import pandas as pd

    from worldsmith.evolution.synthesis import link_line
    from worldsmith.tools.files import profile_workspace

    data = tmp_path / "data"
    data.mkdir()
    accounts = [f"CU-{i % 12:04d}" for i in range(60)]  # 12 customers, each with several orders
    pd.DataFrame({"order_id": range(60), "acct_ref": accounts, "amount": [float(i) for i in range(60)]}).to_csv(
        data / "orders.csv", index=False)
    pd.DataFrame({"customer_id": [f"C{i}" for i in range(12)], "income": [float(i) for i in range(12)]}).to_csv(
        data / "crm.csv", index=False)
    pd.DataFrame({"customer_id": [f"C{i}" for i in range(12)], "tier": list("ab" * 6)}).to_csv(
        data / "tiers.csv", index=False)
    pd.DataFrame({"customer_id": [f"C{i % 12}" for i in range(40)], "minutes": list(range(40))}).to_csv(
        data / "visits.csv", index=False)
    ws = profile_workspace([data])
    plain = link_line(ws, ["v = pd.read_csv('visits.csv')\nc = pd.read_csv('crm.csv')"])
    assert "row of `data/visits.csv` belongs to at most one row of `data/crm.csv`, the one whose `customer_id`\n" \
           "equals the row's `customer_id`." in plain and "number" not in plain
    joined = "import pandas as pd\norders = pd.read_csv('orders.csv')\ncrm = pd.read_csv('crm.csv')\n"
    line = link_line(ws, [joined])
    assert "each row of `data/orders.csv` belongs to at most one row of `data/crm.csv`" in line
    assert "`customer_id`\nmatches the row's `acct_ref`" in line and "by the number in the id" in line
    same = link_line(ws, ["pd.read_csv('crm.csv'); pd.read_csv('tiers.csv')"])
    assert same == ""  # both keys unique: a one-to-one pairing, no facts table to match
    assert link_line(ws, ["pd.read_csv('orders.csv')"]) == ""  # one table: no link
    text = instruction("How does income relate to amount?", [], "answer_tags", "@r[value]", link=line)
    assert text.index("How does income") < text.index("The tables link") < text.index("@r[value]")


def test_a_task_over_two_tables_of_one_grain_names_the_id_and_the_date(tmp_path) -> None:
    """A ledger and an HR report, one row per branch and month each: the id alone matches a row to three."""
    from tests.files.panel_kit import write_panel
    from worldsmith.evolution.synthesis import link_line
    from worldsmith.tools.files import profile_workspace

    data = tmp_path / "data"
    data.mkdir()
    write_panel(data)
    line = link_line(profile_workspace([data]), ["l = pd.read_csv('ledger.csv')\nh = pd.read_csv('hr.csv')"])
    assert "each row of `data/ledger.csv` belongs to at most one row of `data/hr.csv`" in line
    assert "by the number in the id" in line
    assert "its `period` read as a date equal\nto the row's `period`" in line and "its first row counts" in line


def test_a_retrieval_requirement_over_rows_as_recorded_asks_to_mention_the_documents_not_to_apply_them() -> None:
    """v12: "find and use what the documents say" beside "every row as recorded": the memo's "the first row
    counts" is a second reading (mean_business 3.22 after dropping repeats against the expected 3.20)."""
    from worldsmith.evolution.synthesis import Requirement

    reqs = [Requirement(kind="retrieval", node=2, text="What does the memo say?", sources=["memos/orders.md"])]
    used = instruction("What is the mean basket?", reqs, "answer_tags", "@m[value]")
    assert "- find and use what the workspace's documents (`data/memos/orders.md`)" in used
    mentioned = instruction("What is the mean basket?", reqs, "answer_tags", "@m[value]", recorded=True)
    assert "find and use" not in mentioned and "and mention\n  it" in mentioned
    assert "it does not change how the numbers are computed" in mentioned and "What does the memo say?" in mentioned


def test_the_link_line_comes_from_the_targets_script_not_its_prerequisites(tmp_path) -> None:
    """v12: node 9's question joins orders_2024.csv to crm; its prerequisite joined orders_2023.csv. Drawn from
    every script of the path, the link named both yearly files and the solvers' join stacked both years."""
    from tests.files.panel_kit import yearly_orders_and_crm
    from worldsmith.evolution.synthesis import link_line
    from worldsmith.tools.files import profile_workspace

    ws = profile_workspace([yearly_orders_and_crm(tmp_path)])
    prerequisite = "o = pd.read_csv('orders_2023.csv'); c = pd.read_csv('crm.csv')"
    target = "o = pd.read_csv('orders_2024.csv'); c = pd.read_csv('crm.csv')"
    line = link_line(ws, [prerequisite, target])
    assert "each row of `data/orders_2024.csv` belongs to at most one row of `data/crm.csv`" in line
    assert "orders_2023" not in line
    both = "o = pd.concat([pd.read_csv('orders_2023.csv'), pd.read_csv('orders_2024.csv')]); pd.read_csv('crm.csv')"
    assert "`data/orders_2023.csv` and `data/orders_2024.csv`" in link_line(ws, [prerequisite, both])
    # v15: a target reading the orders alone below a crm question needs no link; one reading a file its parent
    # wrote may need the join upstream of it
    crm_question = "c = pd.read_csv('crm.csv')\nprint(c.groupby('segment').income.mean())"
    assert link_line(ws, [crm_question, "o = pd.read_csv('orders_2023.csv')"]) == ""
    assert "belongs to at most one row of `data/crm.csv`" in link_line(
        ws, [prerequisite + "\njoined.to_csv('joined.csv')", "j = pd.read_csv('joined.csv')"])


def test_a_report_whose_question_names_no_file_names_the_files_its_script_read(tmp_path) -> None:
    """v12's node 13 asked "… in the 2023 orders", naming no file: its solvers were shown every table, and one
    merged another table and grouped by a column no order has. The task names the files the target's script read,
    and that line is what picks the files a solver is shown."""
    from tests.files.panel_kit import yearly_orders_and_crm
    from worldsmith.agents.executor import named_files
    from worldsmith.evolution.synthesis import data_line
    from worldsmith.tools.files import profile_workspace

    data = yearly_orders_and_crm(tmp_path)
    ws = profile_workspace([data])
    script = "# crm.csv is not needed here\no = pd.read_csv(DATA / 'orders_2023.csv')\nprint(o.basket.mean())"
    goal = "What is the mean basket size in the 2023 orders?"
    line = data_line(ws, goal, script)
    assert line == "The question's numbers come from `data/orders_2023.csv`."
    scope = instruction(goal, [], "markdown", data=line, format_line=False)
    assert named_files(scope, [data]) == {"orders_2023.csv"}
    assert named_files(instruction(goal, [], "markdown", format_line=False), [data]) == set()
    # the question names the file already, or the script reads no table: nothing to add
    assert data_line(ws, "What is the mean basket size in orders_2023.csv?", script) == ""
    assert data_line(ws, goal, "print(1)") == ""
    both = "a = pd.read_csv('orders_2024.csv'); b = pd.read_csv('orders_2023.csv')"
    assert data_line(ws, goal, both) == \
        "The question's numbers come from `data/orders_2023.csv` and `data/orders_2024.csv`."


def test_the_findings_own_number_is_a_filter_so_a_wrong_report_fails_whatever_else_it_says() -> None:
    """v13's amount-income rubric, as validated: the r as one preference beside the files and the method."""
    from worldsmith.core.rubric_grading import grade_rubric

    kept = [RubricCriterion(id="1", dimension="accuracy", text="The correlation between amount and income is right.",
                            type="preference", provenance="gt", expected_value=0.4672345, tolerance=0.02),
            RubricCriterion(id="ev_files", dimension="method", type="preference", provenance="generated",
                            text="Says which data files its numbers come from: crm.xlsx, orders_2023.csv"),
            RubricCriterion(id="ev_method1", dimension="method", type="preference", provenance="generated",
                            text="Names the method it used: Pearson correlation")]
    verdict = {"status": "verified", "grounded": True, "observable": True, "well_formed": True, "action": "keep"}
    v = RubricValidation(verdicts=[CriterionVerdict(criterion=c.id, **verdict) for c in kept], criteria=kept,
                         dimensions=["accuracy", "method", "interpretation", "presentation"])
    rubric = to_rubric(v)
    assert [(c.id, c.type, c.weight) for c in rubric.criteria] == [
        ("1", "filter", 2.0), ("ev_files", "preference", 1.0), ("ev_method1", "preference", 1.0)]
    sources = "The numbers come from crm.xlsx and orders_2023.csv, joined on the customer id."
    method = "I used the Pearson correlation."

    def judge(pending, text, instruction):  # meets the files and the method, quoting the report
        return {c["id"]: {"met": True, "evidence": sources if c["id"] == "ev_files" else method} for c in pending}

    items = [c.model_dump(mode="json") for c in rubric.criteria]
    for r, passes in ((0.30, False), (0.47, True)):
        report = f"{sources} {method} The correlation between amount and income is {r:.2f}."
        graded = grade_rubric(items, report, judge=judge)
        assert graded["passed"] is passes, (r, graded["note"])
    # as a preference the wrong r scored 2 of 3 items, over the 0.6 pass mark
    as_drafted = [{**i, "type": "preference", "weight": 1.0} if i["id"] == "1" else i for i in items]
    assert grade_rubric(as_drafted, f"{sources} {method} The correlation between amount and income is 0.30.",
                        judge=judge)["passed"] is True
