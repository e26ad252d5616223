"""The real client path (openai SDK over HTTP) against the fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest
from pydantic import BaseModel

from tests.fakes.fake_openai import Action, FakeOpenAI
from worldsmith.llm import LLMConfigError, LLMOutputError, LLMRequestError, LLMUnavailableError

MSG = [{"role": "user", "content": "hello there"}]


class Point(BaseModel):
    x: int
    y: int


def _no_raw_chain(exc: BaseException) -> None:
    """Our errors are one line: no httpx/openai exception chained behind them."""
    assert exc.__cause__ is None and exc.__suppress_context__


def test_complete_sends_config_and_returns_completion(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.responder = lambda body: "alpha beta <interpreter> gamma"
    llm = make_llm(fake_openai.endpoint(temperature=0.0, max_tokens=50))
    c = llm.complete(MSG, stop=["<interpreter>"])
    assert c.text == "alpha beta " and c.finish_reason == "stop"
    assert (c.provider, c.model, c.cached) == ("openai", "fake-model", False)
    assert c.usage.prompt_tokens == 2 and c.usage.completion_tokens == 2
    body = fake_openai.requests[0]
    assert body["model"] == "fake-model" and body["max_tokens"] == 50 and body["stop"] == ["<interpreter>"]
    assert body["messages"] == MSG
    assert fake_openai.headers[0]["authorization"] == "Bearer EMPTY"  # localhost, no key configured


def test_429_then_ok_respects_retry_after(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.enqueue(Action.rate_limit(retry_after=0.3))
    llm = make_llm(fake_openai.endpoint(backoff_base_s=0.001))
    t0 = time.perf_counter()
    c = llm.complete(MSG)
    assert c.text == "Hello from the fake server."
    assert fake_openai.request_count == 2
    assert time.perf_counter() - t0 >= 0.29  # waited as told, not the 1 ms backoff
    assert llm.usage()["agent"].retries == 1


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_then_ok(fake_openai: FakeOpenAI, make_llm, status: int) -> None:
    fake_openai.enqueue(Action.server_error(status))
    llm = make_llm(fake_openai.endpoint())
    assert llm.complete(MSG).text == "Hello from the fake server."
    assert fake_openai.request_count == 2


def test_timeout_then_ok(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.enqueue(Action.hang(4.0))
    llm = make_llm(fake_openai.endpoint(timeout_s=1.5))  # a healthy reply on a loaded machine stays well inside
    assert llm.complete(MSG).text == "Hello from the fake server."
    assert fake_openai.request_count == 2
    assert llm.usage()["agent"].retries == 1


def test_persistent_5xx_gives_up_with_one_clear_line(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.enqueue(*[Action.server_error(503)] * 10)
    llm = make_llm(fake_openai.endpoint(max_retries=2))
    with pytest.raises(LLMUnavailableError) as info:
        llm.complete(MSG)
    msg = str(info.value)
    assert "HTTP 503" in msg and "3 attempts" in msg and "llm.default.base_url" in msg and "\n" not in msg
    assert fake_openai.request_count == 3
    _no_raw_chain(info.value)
    assert llm.usage()["agent"].errors == 1


def test_connection_refused_names_base_url(make_llm) -> None:
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from worldsmith.llm import EndpointConfig

    ep = EndpointConfig(provider="openai", model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1,
                        backoff_base_s=0.001, timeout_s=2)
    llm = make_llm(ep, roles={"judge": {"max_retries": 0}})
    with pytest.raises(LLMUnavailableError) as info:
        llm.complete(MSG, role="judge")
    msg = str(info.value)
    assert "cannot connect" in msg and f"127.0.0.1:{port}" in msg and "llm.default.base_url" in msg
    assert "role 'judge'" in msg
    _no_raw_chain(info.value)


def test_wrong_model_is_404_not_retried(fake_openai: FakeOpenAI, make_llm) -> None:
    llm = make_llm(fake_openai.endpoint(), roles={"judge": {"model": "gpt-nope"}})
    with pytest.raises(LLMUnavailableError) as info:
        llm.complete(MSG, role="judge")
    msg = str(info.value)
    assert "llm.roles.judge.model" in msg and "'gpt-nope'" in msg and "404" in msg
    assert fake_openai.request_count == 1
    _no_raw_chain(info.value)


def test_missing_key_for_remote_endpoint_is_a_config_error(make_llm) -> None:
    from worldsmith.llm import EndpointConfig

    llm = make_llm(EndpointConfig(provider="openai", model="gpt-4o-mini", base_url="https://api.example.com/v1"))
    with pytest.raises(LLMConfigError) as info:
        llm.complete(MSG)
    assert "llm.default.api_key_env" in str(info.value)
    assert llm.check(["agent"])["agent"] == str(info.value)


def test_api_key_env_unset_and_set(fake_openai: FakeOpenAI, make_llm, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WS_TEST_KEY", raising=False)
    llm = make_llm(fake_openai.endpoint(api_key_env="WS_TEST_KEY"))
    with pytest.raises(LLMConfigError, match="WS_TEST_KEY is not set"):
        llm.complete(MSG)
    assert fake_openai.request_count == 0
    monkeypatch.setenv("WS_TEST_KEY", "sk-test-123")
    llm2 = make_llm(fake_openai.endpoint(api_key_env="WS_TEST_KEY"))
    llm2.complete(MSG)
    assert fake_openai.headers[-1]["authorization"] == "Bearer sk-test-123"


def test_rejected_key_names_the_key_setting(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.enqueue(Action(status=401, error="Incorrect API key provided"))
    llm = make_llm(fake_openai.endpoint(api_key="sk-wrong"))
    # the key came from llm.default.api_key, so that is the setting named (not api_key_env, which was unset)
    with pytest.raises(LLMConfigError, match="HTTP 401.*llm.default.api_key .*WORLDSMITH_LLM__DEFAULT__API_KEY"):
        llm.complete(MSG)


def test_structured_repair_after_invalid_json(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.enqueue(Action.reply("sure! x is 1"), Action.reply('{"x": 1, "y": 2}'))
    llm = make_llm(fake_openai.endpoint())
    res = llm.structured_result(MSG, Point)
    assert res.value == Point(x=1, y=2) and res.repaired
    repair = fake_openai.requests[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": "sure! x is 1"}
    assert "not valid JSON" in repair[-1]["content"]
    assert llm.usage()["agent"].repairs == 1


def test_structured_repair_after_validation_error(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.enqueue(Action.reply('{"x": "one", "y": 2}'), Action.reply('```json\n{"x": 1, "y": 2}\n```'))
    llm = make_llm(fake_openai.endpoint())
    assert llm.structured(MSG, Point) == Point(x=1, y=2)
    assert "x:" in fake_openai.requests[1]["messages"][-1]["content"]  # the error names the field


def test_structured_invalid_twice_raises_output_error(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.enqueue(Action.reply("nope"), Action.reply('{"x": 1}'))
    llm = make_llm(fake_openai.endpoint())
    with pytest.raises(LLMOutputError) as info:
        llm.structured(MSG, Point)
    err = info.value
    assert err.raw_text == '{"x": 1}' and any(e.startswith("y:") for e in err.errors)
    assert "Point" in str(err) and fake_openai.request_count == 2


def test_json_schema_rejected_falls_back_and_remembers(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.reject_json_schema = True
    fake_openai.responder = lambda body: '{"x": 3, "y": 4}'
    llm = make_llm(fake_openai.endpoint())
    assert llm.structured(MSG, Point) == Point(x=3, y=4)
    kinds = [(r.get("response_format") or {}).get("type") for r in fake_openai.requests]
    assert kinds == ["json_schema", "json_object"]
    sent = fake_openai.requests[0]["response_format"]["json_schema"]
    assert sent["name"] == "Point" and sent["schema"]["required"] == ["x", "y"] and sent["strict"] is False
    llm.structured([{"role": "user", "content": "again"}], Point)
    assert fake_openai.requests[-1]["response_format"]["type"] == "json_object"  # remembered
    fake_openai.reject_json_object = True
    llm.structured([{"role": "user", "content": "third"}], Point)
    assert "response_format" not in fake_openai.requests[-1]  # prompt-only JSON
    assert "JSON schema" in fake_openai.requests[-1]["messages"][-1]["content"]


def test_forced_json_schema_rejection_is_a_request_error(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.reject_json_schema = True
    llm = make_llm(fake_openai.endpoint(structured="json_schema"))
    with pytest.raises(LLMRequestError, match="HTTP 400"):
        llm.structured(MSG, Point)
    assert fake_openai.request_count == 1


async def test_async_concurrency_limit_is_respected(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.latency_s = 0.1
    llm = make_llm(fake_openai.endpoint(concurrency=3), cache=False)
    results = await asyncio.gather(*[llm.acomplete([{"role": "user", "content": f"q{i}"}]) for i in range(10)])
    assert len(results) == 10 and fake_openai.request_count == 10
    assert fake_openai.max_in_flight == 3


def test_sync_concurrency_limit_is_shared_between_roles(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.latency_s = 0.1
    llm = make_llm(fake_openai.endpoint(concurrency=2), roles={"judge": {"temperature": 0.5}}, cache=False)
    threads = [threading.Thread(target=llm.complete, args=([{"role": "user", "content": f"q{i}"}],),
                                kwargs={"role": "judge" if i % 2 else "agent"}) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake_openai.request_count == 8 and fake_openai.max_in_flight == 2


def test_cache_hits_and_misses(fake_openai: FakeOpenAI, make_llm) -> None:
    llm = make_llm(fake_openai.endpoint())
    first = llm.complete(MSG)
    second = llm.complete(MSG)
    assert fake_openai.request_count == 1
    assert second.cached and not first.cached and second.text == first.text and second.usage == first.usage
    llm.complete(MSG, max_tokens=7)
    llm.complete(MSG, stop=["x"])
    llm.complete(MSG, temperature=0.5)
    llm.complete([{"role": "user", "content": "hello there!"}])
    assert fake_openai.request_count == 5
    llm.complete(MSG, use_cache=False)
    assert fake_openai.request_count == 6
    u = llm.usage()["agent"]
    assert (u.calls, u.cached_calls) == (7, 1)
    # a fresh LLM with the same home reads the same cache (cheap resume)
    again = make_llm(fake_openai.endpoint())
    assert again.complete(MSG).cached and fake_openai.request_count == 6


def test_sampling_index_gives_distinct_cacheable_samples(fake_openai: FakeOpenAI, make_llm) -> None:
    llm = make_llm(fake_openai.endpoint(temperature=0.7))
    llm.complete(MSG, sample_index=0)
    llm.complete(MSG, sample_index=1)
    llm.complete(MSG, sample_index=1)
    assert fake_openai.request_count == 2
    assert [r["seed"] for r in fake_openai.requests] == [0, 1]
    greedy = make_llm(fake_openai.endpoint(temperature=0.0))
    greedy.complete(MSG, sample_index=0)
    greedy.complete(MSG, sample_index=3)  # greedy decoding: every sample is the same request
    assert fake_openai.request_count == 3


def test_cache_disabled_in_config_writes_nothing(fake_openai: FakeOpenAI, make_llm, tmp_path) -> None:
    llm = make_llm(fake_openai.endpoint(), cache=False)
    llm.complete(MSG)
    llm.complete(MSG)
    assert fake_openai.request_count == 2
    assert not (tmp_path / "home" / "cache").exists()


def test_accounting_per_role(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.responder = lambda body: "one two three"
    llm = make_llm(fake_openai.endpoint(), roles={"judge": {"max_tokens": 10}})
    llm.complete([{"role": "user", "content": "a b"}], role="agent")
    llm.complete([{"role": "user", "content": "a b c"}], role="judge")
    llm.complete([{"role": "user", "content": "a b c d"}], role="judge")
    usage = llm.usage()
    assert (usage["agent"].calls, usage["agent"].prompt_tokens, usage["agent"].completion_tokens) == (1, 2, 3)
    assert (usage["judge"].calls, usage["judge"].prompt_tokens, usage["judge"].completion_tokens) == (2, 7, 6)
    assert usage["judge"].latency_s > 0
    assert llm.usage_total().calls == 3


async def test_async_twins(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.enqueue(Action.server_error(500), Action.reply("hi"), Action.reply("bad"), Action.reply('{"x":1,"y":1}'))
    llm = make_llm(fake_openai.endpoint())
    assert (await llm.acomplete(MSG)).text == "hi"
    assert await llm.astructured([{"role": "user", "content": "p"}], Point) == Point(x=1, y=1)
    assert fake_openai.request_count == 4


def test_fake_server_streams_and_lists_models(fake_openai: FakeOpenAI) -> None:
    import openai

    client = openai.OpenAI(base_url=fake_openai.base_url, api_key="x", max_retries=0)
    assert [m.id for m in client.models.list()] == ["fake-model"]
    stream = client.chat.completions.create(model="fake-model", messages=MSG, stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "Hello from the fake server."
    client.close()


@pytest.mark.parametrize(("message", "context"), [
    ("This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.", True),  # OpenAI, vLLM
    ("the request exceeds the available context size, try increasing it", True),  # llama-server
    ("response_format type 'json_object' is not supported by this server", False),
])
def test_a_prompt_over_the_context_is_a_context_error(fake_openai: FakeOpenAI, make_llm, message: str,
                                                      context: bool) -> None:
    from worldsmith.llm.errors import LLMContextError

    fake_openai.enqueue(Action(status=400, error=message))
    llm = make_llm(fake_openai.endpoint(), cache=False)
    with pytest.raises(LLMRequestError, match="HTTP 400") as info:
        llm.complete(MSG)
    assert isinstance(info.value, LLMContextError) == context
