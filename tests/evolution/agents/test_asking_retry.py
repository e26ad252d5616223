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
