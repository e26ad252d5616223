"""Dual evidence: rubric generation from >= 2 evidence cards, and per-criterion validation against the data."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from worldsmith.agents.criterion_validator import validate_criteria
from worldsmith.agents.rubric_generator import agreed_values, generate_rubric, screened
from worldsmith.core.evolution_schemas import EvidenceCard, RubricDraft, RubricProposal

TASK = "Using sales.csv, report the south region's total amount and the north region's mean sale."
TRUTH = "South sold 70 in total; the north's mean sale is 20."
CARDS = [EvidenceCard(solver="teacher@0.0", operations=["group by region", "sum and mean of amount"],
                      computed_values={"south_total": 70, "north_mean": 20}, conclusions=["south leads"]),
         EvidenceCard(solver="teacher@0.7", operations=["filter south", "sum amount"],
                      computed_values={"south_total": 70}, conclusions=["south sold 70"])]
DIMS = ["accuracy", "method", "insight", "presentation"]
#: only the first solver computed the south total: its number is not recomputed by the evidence
LONE_CARDS = [CARDS[0], CARDS[1].model_copy(update={"computed_values": {"south_orders": 2}})]


def crit(id: str, text: str, provenance: str = "generated", value: float | None = None, dim: str = "accuracy",
         type: str = "filter") -> dict:
    return {"id": id, "dimension": dim, "text": text, "type": type, "provenance": provenance,
            "expected_value": value, "tolerance": None}


def test_rubric_rules_are_enforced_by_the_contract() -> None:
    five = [crit(f"c{i}", f"t{i}") for i in range(5)]
    RubricDraft.model_validate({"dimensions": DIMS, "criteria": five})
    with pytest.raises(ValueError, match="at most 40%"):
        RubricDraft.model_validate({"dimensions": DIMS, "criteria": [crit(f"g{i}", "t", "gt") for i in range(3)]
                                    + five[:2]})
    with pytest.raises(ValueError, match="at least 4"):
        RubricDraft.model_validate({"dimensions": DIMS[:3], "criteria": five})
    with pytest.raises(ValueError, match="at most 10"):
        RubricDraft.model_validate({"dimensions": DIMS, "criteria": [crit(f"c{i}", "t") for i in range(11)]})
    with pytest.raises(ValueError, match="not in the list"):
        RubricDraft.model_validate({"dimensions": DIMS, "criteria": [crit("c1", "t", dim="style")]})


async def test_generator_happy_path_and_a_gt_heavy_draft_sent_back(scripted_llm) -> None:
    script, llm = scripted_llm
    gt_heavy = {"dimensions": DIMS, "criteria": [crit("g1", "reports south total 70", "gt", 70),
                                                 crit("g2", "reports north mean 20", "gt", 20),
                                                 crit("c1", "names the file used")]}
    good = {"dimensions": DIMS, "criteria": [crit("g1", "reports south total 70", "gt", 70),
                                             crit("c1", "names the file used", dim="method"),
                                             crit("c2", "says south leads", dim="insight", type="preference")]}
    script.queue(gt_heavy, gt_heavy, good)  # sent back twice by the screen, then accepted
    out = await generate_rubric(llm, TASK, TRUTH, CARDS)
    assert out.ok and [c.id for c in out.value.criteria] == ["g1", "c1", "c2"]
    assert any("at most 40% may" in e for e in out.errors)
    assert "card 2 (teacher@0.7)" in script.requests[0].text and TRUTH in script.requests[0].text
    assert "Values both solver runs computed: (none beyond the ground truth)" in script.requests[0].text
    assert "2 of the 3 usable criteria restate the ground truth" in script.requests[1].text


# the v10 and v9 drafts of the 1.5B generator, as it wrote them (trimmed to the criteria that matter)
RETURNS_TASK = ("Using data/orders_2023.csv and data/returns_log.jsonl, compare the mean discount_pct of returned "
                "and not returned orders. In orders_2023.csv, how strongly are basket_size and amount correlated? "
                "Write report.md.")
RETURNS_TRUTH = "The mean discount_pct for returned orders is 18.8246; for the others it is 14.2586."
RETURNS_CARDS = [
    EvidenceCard(solver="agent", operations=["merge orders and returns on order_id", "mean discount by returned"],
                 computed_values={"mean_returned": 18.824626865671643, "mean_kept": 14.258595641646487,
                                  "difference": 4.566031224025156}, conclusions=["returned orders had more discount"]),
    EvidenceCard(solver="teacher", operations=["left join returns onto orders", "groupby returned flag"],
                 computed_values={"ret": 18.8246, "not_ret": 14.2586, "diff": 4.566, "n_returned": 134.0},
                 conclusions=["discounts are higher on returned orders"])]


def test_the_screen_drops_an_echo_of_the_schema_and_asks_again() -> None:
    """v10's third draft: every dimension a field of the schema, every criterion its description."""
    fields = {"dimension": "one of the rubric's dimensions", "text": "one observable requirement of the deliverable",
              "type": "filter: must hold to pass; preference: earns points",
              "provenance": "gt: from the verified ground truth; generated: from the solvers' evidence",
              "expected_value": "the number the deliverable must report, if any",
              "tolerance": "relative tolerance of expected_value (0.02 = 2%)"}
    echo = RubricProposal.model_validate({"dimensions": list(fields), "criteria": [
        crit(k, v, "gt", dim=k) for k, v in fields.items()]})
    draft, problems, notes = screened(echo, instructions="", task=RETURNS_TASK, ground_truth=RETURNS_TRUTH,
                                      cards=RETURNS_CARDS)
    assert draft is None and len(notes) == 6
    assert all("field of the rubric's schema" in n for n in notes)
    assert "no criterion is left" in problems[-1]


def test_the_screen_keeps_the_requirements_and_sets_provenance_from_the_evidence() -> None:
    """v10's first draft: a copied question, the ground truth twice, two provenance meta-criteria and numbers all
    labelled by guess; what is left is a usable rubric with the returned mean (which the truth states) as gt and
    the difference (which only the solvers computed) as generated."""
    instructions = "Give expected_value (and a relative tolerance) when a criterion checks a number."
    p = RubricProposal.model_validate({"dimensions": ["data", "accuracy", "method", "interpretation", "provenance"],
                                       "criteria": [
        crit("q", "In orders_2023.csv, how strongly are basket_size and amount correlated?", dim="data"),
        crit("ret", "The mean discount_pct for returned orders is 18.824626865671643", "generated", 18.824626865671643),
        crit("ret2", "The mean discount_pct for returned orders is 18.824626865671643.", "gt", 18.824626865671643),
        crit("kept", "States the mean discount_pct of the other orders, 14.26", "gt", 14.2586, dim="accuracy"),
        crit("diff", "States how much larger the returned orders' mean discount is (4.57 points)", "gt", 4.566),
        crit("how", "Says that orders were matched to the returns log by order_id", dim="method",
             type="preference"),
        crit("why", "Concludes that returned orders carried larger discounts", "generated", dim="interpretation"),
        crit("provenance_gt", "gt: from the verified ground truth", "gt", dim="provenance"),
        crit("echo", "Give expected_value (and a relative tolerance) when a criterion checks a number", dim="method")]})
    draft, problems, notes = screened(p, instructions=instructions, task=RETURNS_TASK, ground_truth=RETURNS_TRUTH,
                                      cards=RETURNS_CARDS)
    assert problems == [] and draft is not None
    assert [c.id for c in draft.criteria] == ["ret", "kept", "diff", "how", "why"]
    assert {c.id: c.provenance for c in draft.criteria} == {
        "ret": "gt", "kept": "gt", "diff": "generated", "how": "generated", "why": "generated"}
    assert "provenance" not in draft.dimensions
    dropped = {n.split(":")[0] for n in notes if n.startswith("dropped")}
    assert dropped == {"dropped q", "dropped ret2", "dropped provenance_gt", "dropped echo"}


def test_criteria_about_how_the_rubric_is_made_are_dropped() -> None:
    """v11's two kept meta-criteria (the old criterion validator judged both grounded and observable)."""
    p = RubricProposal.model_validate({"dimensions": DIMS, "criteria": [
        crit("r", "States the correlation of discount_pct and amount, -0.195", "gt", -0.1950231515318033),
        crit("6", "The evidence cards provide the steps and results of the script's execution.", dim="insight"),
        crit("7", "The rubric checks the deliverable against the specified criteria.", dim="insight"),
        crit("8", "Agrees with the ground truth on the sign of the correlation", dim="insight"),
        crit("c", "Says that larger discounts go with slightly smaller order amounts", dim="insight"),
        crit("m", "Computes the correlation over every 2023 order as recorded", dim="method")]})
    draft, problems, notes = screened(p, instructions="", task=RETURNS_TASK, ground_truth=RETURNS_TRUTH,
                                      cards=RETURNS_CARDS)
    assert problems == [] and [c.id for c in draft.criteria] == ["r", "c", "m"]
    assert [n.split(":")[0] for n in notes] == ["dropped 6", "dropped 7", "dropped 8"]
    assert "'evidence cards'" in notes[0] and "'rubric'" in notes[1] and "'ground truth'" in notes[2]


def test_criteria_on_the_solvers_code_or_cut_off_mid_code_are_dropped() -> None:
    """v14's report rubric: four preferences on `df.groupby(`, which a JSON report need not show."""
    p = RubricProposal.model_validate({"dimensions": DIMS, "criteria": [
        crit("1", "Computes the Pearson correlation of `amount` and `income` in the joined dataframe `df`: "
                  "-0.195", "gt", -0.1950231515318033),
        crit("4", "The deliverable must calculate the monthly mean of the `amount` column using `df.groupby(",
             dim="method", type="preference"),
        crit("5", "Calculates the correlation with `df['amount'].corr(df['income'])`", dim="method"),
        crit("6", "Prints the result of the correlation between the `amount` and `df.gr", dim="presentation"),
        crit("c", "Says that larger discounts go with slightly smaller order amounts", dim="insight"),
        crit("m", "Computes the correlation over every 2023 order as recorded", dim="method"),
        # v15: a preference on the library, which a correct report written with any tool would fail
        crit("7", "The deliverable used the `pandas` library to compute the correlation between the `amount` "
                  "and `income` columns.", dim="method", type="preference"),
        # v16: the solver's program described, which a report that states the right r and its file cannot show
        crit("8", "The script reads the `orders_2023.csv` file, selects the `discount_pct` and `amount` columns, "
                  "computes the Pearson correlation, and prints the result.", dim="method"),
        crit("9", "Says the script's output was checked against a second method", dim="method")]})
    draft, problems, notes = screened(p, instructions="", task=RETURNS_TASK, ground_truth=RETURNS_TRUTH,
                                      cards=RETURNS_CARDS)
    assert problems == [] and [c.id for c in draft.criteria] == ["1", "c", "m", "9"]
    assert [n.split(":")[0] for n in notes] == ["dropped 4", "dropped 5", "dropped 6", "dropped 7", "dropped 8"]
    assert "it describes what the script does" in notes[4]
    assert "a backtick is never closed" in notes[0] and "(`df['amount'].corr(df['income'])`)" in notes[1]
    assert "which software the solver used (pandas)" in notes[3]


def test_a_criterion_restating_a_solvers_conclusion_is_evidence_not_a_copy() -> None:
    conclusion = "Discounts on the returned orders run higher than on the orders that were kept"
    cards = [RETURNS_CARDS[0].model_copy(update={"conclusions": [conclusion]}), RETURNS_CARDS[1]]
    p = RubricProposal.model_validate({"dimensions": DIMS, "criteria": [
        crit("ret", "States the returned orders' mean discount of 18.82", "gt", 18.8246),
        crit("why", conclusion, dim="insight"),
        crit("how", "Matches each return to its order by order_id", dim="method")]})
    draft, problems, notes = screened(p, instructions="", task=RETURNS_TASK, ground_truth=RETURNS_TRUTH, cards=cards)
    assert problems == [] and [c.id for c in draft.criteria] == ["ret", "why", "how"] and notes == []


def test_values_both_solvers_computed_beyond_the_truth_are_offered_and_asked_for() -> None:
    assert agreed_values(RETURNS_CARDS, RETURNS_TRUTH) == ["difference = 4.56603"]
    all_gt = RubricProposal.model_validate({"dimensions": DIMS, "criteria": [
        crit("a", "States the returned orders' mean discount of 18.82", "generated", 18.8246),
        crit("b", "States the other orders' mean discount of 14.26", "generated", 14.2586),
        crit("c", "Names returns_log.jsonl as the source of the returns", "generated", dim="method")]})
    draft, problems, _ = screened(all_gt, instructions="", task=RETURNS_TASK, ground_truth=RETURNS_TRUTH,
                                  cards=RETURNS_CARDS)
    assert draft is None and "2 of the 3 usable criteria restate the ground truth" in problems[-1]
    assert "difference = 4.56603" in problems[-1]


def test_an_expected_value_nothing_states_is_a_placeholder_and_is_removed() -> None:
    """v13's segment-mean report: the 1.5B generator gave "interprets the results correctly" expected_value 1.0."""
    draft = RubricProposal.model_validate({"dimensions": DIMS, "criteria": [
        crit("g1", "reports the south total", "gt", 70.0),
        crit("c1", "interprets the results correctly", value=1.0, dim="insight", type="preference"),
        crit("c2", "names sales.csv as its source", dim="method", type="preference"),
        crit("c3", "states the share of south as 63.6%", value=63.6, dim="presentation", type="preference")]})
    out, problems, notes = screened(draft, instructions="", task=TASK, ground_truth=TRUTH, cards=CARDS)
    assert problems == [] and out is not None
    values = {c.id: c.expected_value for c in out.criteria}
    assert values["c1"] is None and values["g1"] == 70.0 and values["c2"] is None
    assert values["c3"] == 63.6  # its own text states it (what the validator then recomputes from the data)
    assert "c1: expected value 1 removed (neither its text, the ground truth nor a solver run states it)" in notes


async def test_one_solver_is_not_dual_evidence(scripted_llm) -> None:
    _, llm = scripted_llm
    with pytest.raises(ValueError, match=">= 2 independent solver runs"):
        await generate_rubric(llm, TASK, TRUTH, [CARDS[0], CARDS[0]])


def check(code_value: str | None, grounded=True, observable=True, well_formed=True, revision=None) -> dict:
    code = None if code_value is None else (
        "import pandas as pd\ndf = pd.read_csv('sales.csv')\n" f"print(f\"RESULT value = {{{code_value}}}\")")
    return {"grounded": grounded, "observable": observable, "well_formed": well_formed, "reason": "r",
            "code": code, "revision": revision}


async def test_criterion_validator_drops_a_refuted_criterion(scripted_llm, data: Path, sandbox_config) -> None:
    script, llm = scripted_llm
    df = pd.read_csv(data / "sales.csv")
    south_total = float(df[df.region == "south"].amount.sum())
    north_mean = float(df[df.region == "north"].amount.mean())
    rubric = RubricDraft.model_validate({"dimensions": DIMS, "criteria": [
        crit("c1", "reports the south total", "gt", south_total),
        crit("c2", "reports the north mean sale", "gt", north_mean + 5),  # wrong by 5: the data refute it
        crit("c3", "names sales.csv as the source", dim="method"),
        crit("c4", "explains every regional difference in depth", dim="insight", type="preference"),
        crit("c5", "mentions the marketing budget", dim="insight", type="preference"),
    ]})
    fenced = check("df[df.region == 'south'].amount.sum()")
    fenced["code"] = "```python\n" + fenced["code"] + "\n```"  # small models fence code even inside JSON
    script.on(r"Criterion c1 ", fenced)
    script.on(r"Criterion c2 ", check("df[df.region == 'north'].amount.mean()"))
    script.on(r"Criterion c3 ", check(None))
    script.on(r"Criterion c4 ", check(None, well_formed=False, revision="names the region with the largest total"))
    script.on(r"Criterion c5 ", check(None, grounded=False))
    out = await validate_criteria(llm, rubric, task=TASK, ground_truth=TRUTH, cards=CARDS,
                                  inputs=[data / "sales.csv"], sandbox=sandbox_config)
    v = out.value
    by_id = {x.criterion: x for x in v.verdicts}
    assert by_id["c1"].status == "verified" and by_id["c1"].recomputed == south_total
    assert by_id["c2"].status == "refuted" and by_id["c2"].recomputed == north_mean and by_id["c2"].action == "drop"
    assert by_id["c3"].status == "verified"
    assert by_id["c4"].status == "over-specified" and by_id["c4"].action == "revise"
    assert by_id["c5"].status == "unverifiable" and by_id["c5"].action == "drop"
    assert [c.id for c in v.criteria] == ["c1", "c3", "c4"] and v.dropped == ["c2", "c5"]
    assert v.criteria[2].text == "names the region with the largest total"
    assert len(out.calls) == 5


async def test_a_number_that_cannot_be_recomputed_is_unverifiable(scripted_llm, data: Path, sandbox_config) -> None:
    script, llm = scripted_llm
    rubric = RubricDraft.model_validate({"dimensions": DIMS, "criteria": [
        crit("c1", "reports the south total", "generated", 70), crit("c2", "names the file", dim="method")]})
    script.on(r"Criterion c1 ", check(None))  # states a number but gives no recomputation
    script.on(r"Criterion c2 ", "not json at all")
    out = await validate_criteria(llm, rubric, task=TASK, ground_truth=TRUTH, cards=LONE_CARDS,
                                  inputs=[data / "sales.csv"], sandbox=sandbox_config, retries=0)
    by_id = {x.criterion: x for x in out.value.verdicts}
    assert by_id["c1"].status == "unverifiable" and "recomputes it from the input files" in by_id["c1"].reason
    assert by_id["c2"].status == "unverifiable" and "not valid JSON" in by_id["c2"].reason
    assert out.value.criteria == []


async def test_a_number_restated_instead_of_recomputed_is_never_verified(scripted_llm, data: Path,
                                                                         sandbox_config) -> None:
    """v11's validator kept a criterion on the strength of `print('RESULT value =', -0.1950231515318033)`: the
    expected value printed back. Such a script, or one that reads no input file, is sent back; a second such
    answer leaves the criterion unverifiable, and a real recomputation after the re-ask verifies it."""
    script, llm = scripted_llm
    south_total = float(pd.read_csv(data / "sales.csv").query("region == 'south'").amount.sum())
    rubric = RubricDraft.model_validate({"dimensions": DIMS, "criteria": [
        crit("c1", "reports the south total", "generated", south_total),
        crit("c2", "reports the south total once more", "generated", south_total, dim="method")]})
    echo = {**check(None), "code": f"print('RESULT value =', {south_total})"}
    no_file = {**check(None), "code": f"x = {south_total} * 1.0\nprint('RESULT value =', x)"}
    script.on(r"Criterion c1 ", echo, times=1).on(r"Criterion c1 ", no_file)
    script.on(r"Criterion c2 ", {**check(None), "code": f'print(f"RESULT value = {{{south_total}}}")'}, times=1)
    script.on(r"Criterion c2 ", check("df[df.region == 'south'].amount.sum()"))
    out = await validate_criteria(llm, rubric, task=TASK, ground_truth=TRUTH, cards=LONE_CARDS,
                                  inputs=[data / "sales.csv"], sandbox=sandbox_config, retries=1)
    by_id = {x.criterion: x for x in out.value.verdicts}
    assert by_id["c1"].status == "unverifiable" and by_id["c1"].recomputed is None
    assert "reads none of the input files (sales.csv)" in by_id["c1"].reason
    assert by_id["c2"].status == "verified" and by_id["c2"].recomputed == south_total
    re_ask = [r.text for r in script.requests if "Criterion c1 " in r.text][1]
    assert "prints a number written into it" in re_ask
    assert "Input files: sales.csv" in script.requests[0].text


async def test_a_recomputation_that_fails_goes_back_once_with_its_error(scripted_llm, data: Path,
                                                                         sandbox_config) -> None:
    """v13's node 6: the validator's script called `.dt` on a column that is not a date, and the criterion holding
    the report's number was dropped as unverifiable. The failure goes back once; a script failing twice drops it."""
    script, llm = scripted_llm
    df = pd.read_csv(data / "sales.csv")
    south_total = float(df[df.region == "south"].amount.sum())
    rubric = RubricDraft.model_validate({"dimensions": DIMS, "criteria": [
        crit("c1", "reports the south total", "generated", south_total),
        crit("c2", "reports the south total again", "generated", south_total, dim="method")]})
    broken = check("df[df.region.dt.year == 2024].amount.sum()")
    script.on(r"Criterion c1 ", broken, times=1).on(r"Criterion c1 ", check("df[df.region == 'south'].amount.sum()"))
    script.on(r"Criterion c2 ", broken)
    out = await validate_criteria(llm, rubric, task=TASK, ground_truth=TRUTH, cards=LONE_CARDS,
                                  inputs=[data / "sales.csv"], sandbox=sandbox_config, retries=0)
    by_id = {x.criterion: x for x in out.value.verdicts}
    assert by_id["c1"].status == "verified" and by_id["c1"].recomputed == south_total
    assert by_id["c2"].status == "unverifiable" and "AttributeError" in by_id["c2"].reason
    asks = [r.last_user for r in script.requests if "Criterion c2 " in r.text]
    assert len(asks) == 2  # one repair, not more
    assert "did not print a `RESULT value = <number>` line" in asks[1] and "AttributeError" in asks[1]
    assert [c.id for c in out.value.criteria] == ["c1"] and len(out.calls) == 4


async def test_a_number_both_solver_runs_computed_needs_no_script_and_evidence_criteria_no_model(
        scripted_llm, data: Path, sandbox_config) -> None:
    """v13's amount-income report: the 1.5B validator wrote no script reading a data file for the r both solvers
    had computed, and cut its reply on ev_files off; the rubric kept the method alone and checked no number."""
    from worldsmith.agents.rubric_generator import evidence_criteria

    script, llm = scripted_llm
    cards = [CARDS[0].model_copy(update={"files": ["sales.csv"], "methods": ["Pearson correlation"]}),
             CARDS[1].model_copy(update={"files": ["sales.csv"], "methods": ["Pearson correlation"]})]
    made = evidence_criteria(cards, TRUTH)  # files and method: both runs share them
    assert [c.id for c in made] == ["ev_files", "ev_method1"]
    rubric = RubricDraft.model_validate({"dimensions": DIMS, "criteria": [
        crit("g1", "reports the south total", "gt", 70.4),  # both runs computed 70: within 1%
        crit("g2", "reports the north mean sale", "gt", 20),  # only the first run computed 20
        crit("c1", "reports the south total again", "generated", 70, dim="insight", type="preference"),
        *[c.model_dump() for c in made]]})
    script.on(r"Criterion g1 ", "no JSON here")  # no usable check at all: the two runs verify its number
    script.on(r"Criterion g2 ", "no JSON here")
    script.on(r"Criterion c1 ", check(None, grounded=False))  # a usable check still rules on the wording
    out = await validate_criteria(llm, rubric, task=TASK, ground_truth=TRUTH, cards=cards,
                                  inputs=[data / "sales.csv"], sandbox=sandbox_config, retries=0)
    by_id = {x.criterion: x for x in out.value.verdicts}
    assert by_id["g1"].status == "verified" and by_id["g1"].recomputed == 70
    assert "teacher@0.0: 70, teacher@0.7: 70" in by_id["g1"].reason
    assert by_id["g2"].status == "unverifiable"  # one run is no dual evidence: the model's recomputation is needed
    assert by_id["c1"].status == "unverifiable"
    assert by_id["ev_files"].status == by_id["ev_method1"].status == "verified"
    assert [c.id for c in out.value.criteria] == ["g1", "ev_files", "ev_method1"]
    asked = [r.text for r in script.requests]
    assert {c for c in ("g1", "g2", "c1", "ev_files", "ev_method1") if any(f"Criterion {c} " in t for t in asked)} \
        == {"g1", "g2", "c1"}  # the evidence criteria cost no model call
    g1 = next(t for t in asked if "Criterion g1 " in t)
    assert "needs no recomputation" in g1 and "needs no recomputation" not in next(
        t for t in asked if "Criterion g2 " in t)


def test_what_counts_as_a_recomputation() -> None:
    from worldsmith.agents.criterion_validator import recomputation_problems

    names = ["orders.csv", "crm.xlsx"]
    ok = "import pandas as pd\ndf = pd.read_csv('data/orders.csv')\n"
    for tail in ("print('RESULT value =', df.amount.mean())", "print(f'RESULT value = {df.amount.mean():.4f}')",
                 "print('RESULT value =', 100 * df.amount.mean())", "print('RESULT value =', round(r, 4))"):
        assert recomputation_problems(ok + tail, names) == [], tail
    for tail in ("print('RESULT value =', -0.1950231515318033)", 'print("RESULT value = 12.5")',
                 "print(f'RESULT value = {-0.195}')", "print('RESULT value =', (3.0))"):
        assert recomputation_problems(ok + tail, names) == [
            "the script prints a number written into it: print the value it computes from the data"], tail
    assert "reads none of the input files (orders.csv, crm.xlsx)" in recomputation_problems(
        "print('RESULT value =', sum([1, 2]))", names)[0]
    assert "give \"code\"" in recomputation_problems(None, names)[0]


async def test_drops_that_leave_ground_truth_over_40_percent_trim_it(scripted_llm, data: Path, sandbox_config) -> None:
    script, llm = scripted_llm
    rubric = RubricDraft.model_validate({"dimensions": DIMS, "criteria": [
        crit("g1", "states that south leads", "gt"), crit("c1", "names the file", dim="method"),
        crit("c2", "mentions the budget", dim="insight")]})
    script.on(r"Criterion g1 ", check(None))
    script.on(r"Criterion c1 ", check(None))
    script.on(r"Criterion c2 ", check(None, grounded=False))
    out = await validate_criteria(llm, rubric, task=TASK, ground_truth=TRUTH, cards=CARDS,
                                  inputs=[data / "sales.csv"], sandbox=sandbox_config)
    # kept g1 + c1 would be 50% ground truth: g1 goes, and the note says why
    assert [c.id for c in out.value.criteria] == ["c1"] and out.value.dropped == ["c2", "g1"]
    assert out.value.notes == ["dropped g1 to keep ground-truth criteria at most 40% of the rubric"]


def test_a_spec_naming_files_as_the_script_read_them_is_resolved_to_the_tasks_files() -> None:
    from tests.evolution.evolve_kit import SPEC
    from worldsmith.agents.task_writer import resolved, spec_problems
    from worldsmith.core.answer_spec import AnswerFacets

    files = ["data/sales.csv", "data/2023/returns.csv", "data/2024/returns.csv"]
    bare = AnswerFacets.model_validate({**SPEC, "measure": {**SPEC["measure"], "files": ["sales.csv"]},
                                        "other_columns": {"region": ["sales.csv"]}})
    assert spec_problems(bare, "mean", files) == []  # the lint reads the base name as the one data file it names
    fixed = resolved(bare, files)
    assert fixed.measure.files == ["data/sales.csv"] and fixed.other_columns == {"region": ["data/sales.csv"]}
    ambiguous = AnswerFacets.model_validate({**SPEC, "measure": {**SPEC["measure"], "files": ["returns.csv"]}})
    assert resolved(ambiguous, files).measure.files == ["returns.csv"]  # two files by that name: left as written
    assert "is not in the task's data files" in " ".join(spec_problems(ambiguous, "mean", files))


def test_the_methods_a_script_calls_are_named_as_a_deliverable_would() -> None:
    from worldsmith.evolution.synthesis import methods_in

    assert methods_in('r = df["discount_pct"].corr(df["amount"])') == ["Pearson correlation"]
    assert methods_in("r = df.a.corr(df.b, method='spearman')") == ["Spearman rank correlation"]
    assert methods_in("r = df.a.corr(df.b, method='pearson')") == ["Pearson correlation"]
    assert methods_in("from scipy import stats\nfit = stats.linregress(df.x, df.y)\nprint(fit.slope)") == [
        "least-squares linear regression"]
    assert methods_in("print(df.amount.mean())  # not a .corr( call") == []


# v11's discount-amount report at a222dd8: the draft restated the ground truth's number and little else, and was
# refused three times for the gt share; both solver scripts read orders_2023.csv and called .corr(
CORR_TRUTH = "The correlation between discount_pct and amount in the 2023 orders is -0.1950."
CORR_TASK = "Compute the correlation between `discount_pct` and `amount` in the 2023 orders. Write answer.md."
CORR_CARDS = [
    EvidenceCard(solver="teacher", operations=["loaded orders_2023.csv", "correlated the two columns"],
                 computed_values={"corr": -0.1950231515318033}, conclusions=["a weak negative relation"],
                 files=["orders_2023.csv"], methods=["Pearson correlation"]),
    EvidenceCard(solver="agent", operations=["read the orders", "df.corr"],
                 computed_values={"r": -0.195, "n_orders": 1020.0}, conclusions=["weakly negative"],
                 files=["crm.xlsx", "orders_2023.csv"], methods=["Pearson correlation", "t-test"])]


def test_a_draft_leaning_on_the_ground_truth_is_completed_from_what_both_solvers_share() -> None:
    from worldsmith.agents.rubric_generator import evidence_criteria

    shared = evidence_criteria(CORR_CARDS, CORR_TRUTH)
    # the correlation is the truth's (not offered again), n_orders one solver's only, crm.xlsx one script's only
    assert [(c.id, c.text) for c in shared] == [
        ("ev_files", "Says which data files its numbers come from: orders_2023.csv"),
        ("ev_method1", "Names the method it used: Pearson correlation")]
    assert all(c.provenance == "generated" and c.expected_value is None for c in shared)
    assert shared[0].names == ["orders_2023.csv"] and shared[1].names == []  # graded by name, not by the judge
    [value] = evidence_criteria(RETURNS_CARDS, RETURNS_TRUTH)  # the difference both computed, the truth does not state
    assert (value.text, value.expected_value, value.tolerance) == ("States difference as 4.56603", 4.56603, 0.02)
    p = RubricProposal.model_validate({"dimensions": ["accuracy", "interpretation", "presentation", "clarity"],
                                       "criteria": [
        crit("r", "States the correlation of discount_pct and amount, -0.195", "generated", -0.1950231515318033),
        crit("dir", "Says that larger discounts go with slightly smaller amounts", dim="interpretation")]})
    draft, problems, notes = screened(p, instructions="", task=CORR_TASK, ground_truth=CORR_TRUTH, cards=CORR_CARDS)
    # 1 gt of 2 is 50%: one evidence criterion (1 of 3, 33%) is enough, under a dimension added for it
    assert problems == [] and [c.id for c in draft.criteria] == ["r", "dir", "ev_files"]
    assert draft.criteria[-1].names == ["orders_2023.csv"]  # kept through the screen's re-validation
    assert draft.criteria[0].provenance == "gt" and draft.dimensions[-1] == "method"
    assert "added ev_files from what both solver runs share" in notes[-1]
    # a draft already within the share gets nothing added
    fine = p.model_copy(update={"criteria": p.criteria + [RubricProposal.model_validate({
        "dimensions": DIMS, "criteria": [crit("cav", "Mentions that repeated orders were kept", dim="clarity")]}
    ).criteria[0]]})
    draft, problems, notes = screened(fine, instructions="", task=CORR_TASK, ground_truth=CORR_TRUTH,
                                      cards=CORR_CARDS)
    assert problems == [] and [c.id for c in draft.criteria] == ["r", "dir", "cav"]
    # one solver's evidence alone completes nothing: the draft goes back to the model
    alone = [CORR_CARDS[0], CORR_CARDS[1].model_copy(update={"files": [], "methods": []})]
    draft, problems, _ = screened(p, instructions="", task=CORR_TASK, ground_truth=CORR_TRUTH, cards=alone)
    assert draft is None and "1 of the 2 usable criteria restate the ground truth" in problems[-1]


def test_criteria_restating_one_truth_number_are_asked_once_so_shared_evidence_can_complete_the_draft() -> None:
    """v13's amount-income report: four criteria restated the truth's r; with the files and the method both solvers
    share it stayed 4 gt of 6 and the draft was refused until the task was lost. The same number is asked once."""
    p = RubricProposal.model_validate({"dimensions": ["accuracy", "interpretation", "presentation", "clarity"],
                                       "criteria": [
        crit("r", "States the correlation of discount_pct and amount, -0.195", "gt", -0.1950231515318033),
        crit("r2", "Reports r = -0.195 for discount_pct against amount", "gt", dim="presentation"),
        crit("r3", "Says the correlation is -0.1950, a weak negative relation", "gt", dim="interpretation"),
        crit("r4", "Gives the coefficient -0.195 with its sign", "gt", dim="clarity")]})
    draft, problems, notes = screened(p, instructions="", task=CORR_TASK, ground_truth=CORR_TRUTH, cards=CORR_CARDS)
    assert problems == [] and [c.id for c in draft.criteria] == ["r", "ev_files", "ev_method1"]
    assert "dropped r2: it asks for the ground truth's number that r already asks for" in notes
    # different numbers of the truth are not repeats: a draft stating two of them keeps both
    two = "The business mean is 3.20 and the consumer mean is 2.02."
    p2 = RubricProposal.model_validate({"dimensions": DIMS, "criteria": [
        crit("b", "States the business mean basket size as 3.20", "gt", 3.20),
        crit("c", "States the consumer mean basket size as 2.02", "gt", 2.02)]})
    draft, problems, notes = screened(p2, instructions="", task=CORR_TASK, ground_truth=two, cards=CORR_CARDS)
    assert problems == [] and [c.id for c in draft.criteria][:2] == ["b", "c"]
    assert not any(n.startswith("dropped") for n in notes)
    # a repeat within the share stands in nobody's way: kept (2 gt of 5 is 40%)
    within = p.model_copy(update={"criteria": p.criteria[:2] + RubricProposal.model_validate({
        "dimensions": DIMS, "criteria": [crit("dir", "Says that larger discounts go with slightly smaller amounts"),
                                         crit("cav", "Mentions that repeated orders were kept"),
                                         crit("how", "Explains how the two columns were paired row by row")]}
    ).criteria})
    draft, problems, notes = screened(within, instructions="", task=CORR_TASK, ground_truth=CORR_TRUTH,
                                      cards=CORR_CARDS)
    assert problems == [] and [c.id for c in draft.criteria] == ["r", "r2", "dir", "cav", "how"]
