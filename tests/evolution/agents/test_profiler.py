"""Profiler: deterministic file profiles in, workspace + domain profile out, checked against the files."""

from __future__ import annotations

from pathlib import Path

import pytest

from worldsmith.agents.profiler import profile
from worldsmith.llm.errors import LLMFatalError
from worldsmith.tools.files.profile import profile_workspace

GOOD = {"workspace": {"overview": "Sales amounts and units by region.",
                      "artifacts": [{"path": "sales.csv", "role": "one row per sale"}],
                      "relations": [], "usage_notes": ["aggregate by region"], "hazards": []},
        "domain": {"domain": "retail sales", "work_modes": ["descriptive", "comparative"], "methods": ["groupby"]}}


async def test_profile_describes_the_profiled_files(scripted_llm, data: Path) -> None:
    script, llm = scripted_llm
    script.queue(GOOD)
    out = await profile(llm, profile_workspace(data))
    assert out.ok and out.errors == []
    assert [a.path for a in out.value.workspace.artifacts] == ["sales.csv"]
    assert out.value.domain.work_modes == ["descriptive", "comparative"]
    assert "sales.csv" in script.requests[0].text and "amount" in script.requests[0].text  # the profiles were shown
    assert len(out.calls) == 1 and out.calls[0].templates["evolve_profiler.md"].startswith("sha256:")
    assert out.calls[0].messages[0].role == "system" and out.calls[0].completion.startswith("{")


async def test_an_invented_file_and_malformed_json_are_sent_back(scripted_llm, data: Path) -> None:
    script, llm = scripted_llm
    invented = {**GOOD, "workspace": {**GOOD["workspace"],
                                      "artifacts": [{"path": "customers.csv", "role": "one row per customer"}]}}
    # a schema-valid draft naming a file that does not exist; then broken JSON twice (the LLM layer's own repair
    # retry included); then a good answer
    script.queue(invented, "{not json", "still not json", GOOD)
    out = await profile(llm, profile_workspace(data), retries=2)
    assert out.ok
    assert any("customers.csv" in e and "not one of the profiled files" in e for e in out.errors)
    assert any("not valid JSON" in e for e in out.errors)
    assert len(script.requests) == 4 and len(out.calls) == 3  # the layer's repair is recorded inside one call
    assert out.calls[1].finish_reason == "invalid" and out.calls[1].completion == "still not json"
    assert "customers.csv" in script.requests[1].last_user and "Fix exactly these problems" in script.requests[1].last_user


async def test_giving_up_returns_the_reasons(scripted_llm, data: Path) -> None:
    script, llm = scripted_llm
    bad = {**GOOD, "workspace": {**GOOD["workspace"], "relations": [
        {"left": "orders.csv.id", "right": "sales.csv.region", "kind": "join"}]}}
    script.queue(bad, bad)
    out = await profile(llm, profile_workspace(data), retries=1)
    assert out.value is None and len(out.calls) == 2
    assert out.errors.count("relation side 'orders.csv.id' does not name a profiled file as 'file.column'") == 2


async def test_a_failed_request_is_recorded_and_an_unreachable_endpoint_stops_the_run(scripted_llm, data: Path) -> None:
    script, llm = scripted_llm
    out = await profile(llm, profile_workspace(data))  # nothing scripted: the provider refuses the request
    assert out.value is None and out.calls == [] and "ProfilerOutput:" in out.errors[0]

    def unreachable(req):  # type: ignore[no-untyped-def]
        raise LLMFatalError("endpoint unreachable", kind="unreachable")

    script.queue(unreachable)
    with pytest.raises(LLMFatalError, match="unreachable"):
        await profile(llm, profile_workspace(data))


def test_a_relation_may_name_a_file_without_its_extension_when_that_is_unambiguous() -> None:
    from worldsmith.agents.profiler import _file_of

    known = {"crm.xlsx", "crm.xlsx[crm]", "memos/crm.md", "orders_2023.csv", "orders_2024.csv", "notes.csv",
             "notes.json"}
    assert _file_of("crm.customer_id", known) == "crm.xlsx"
    assert _file_of("orders_2023.acct_ref", known) == "orders_2023.csv"
    assert _file_of("orders_2023.csv.acct_ref", known) == "orders_2023.csv"
    assert _file_of("notes.id", known) is None  # two files share the stem: ambiguous
    assert _file_of("customers.id", known) is None


async def test_free_text_is_capped_in_the_grammar_and_cut_from_other_endpoints(scripted_llm, data: Path) -> None:
    """The embedded profiler looped one overview sentence to its token budget: the schema the model is held to
    says maxLength, and a longer overview (an endpoint without grammars) is cut, not refused."""
    script, llm = scripted_llm
    looping = {**GOOD, "workspace": {**GOOD["workspace"], "overview": "The workspace includes hazards. " * 200,
                                     "hazards": ["missing values " * 100]}}
    script.queue(looping)
    out = await profile(llm, profile_workspace(data))
    assert out.ok and len(out.value.workspace.overview) <= 700 and len(out.value.workspace.hazards[0]) <= 300
    sent = script.requests[0].schema
    ws = sent["$defs"]["WorkspaceProfile"]["properties"]
    assert ws["overview"]["maxLength"] == 700 and ws["hazards"]["items"]["maxLength"] == 300
