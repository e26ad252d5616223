"""Director: expansion or composition over the graph, built only on verified findings, never repeating."""

from __future__ import annotations

import pytest

from worldsmith.agents.director import direct, eligible_parents, render_graph
from worldsmith.core.evolution_schemas import (
    Composition,
    DomainProfile,
    Expansion,
    NodeRecord,
    WorkspaceProfile,
)
from worldsmith.core.schemas import Finding

WS = WorkspaceProfile(overview="Sales by region.", artifacts=[{"path": "sales.csv", "role": "one row per sale"}])
DOMAIN = DomainProfile(domain="retail", work_modes=["descriptive", "diagnostic"])
NODES = [
    NodeRecord(id="n0", depth=0, status="verified", findings=[
        Finding(id="f0", node_id="n0", statement="Mean amount is 30.0.", status="supported")]),
    NodeRecord(id="n1", parents=["n0"], mode="deepen", depth=1, status="verified", goal="Which region sells most?",
               findings=[Finding(id="f1", node_id="n1", statement="South sells 70 in total.", status="supported"),
                         Finding(id="f1x", node_id="n1", statement="East is growing.", status="unsupported")]),
    NodeRecord(id="n2", parents=["n0"], mode="deepen", depth=1, status="unsupported", goal="Is north declining?",
               findings=[Finding(id="f2", node_id="n2", statement="North fell 5%.", status="unsupported")]),
]
#: two analysis nodes with verified findings: a composition is possible (the root's overview never composes)
COMPOSABLE = [*NODES, NodeRecord(
    id="n3", parents=["n0"], mode="deepen", depth=1, status="verified", goal="What is the mean sale?",
    findings=[Finding(id="f3", node_id="n3", statement="The mean sale is 30.0.", status="supported")])]


def direction(q: str, depends_on: str = "f1", work_mode: str = "diagnostic") -> dict:
    return {"question": q, "mode": "deepen", "depends_on": depends_on, "work_mode": work_mode, "why": "it matters"}


def test_only_verified_nodes_below_the_depth_limit_are_eligible() -> None:
    assert [n.id for n in eligible_parents(NODES, max_depth=4)] == ["n0", "n1"]
    assert [n.id for n in eligible_parents(NODES, max_depth=1)] == ["n0"]


async def test_expansion_happy_path(scripted_llm) -> None:
    script, llm = scripted_llm
    script.queue({"decision": {"kind": "expansion", "parent": "n1",
                               "directions": [direction("How do south's units split by sale size?")]}})
    out = await direct(llm, NODES, WS, DOMAIN, seen=lambda q: False, k=2)
    assert isinstance(out.value.decision, Expansion) and out.value.decision.parent == "n1"
    prompt = script.requests[0].text
    assert "finding f1 [verified]: South sells 70 in total." in prompt and "finding f1x [unsupported]" in prompt
    assert "Eligible parents: n0, n1." in prompt


async def test_composition_needs_verified_findings_from_two_nodes(scripted_llm) -> None:
    script, llm = scripted_llm
    same_node = {"kind": "composition", "sources": ["f1", "f1x"], "relation": "r", "objective": "o", "why": "w"}
    with_root = {**same_node, "sources": ["f0", "f1"], "objective": "Does south's total explain the workspace?"}
    good = {**same_node, "sources": ["f3", "f1"], "objective": "Does south's total explain the overall mean?"}
    script.queue({"decision": same_node}, {"decision": with_root}, {"decision": good})
    out = await direct(llm, COMPOSABLE, WS, DOMAIN, seen=lambda q: False)
    assert isinstance(out.value.decision, Composition) and out.value.decision.sources == ["f3", "f1"]
    assert out.errors == ["sources ['f1x'] are not verified findings of analysis nodes",
                          "sources ['f0'] are not verified findings of analysis nodes (the initial workspace's "
                          "overview is not a finding to compose)"]


async def test_a_composition_never_goes_past_the_depth_limit(scripted_llm) -> None:
    """A composition is one deeper than its deepest source: findings at the limit are not offered or taken."""
    script, llm = scripted_llm
    deep = NodeRecord(id="n4", parents=["n1"], mode="deepen", depth=2, status="verified", goal="How big is south?",
                      findings=[Finding(id="f4", node_id="n4", statement="South has 7 stores.", status="supported")])
    too_deep = {"kind": "composition", "sources": ["f4", "f1"], "relation": "r", "why": "w",
                "objective": "Do south's stores explain its total?"}
    good = {**too_deep, "sources": ["f3", "f1"], "objective": "Does south's total explain the overall mean?"}
    script.queue({"decision": too_deep}, {"decision": good})
    out = await direct(llm, [*COMPOSABLE, deep], WS, DOMAIN, seen=lambda q: False, max_depth=2)
    assert out.value.decision.sources == ["f3", "f1"]
    assert out.errors == ["sources ['f4'] are at the depth limit: a composition of them would be deeper than the "
                          "max depth 2; compose findings of nodes above depth 2"]
    # at max depth 1 every analysis node is at the limit: nothing is offered to compose
    script.queue({"decision": {"kind": "expansion", "parent": "n0", "directions": [
        direction("How do sales split by region?", depends_on="f0")]}})
    await direct(llm, COMPOSABLE, WS, DOMAIN, seen=lambda q: False, max_depth=1)
    assert "sources" not in str(script.requests[-1].schema)


async def test_only_the_root_and_one_analysis_node_offer_no_composition(scripted_llm) -> None:
    script, llm = scripted_llm
    script.queue({"decision": {"kind": "expansion", "parent": "n1", "directions": [
        direction("How do south's units split by sale size?")]}})
    await direct(llm, NODES, WS, DOMAIN, seen=lambda q: False)
    assert "sources" not in str(script.requests[0].schema)


async def test_refused_compositions_get_a_last_try_that_offers_only_expansions(scripted_llm) -> None:
    script, llm = scripted_llm
    repeat = {"decision": {"kind": "composition", "sources": ["f3", "f1"], "relation": "r",
                           "objective": "Which region sells most?", "why": "w"}}
    script.queue(repeat, repeat, {"decision": {"kind": "expansion", "parent": "n1", "directions": [
        direction("How do south's units split by sale size?")]}})
    out = await direct(llm, COMPOSABLE, WS, DOMAIN, seen=lambda q: False, retries=1)
    assert isinstance(out.value.decision, Expansion) and len(out.calls) == 3
    assert "sources" in str(script.requests[1].schema) and "sources" not in str(script.requests[2].schema)


async def test_repeats_and_unverified_dependencies_are_refused(scripted_llm) -> None:
    script, llm = scripted_llm
    asked = {"what drives unit volume in the south?"}
    bad = {"decision": {"kind": "expansion", "parent": "n1", "directions": [
        direction("Which region sells most?"),                      # already a node's goal
        direction("What drives unit volume in the south?"),         # memory says seen
        direction("Why is east growing?", depends_on="f1x"),        # builds on an unsupported finding
    ]}}
    good = {"decision": {"kind": "expansion", "parent": "n1", "directions": [direction("Is south's total driven by "
                                                                                     "one large sale?")]}}
    script.queue(bad, good)
    out = await direct(llm, NODES, WS, DOMAIN, seen=lambda q: q.lower() in asked, k=3)
    assert out.ok and len(out.calls) == 2
    joined = "\n".join(out.errors)
    assert "'Which region sells most?' repeats a question" in joined
    assert "'What drives unit volume in the south?' repeats a question" in joined
    assert "depends_on 'f1x' is not a verified finding of node 'n1'" in joined


async def test_more_than_k_directions_keep_the_first_k(scripted_llm) -> None:
    script, llm = scripted_llm
    many = {"decision": {"kind": "expansion", "parent": "n1", "directions": [
        direction("Is south's total driven by one large sale?"), direction("Do units and amount move together?"),
        direction("Which region grows fastest by quarter?")]}}
    script.queue(many)
    out = await direct(llm, NODES, WS, DOMAIN, seen=lambda q: False, k=2)
    assert out.errors == [] and len(out.calls) == 1  # not a reason to ask again: the rest are dropped
    assert [d.question for d in out.value.decision.directions] == [
        "Is south's total driven by one large sale?", "Do units and amount move together?"]


async def test_salvage_takes_an_earlier_expansion_when_the_last_reply_is_an_unusable_composition(scripted_llm) -> None:
    script, llm = scripted_llm
    mixed = {"decision": {"kind": "expansion", "parent": "n1", "directions": [
        direction("Which region sells most?"), direction("Are south's sales concentrated in one sale?")]}}
    bad_compose = {"decision": {"kind": "composition", "sources": ["f1", "f1"], "relation": "r", "objective": "o",
                                "why": "w"}}
    script.queue(mixed, bad_compose)
    out = await direct(llm, COMPOSABLE, WS, DOMAIN, seen=lambda q: False, retries=1)
    assert out.ok and len(out.calls) == 2
    assert [d.question for d in out.value.decision.directions] == ["Are south's sales concentrated in one sale?"]


async def test_the_prompt_lists_the_tables_columns(scripted_llm) -> None:
    script, llm = scripted_llm
    script.queue({"decision": {"kind": "expansion", "parent": "n1", "directions": [
        direction("Is south's total driven by one large sale?")]}})
    await direct(llm, NODES, WS, DOMAIN, seen=lambda q: False, tables="- sales.csv (3 rows): region, amount")
    prompt = script.requests[0].messages[-1]["content"]
    assert "- sales.csv (3 rows): region, amount" in prompt and "Do not ask what a file contains" in prompt


async def test_an_ineligible_parent_is_refused_and_salvage_keeps_the_valid_directions(scripted_llm) -> None:
    script, llm = scripted_llm
    ineligible = {"decision": {"kind": "expansion", "parent": "n2", "directions": [direction("Q?", "f2")]}}
    mixed = {"decision": {"kind": "expansion", "parent": "n1", "directions": [
        direction("Which region sells most?"), direction("Are south's sales concentrated in one sale?")]}}
    script.queue(ineligible, mixed)
    out = await direct(llm, NODES, WS, DOMAIN, seen=lambda q: False, retries=1)
    assert "parent 'n2' is not eligible; choose one of ['n0', 'n1']" in out.errors
    assert [d.question for d in out.value.decision.directions] == ["Are south's sales concentrated in one sale?"]


async def test_nothing_to_build_on_makes_no_call(scripted_llm) -> None:
    script, llm = scripted_llm
    out = await direct(llm, [NODES[2]], WS, DOMAIN, seen=lambda q: False)
    assert out.value is None and out.calls == [] and script.requests == []
    assert "no node can be expanded" in out.errors[0]


def test_a_large_graph_sheds_unverified_findings_first() -> None:
    big = [NodeRecord(id=f"n{i}", depth=1, status="verified", goal=f"Question {i} " + "x" * 200, findings=[
        Finding(id=f"f{i}", node_id=f"n{i}", statement="verified " + "y" * 200, status="supported"),
        Finding(id=f"u{i}", node_id=f"n{i}", statement="refuted " + "z" * 200, status="unsupported")])
        for i in range(40)]
    text = render_graph(big, max_chars=12_000)
    assert len(text) <= 12_000
    assert all(f"node n{i} " in text and f"finding f{i} [verified]" in text for i in range(40))
    assert "finding u0" not in text
    assert "finding u0 [unsupported]" in render_graph(big[:2])


def test_a_decision_without_its_kind_is_read_by_its_fields() -> None:
    from worldsmith.core.evolution_schemas import DirectorOutput

    exp = DirectorOutput.model_validate({"decision": {"parent": "n1", "directions": [direction("Why south?")]}})
    comp = DirectorOutput.model_validate({"decision": {"sources": ["f1", "f2"], "relation": "r", "objective": "o",
                                                       "why": "w"}})
    assert isinstance(exp.decision, Expansion) and isinstance(comp.decision, Composition)


async def test_a_first_level_question_that_needs_a_join_is_refused(scripted_llm) -> None:
    script, llm = scripted_llm
    columns = {"crm.xlsx[crm]": ["customer_id", "region", "segment"],
               "orders.csv": ["order_id", "acct_ref", "discount_pct", "amount"]}
    join = {"decision": {"kind": "expansion", "parent": "n0", "directions": [
        direction("What is the average order amount for each region?", depends_on="f0")]}}
    one_table = {"decision": {"kind": "expansion", "parent": "n0", "directions": [
        direction("How does the discount pct relate to the amount of an order?", depends_on="f0")]}}
    deeper = {"decision": {"kind": "expansion", "parent": "n1", "directions": [
        direction("What is the average amount per segment?")]}}  # below the root a join may build on a finding
    script.queue(join, one_table, deeper)
    out = await direct(llm, NODES, WS, DOMAIN, seen=lambda q: False, columns=columns)
    assert out.errors == ["direction 'What is the average order amount for each region?' needs columns from several "
                          "tables ('amount' in orders.csv, 'region' in crm.xlsx[crm]); from the initial workspace ask "
                          "what one table answers"]
    # one table: accepted, and named (its goal would otherwise name no file)
    assert out.value.decision.directions[0].question == ("In orders.csv, how does the discount pct relate to the "
                                                         "amount of an order?")
    again = await direct(llm, NODES, WS, DOMAIN, seen=lambda q: False, columns=columns)
    assert again.errors == [] and again.value.decision.parent == "n1"


async def test_the_grammar_offers_only_what_is_possible(scripted_llm) -> None:
    script, llm = scripted_llm
    script.queue({"decision": {"kind": "expansion", "parent": "n0", "directions": [
        direction("Which region has the largest total amount?", depends_on="f0")]}})
    out = await direct(llm, NODES[:1], WS, DOMAIN, seen=lambda q: False)  # one verified node: nothing to compose
    assert isinstance(out.value.decision, Expansion)
    sent = str(script.requests[0].schema)
    assert "Expansion" in sent and "Composition" not in sent and "sources" not in sent


@pytest.mark.parametrize(("field", "written", "read"), [
    ("depends_on", "n1", "f1"),  # a node id written for the finding id is the parent's finding
    ("work_mode", "Diagnostics", "diagnostic"),  # a work mode the domain does not list is its closest listed one
])
async def test_a_direction_field_written_loosely_is_read_as_meant(scripted_llm, field: str, written: str,
                                                                  read: str) -> None:
    script, llm = scripted_llm
    script.queue({"decision": {"kind": "expansion", "parent": "n1", "directions": [
        direction("How do south's units split by sale size?", **{field: written})]}})
    out = await direct(llm, NODES, WS, DOMAIN, seen=lambda q: False)
    assert out.errors == [] and getattr(out.value.decision.directions[0], field) == read


async def test_composition_sources_written_as_node_ids_are_read_as_their_findings(scripted_llm) -> None:
    script, llm = scripted_llm
    script.queue({"decision": {"kind": "composition", "sources": ["n3", "1"], "relation": "r",
                               "objective": "Does south's total explain the overall mean?", "why": "w"}})
    nodes = [*COMPOSABLE[:3], COMPOSABLE[3].model_copy(update={"id": "1", "findings": [
        COMPOSABLE[3].findings[0].model_copy(update={"id": "f9", "node_id": "1"})]})]
    out = await direct(llm, [*nodes, COMPOSABLE[3]], WS, DOMAIN, seen=lambda q: False)
    assert out.errors == [] and out.value.decision.sources == ["f3", "f9"]


async def test_the_previous_rounds_refusal_is_in_the_prompt(scripted_llm) -> None:
    script, llm = scripted_llm
    script.queue({"decision": {"kind": "expansion", "parent": "n1", "directions": [
        direction("How do south's units split by sale size?")]}})
    await direct(llm, NODES, WS, DOMAIN, seen=lambda q: False, refused=["sources ['1', '2'] are not verified findings"])
    prompt = script.requests[0].messages[-1]["content"]
    assert "previous round was refused:\n- sources ['1', '2'] are not verified findings\nChoose differently this time." in prompt


async def test_question_ideas_are_offered_in_the_prompt(scripted_llm) -> None:
    script, llm = scripted_llm
    script.queue({"decision": {"kind": "expansion", "parent": "n1", "directions": [
        direction("How do south's units split by sale size?")]}})
    await direct(llm, NODES, WS, DOMAIN, seen=lambda q: False,
                 ideas=["In sales.csv, how does the mean amount differ across region?"])
    prompt = script.requests[0].messages[-1]["content"]
    assert "nobody has asked yet" in prompt and "- In sales.csv, how does the mean amount differ across region?" in prompt


async def test_a_direction_on_another_nodes_finding_takes_that_node_as_parent(scripted_llm) -> None:
    """Parent n0 (the initial workspace) with depends_on f1, a verified finding of n1: read as an expansion of n1,
    not refused ('f1 is not a verified finding of node n0' stalled a whole round of an embedded run)."""
    script, llm = scripted_llm
    script.queue({"decision": {"kind": "expansion", "parent": "n0",
                               "directions": [direction("How do south's units split by sale size?")]}})
    out = await direct(llm, NODES, WS, DOMAIN, seen=lambda q: False)
    assert out.errors == [] and out.value.decision.parent == "n1"
    assert out.value.decision.directions[0].depends_on == "f1"


async def test_a_direction_on_an_unverified_finding_is_still_refused(scripted_llm) -> None:
    script, llm = scripted_llm
    bad = {"decision": {"kind": "expansion", "parent": "n0",
                        "directions": [direction("Why did north fall?", depends_on="f2")]}}
    script.queue(bad, bad, bad)
    out = await direct(llm, NODES, WS, DOMAIN, seen=lambda q: False)
    assert out.value is None and "depends_on 'f2' is not a verified finding of node 'n0'" in out.errors[0]


async def test_directions_on_two_other_nodes_findings_keep_the_first_ones_node(scripted_llm) -> None:
    """Root as parent, one direction on f1 (node n1) and one on f3 (node n3): read as an expansion of n1; the f3
    direction cannot build on n1 and is dropped by salvage, so the round still plans the first."""
    script, llm = scripted_llm
    reply = {"decision": {"kind": "expansion", "parent": "n0", "directions": [
        direction("How do south's units split by sale size?"),
        direction("Is the mean sale stable over time?", depends_on="f3")]}}
    script.queue(reply, reply, reply)
    out = await direct(llm, COMPOSABLE, WS, DOMAIN, seen=lambda q: False)
    d = out.value.decision
    assert d.parent == "n1" and [x.depends_on for x in d.directions] == ["f1"]
    assert "depends_on 'f3' is not a verified finding of node 'n1'" in out.errors[0]


async def test_a_round_whose_replies_are_all_refused_takes_the_first_idea_a_parent_can_take(scripted_llm) -> None:
    """The 1.5B model repeated one refused question three times and two empty rounds ended an embedded run. The
    first idea is then taken: a one-table idea from the initial workspace; an idea that joins tables (refused
    from the initial workspace) deepens the latest verified node whose question names one of its files."""
    script, llm = scripted_llm
    columns = {"crm.xlsx[crm]": ["customer_id", "region", "income"],
               "orders.csv": ["order_id", "acct_ref", "discount_pct", "amount"]}
    nodes = [*NODES[:2], NodeRecord(
        id="n3", parents=["n0"], mode="deepen", depth=1, status="verified", goal="In orders.csv, how are "
        "discount_pct and amount correlated?",
        findings=[Finding(id="f3", node_id="n3", statement="r = -0.2.", status="supported")])]
    repeat = {"decision": {"kind": "expansion", "parent": "n1", "directions": [direction("Which region sells most?")]}}
    one_table = "In orders.csv, how does the mean amount differ across discount_pct?"
    join = ("Joining orders.csv (acct_ref) to crm.xlsx[crm] (customer_id), matching the ids by the number in them, "
            "how strongly are amount and income correlated?")
    script.queue(repeat, repeat, repeat)
    out = await direct(llm, nodes, WS, DOMAIN, seen=lambda q: False, columns=columns, ideas=[one_table],
                       retries=2)
    d = out.value.decision
    assert d.parent == "n0" and d.directions[0].question == one_table and d.directions[0].depends_on == "f0"
    assert d.directions[0].work_mode == "descriptive"  # the domain's first work mode
    assert out.errors[-1] == f"every reply was refused: took the idea {one_table!r} on node n0"

    script.queue(repeat, repeat, repeat)
    out = await direct(llm, nodes, WS, DOMAIN, seen=lambda q: False, columns=columns, ideas=[join], retries=2)
    d = out.value.decision
    assert d.parent == "n3" and d.directions[0].depends_on == "f3"  # n3's question names orders.csv; n1's does not

    script.queue(repeat, repeat, repeat)  # an idea every parent refuses (already asked) gives nothing
    out = await direct(llm, nodes, WS, DOMAIN, seen=lambda q: True, columns=columns, ideas=[one_table], retries=2)
    assert out.value is None


async def test_a_question_naming_no_file_is_given_the_table_its_columns_are_in(scripted_llm) -> None:
    script, llm = scripted_llm
    columns = {"orders_2023.csv": ["order_id", "discount_pct", "amount"],
               "orders_2024.csv": ["order_id", "discount_pct", "amt"],
               "orders_2025.csv": ["order_id", "discount_pct", "amt"],
               "crm.xlsx[crm]": ["customer_id", "segment"]}
    rows = {"orders_2023.csv": 1000, "orders_2024.csv": 1038, "orders_2025.csv": 2, "crm.xlsx[crm]": 200}
    asked = ["How strongly is discount_pct and amount correlated?",  # only the 2023 file holds both
             "How strongly is discount_pct and amt correlated?",  # 2024 and 2025: 2024 has 500 times the rows
             "What is the mean discount_pct in the 2025 orders?",  # three files; the question's year names one
             "How many order_id values are there?",  # three files of which none stands out: left as asked
             "In crm.xlsx, how many segment values are there?"]  # names its file already
    got = []
    for part in (asked[:3], asked[3:]):  # three directions a reply at most
        script.queue({"decision": {"kind": "expansion", "parent": "n0",
                                   "directions": [direction(q, depends_on="f0") for q in part]}})
        out = await direct(llm, NODES, WS, DOMAIN, seen=lambda q: False, columns=columns, rows=rows)
        got += [d.question for d in out.value.decision.directions]
    assert got == [
        "In orders_2023.csv, how strongly is discount_pct and amount correlated?",
        "In orders_2024.csv, how strongly is discount_pct and amt correlated?",
        "In orders_2025.csv, what is the mean discount_pct in the 2025 orders?",
        "How many order_id values are there?",
        "In crm.xlsx, how many segment values are there?"]
