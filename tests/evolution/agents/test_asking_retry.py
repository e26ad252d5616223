"""ask(): a runaway reply goes back into the retry conversation cut, so the retry fits the model's context."""

from __future__ import annotations

from pydantic import BaseModel

from worldsmith.agents.asking import RETRY_REPLY_CHARS, ask


class Pick(BaseModel):
    name: str


async def test_a_runaway_reply_is_sent_back_cut(scripted_llm) -> None:
    script, llm = scripted_llm
    runaway = "{" + "x" * (3 * RETRY_REPLY_CHARS)  # not JSON, and three times the cap
    script.queue(runaway, runaway, {"name": "ok"})
    out = await ask(llm, [{"role": "user", "content": "Pick one."}], Pick, role="agent", templates={})
    assert out.value == Pick(name="ok")
    retry = script.requests[-1].messages
    sent_back = [m["content"] for m in retry if m["role"] == "assistant"]
    assert sent_back and all(len(c) <= RETRY_REPLY_CHARS + 10 and c.endswith("…[cut]") for c in sent_back)
    assert retry[0]["content"] == "Pick one."  # the question itself is never cut


async def test_only_the_latest_failed_reply_goes_back(scripted_llm) -> None:
    """Two replies the check refuses, then a good one: the third ask holds the question, the second reply and its
    problems, not the first exchange (two cut runaways of digits would otherwise overflow an 8k context)."""
    script, llm = scripted_llm
    script.queue({"name": "first"}, {"name": "second"}, {"name": "ok"})
    out = await ask(llm, [{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": "Pick one."}],
                    Pick, role="agent", templates={},
                    check=lambda p: [] if p.name == "ok" else [f"{p.name!r} is not allowed"])
    assert out.value == Pick(name="ok") and len(script.requests) == 3
    third = script.requests[-1].messages
    assert [m["role"] for m in third] == ["system", "user", "assistant", "user"]
    assert "second" in third[2]["content"] and "'second' is not allowed" in third[3]["content"]
    assert not any("first" in m["content"] for m in third)
    assert out.errors == ["'first' is not allowed", "'second' is not allowed"]  # both stay on record
