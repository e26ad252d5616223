"""Provider selection from config, and the scripted provider's rules, queues and recording."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from worldsmith.llm import EndpointConfig, LLMConfigError, LLMRequestError
from worldsmith.llm.ping import ping
from worldsmith.llm.providers.scripted import Script, register_script, unregister_script

SCRIPTED = EndpointConfig(provider="scripted", model="unit-test-script")


class Verdict(BaseModel):
    ok: bool
    reason: str


def test_provider_follows_config_per_role(make_llm) -> None:
    llm = make_llm(SCRIPTED, roles={"judge": {"provider": "openai", "base_url": "http://localhost:9/v1"},
                                    "student": {"provider": "embedded", "model": "smollm2-135m"}})
    assert llm.provider("agent").name == "scripted"
    assert llm.provider("judge").name == "openai"
    assert llm.provider("student").name == "embedded"  # built lazily: nothing is loaded yet
    assert llm.provider("teacher") is llm.provider("agent")  # same endpoint → one provider, one limit


def test_rules_queue_fallback_and_recording(make_llm) -> None:
    llm = make_llm(SCRIPTED)
    script: Script = llm.script("agent")
    script.on(r"2\s*\+\s*3", "5").on("weather", "sunny", role="judge", regex=False)
    script.queue("first", "second", role="agent").fallback(lambda req: f"echo:{req.last_user}")
    ask = lambda text, role="agent": llm.complete([{"role": "user", "content": text}], role=role).text
    assert ask("what is 2+3") == "first"  # queue before rules
    assert ask("what is 2+3") == "second"
    assert ask("what is 2 + 3") == "5"
    assert ask("weather?", role="judge") == "sunny"
    assert ask("weather?", role="agent") == "echo:weather?"  # the rule is judge-only
    assert [r.role for r in script.requests] == ["agent"] * 3 + ["judge", "agent"]
    assert script.requests[2].last_user == "what is 2 + 3"


def test_rule_times_and_no_match_error(make_llm) -> None:
    llm = make_llm(SCRIPTED)
    llm.script("agent").on("ping", "pong", times=1)
    assert llm.complete([{"role": "user", "content": "ping"}]).text == "pong"
    with pytest.raises(LLMRequestError, match="no queued answer or rule matches role 'agent'"):
        llm.complete([{"role": "user", "content": "ping"}])


def test_stop_sequences_and_max_tokens(make_llm) -> None:
    llm = make_llm(SCRIPTED)
    llm.script("agent").fallback("<think>x</think><code>print(1)</code><interpreter>1</interpreter>")
    c = llm.complete([{"role": "user", "content": "go"}], stop=["<interpreter>"])
    assert c.text == "<think>x</think><code>print(1)</code>" and c.finish_reason == "stop"
    llm.script("agent").queue("a b c d e f")
    c = llm.complete([{"role": "user", "content": "go"}], max_tokens=3)
    assert (c.text, c.finish_reason) == ("a b c", "length")


def test_scripted_answers_are_not_cached(make_llm) -> None:
    llm = make_llm(SCRIPTED)
    llm.script("agent").queue("one", "two")
    msg = [{"role": "user", "content": "same"}]
    assert [llm.complete(msg).text, llm.complete(msg).text] == ["one", "two"]


def test_structured_with_model_answers_and_repair(make_llm) -> None:
    llm = make_llm(SCRIPTED)
    llm.script("judge").queue('{"ok": "maybe"}', Verdict(ok=True, reason="fine"), role="judge")
    res = llm.structured_result([{"role": "user", "content": "judge this"}], Verdict, role="judge")
    assert res.value == Verdict(ok=True, reason="fine") and res.repaired
    req = llm.script("judge").requests[0]
    assert req.schema is not None and req.schema["title"] == "Verdict"


def test_declarative_rules_from_extra_body(make_llm) -> None:
    ep = EndpointConfig(provider="scripted", model="declared",
                        extra_body={"rules": [{"pattern": "capital of France", "response": "Paris"}],
                                    "default": "unknown"})
    llm = make_llm(ep)
    assert llm.complete([{"role": "user", "content": "the capital of France?"}]).text == "Paris"
    assert llm.complete([{"role": "user", "content": "?"}]).text == "unknown"
    bad = make_llm(EndpointConfig(provider="scripted", model="bad", extra_body={"rulez": []}))
    with pytest.raises(LLMConfigError, match="rulez"):
        bad.complete([{"role": "user", "content": "x"}])


def test_registered_script_is_selected_by_model_name(make_llm) -> None:
    script = register_script("registered-for-test", Script().fallback("from the registry"))
    try:
        llm = make_llm(EndpointConfig(provider="scripted", model="registered-for-test"))
        assert llm.complete([{"role": "user", "content": "x"}]).text == "from the registry"
        assert len(script.requests) == 1
    finally:
        unregister_script("registered-for-test")


async def test_async_scripted_and_messages_validation(make_llm) -> None:
    llm = make_llm(SCRIPTED)
    llm.script("agent").fallback("ok")
    assert (await llm.acomplete([{"role": "user", "content": "x"}])).text == "ok"
    with pytest.raises(ValueError, match=r"messages\[0\]"):
        llm.complete([{"role": "narrator", "content": "x"}])
    with pytest.raises(ValueError, match="empty"):
        llm.complete([])
    with pytest.raises(TypeError, match="unexpected option"):
        llm.structured([{"role": "user", "content": "x"}], Verdict, temprature=0.5)


def test_ping_reports_answer(make_llm) -> None:
    llm = make_llm(SCRIPTED)
    llm.script("agent").fallback('{"greeting": "hi there", "answer": 5}')
    r = ping(llm, "agent")
    assert (r.provider, r.model, r.correct, r.answer.greeting) == ("scripted", "unit-test-script", True, "hi there")
    assert r.completion_tokens > 0 and not r.repaired


def test_a_json_string_with_raw_line_breaks_is_read() -> None:
    """Small models write scripts into JSON strings with literal newlines; the value is unambiguous."""
    from worldsmith.llm.structured import extract_json

    assert extract_json('{"code": "import pandas as pd\nprint(1)"}') == {"code": "import pandas as pd\nprint(1)"}
    assert extract_json('{"a": 1}') == {"a": 1}
