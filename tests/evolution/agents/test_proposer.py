"""Proposer: a self-contained goal, dependencies on verified findings only, context numbers from those findings."""

from __future__ import annotations

from worldsmith.agents.proposer import propose
from worldsmith.core.evolution_schemas import (
    Composition,
    Direction,
    WorkspaceProfile,
)
from worldsmith.core.schemas import Finding

WS = WorkspaceProfile(overview="Sales by region.", artifacts=[{"path": "sales.csv", "role": "one row per sale"}])
FINDINGS = [Finding(id="f1", node_id="n1", statement="South sells 70.0 in total.", status="supported"),
            Finding(id="f9", node_id="n1", statement="East grew 12.5%.", status="unsupported")]
DIRECTION = Direction(question="Is south's total driven by one sale?", mode="deepen", depends_on="f1",
                      work_mode="diagnostic", why="concentration risk")


async def test_goal_package_happy_path(scripted_llm) -> None:
    script, llm = scripted_llm
    script.queue({"goal": "Using sales.csv, compute the largest single south sale and its share of south's total.",
                  "depends_on": ["f1"], "context_summary": "South sells 70.0 in total."})
    out = await propose(llm, DIRECTION, FINDINGS, WS)
    assert out.ok and out.value.depends_on == ["f1"]
    prompt = script.requests[0].text
    assert "- f1: South sells 70.0 in total." in prompt and "f9" not in prompt  # unverified findings never shown
    assert script.requests[0].max_tokens == 512  # a runaway reply stops at half the default 1,024


async def test_dangling_references_unknown_findings_and_invented_numbers_are_sent_back(scripted_llm) -> None:
    script, llm = scripted_llm
    bad = {"goal": "Building on the previous step, find the largest south sale.", "depends_on": ["f1", "f9"],
           "context_summary": "South sells 70.0 in total and east grew 12.5%."}
    good = {"goal": "Using sales.csv, find the largest single south sale.", "depends_on": ["f1"],
            "context_summary": "South sells 70 in total."}
    script.queue(bad, good)
    out = await propose(llm, DIRECTION, FINDINGS, WS)
    assert out.ok and out.value.goal.startswith("Using sales.csv")
    assert out.errors == [
        "the goal must stand on its own; it refers to 'previous step', which the analyst cannot see",
        "depends_on names ['f9'], which are not verified findings given to you (f1)",
        "the context summary states 12.5%, which no finding in depends_on states"]


async def test_a_composition_goal_must_depend_on_every_source(scripted_llm) -> None:
    script, llm = scripted_llm
    both = FINDINGS[:1] + [Finding(id="f2", node_id="n2", statement="North sells 40 in total.",
                                         status="revised")]
    comp = Composition(sources=["f1", "f2"], relation="two regional totals", objective="Compare south and north "
                       "totals as shares of all sales.", why="neither total alone gives the share")
    one = {"goal": "Using sales.csv, compute south's share of all sales.", "depends_on": ["f1"],
           "context_summary": "South sells 70.0 in total."}
    two = {**one, "goal": "Using sales.csv, compute south's and north's shares of all sales.",
           "depends_on": ["f1", "f2"], "context_summary": "South sells 70.0 and north 40 in total."}
    script.queue(one, two)
    out = await propose(llm, comp, both, WS)
    assert out.value.depends_on == ["f1", "f2"]
    assert out.errors == ["depends_on must include ['f2']: the direction builds on them"]
    sources = [m.source for m in out.calls[1].messages]
    assert sources == ["system", "task", "model", "feedback"] and not any(m.trainable for m in out.calls[1].messages)


def test_a_goal_naming_files_the_question_does_not_is_sent_back() -> None:
    from worldsmith.agents.proposer import goal_problems
    from worldsmith.core.evolution_schemas import GoalPackage

    files = ["crm.xlsx", "orders_2024.csv", "memos/crm.md"]
    question = "In orders_2024.csv, how does the monthly mean of amt change over date?"
    widened = GoalPackage(goal="Compute the monthly mean of amount using the crm.xlsx and orders_2024.csv files.")
    assert goal_problems(widened, {}, [], question=question, files=files) == [
        "the question uses orders_2024.csv only; the goal also names crm.xlsx: keep to the question's files"]
    # v15: "… using the crm table as a join key" for a correlation inside one order file
    by_stem = GoalPackage(goal="Compute the monthly mean of amt in orders_2024.csv using the crm table as a join key.")
    assert goal_problems(by_stem, {}, [], question=question, files=files) == [
        "the question uses orders_2024.csv only; the goal also names crm.xlsx: keep to the question's files"]
    # v16: a list of stems before "tables"
    listed = GoalPackage(goal="Compute the monthly mean of amt in orders_2024.csv using the crm and orders_2024 "
                              "tables.")
    assert goal_problems(listed, {}, [], question=question, files=files) == [
        "the question uses orders_2024.csv only; the goal also names crm.xlsx: keep to the question's files"]
    # a stem that is only a word of the sentence, with no word for tables after it, is not a file
    assert goal_problems(GoalPackage(goal="Compute the monthly mean of amt per crm segment in orders_2024.csv."),
                         {}, [], question=question, files=files) == []
    kept = GoalPackage(goal="Compute the monthly mean of amt over date in orders_2024.csv.")
    assert goal_problems(kept, {}, [], question=question, files=files) == []
    # a question naming no file leaves the goal free to name any
    assert goal_problems(widened, {}, [], question="How do orders relate to customers?", files=files) == []
    # below a node whose goal joined the two files, a question naming one of them may use both (v8 ended on two
    # rounds of such refusals: "In orders_2023.csv, how does the mean amount differ across customer segment?")
    joined = "Joining orders_2024.csv (acct_ref) to crm.xlsx[crm] (customer_id), how are amt and income correlated?"
    assert goal_problems(widened, {}, [], question=question, files=files, inherited=joined) == []
    assert goal_problems(widened, {}, [], question=question, files=files, inherited="In orders_2024.csv, …") != []


def test_numbers_of_the_question_and_file_names_are_not_claims() -> None:
    from worldsmith.agents.proposer import goal_problems
    from worldsmith.core.evolution_schemas import GoalPackage

    goal = GoalPackage(goal="Compute the mean basket_size by channel in orders_2024.csv.",
                       context_summary="The 2024 orders are in orders_2024.csv; their mean basket is 2.46.")
    files = ["orders_2024.csv"]
    problems = goal_problems(goal, {}, [], question="In orders_2024.csv, how does the mean basket_size differ?",
                             files=files)
    assert problems == ["the context summary states 2.46, which no finding in depends_on states"]  # 2024: a name


async def test_when_every_reply_is_refused_the_question_is_the_goal(scripted_llm) -> None:
    script, llm = scripted_llm
    ws = WorkspaceProfile(overview="Orders and customers.", artifacts=[
        {"path": "orders.csv", "role": "orders"}, {"path": "crm.xlsx", "role": "customers"}])
    direction = Direction(question="In orders.csv, how does the mean amount differ across channel?", mode="deepen",
                          depends_on="f1", work_mode="diagnostic", why="channel mix")
    widened = {"goal": "Using orders.csv and crm.xlsx, compare the mean amount by channel.", "depends_on": ["f1"],
               "context_summary": ""}
    script.queue(widened, widened, widened)
    out = await propose(llm, direction, FINDINGS, ws, retries=2)
    assert out.value.goal == direction.question and out.value.depends_on == ["f1"]
    assert out.value.context_summary == "South sells 70.0 in total."
    assert out.errors[-1] == "every reply was refused: the question is the goal" and len(out.calls) == 3
    # a question that itself breaks a rule (it points at a step the analyst cannot see) is not taken
    dangling = direction.model_copy(update={"question": "As before, how does the mean amount differ by channel?"})
    stepwise = {**widened, "goal": "Building on the previous step, compare the mean amount by channel."}
    script.queue(stepwise, stepwise, stepwise)
    assert (await propose(llm, dangling, FINDINGS, ws, retries=2)).value is None
