"""Provider faults as an operator meets them: each kind is retried and recovered, or reported in one line that
names the role and the endpoint; auth and unreachable endpoints are fatal; retried faults are counted per kind."""

from __future__ import annotations

import socket

import pytest

from tests.fakes.fake_openai import Action, FakeOpenAI
from worldsmith.llm import LLMConfigError, LLMUnavailableError
from worldsmith.llm.errors import LLMAuthError, LLMFatalError, error_kind

MSG = [{"role": "user", "content": "hello there"}]
OK = "Hello from the fake server."


@pytest.mark.parametrize("fault", [Action.invalid_json(), Action.missing_choices(), Action.null_content()],
                         ids=["not-json", "no-choices", "null-content"])
def test_a_malformed_200_is_retried_and_recovers(fault: Action, fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.enqueue(fault)
    llm = make_llm(fake_openai.endpoint())
    assert llm.complete(MSG).text == OK
    assert fake_openai.request_count == 2
    usage = llm.usage()["agent"]
    assert usage.retries == 1 and usage.faults == {"invalid_body": 1} and usage.errors == 0


def test_a_persistently_malformed_body_is_one_line_naming_role_endpoint_and_body(fake_openai: FakeOpenAI,
                                                                                   make_llm) -> None:
    page = "<html>" + "x" * 5000 + "</html>"
    fake_openai.enqueue(*[Action.invalid_json(page)] * 3)
    llm = make_llm(fake_openai.endpoint(max_retries=2), roles={"judge": {}})
    with pytest.raises(LLMUnavailableError) as info:
        llm.complete(MSG, role="judge")
    msg = str(info.value)
    assert not isinstance(info.value, LLMFatalError)  # a broken body is not a reason to stop a whole batch
    assert "role 'judge'" in msg and fake_openai.base_url in msg and "not JSON" in msg and "<html>xxx" in msg
    assert "3 attempts" in msg and "\n" not in msg and len(msg) < 600  # the body is quoted, truncated
    assert fake_openai.request_count == 3
    usage = llm.usage()["judge"]
    assert usage.faults == {"invalid_body": 2} and usage.failures == {"invalid_body": 1}


def test_faults_of_every_kind_are_counted_per_role_and_kind(fake_openai: FakeOpenAI, make_llm) -> None:
    # the hang (4 s) far outlasts the timeout (1.5 s), which a healthy reply on a loaded 2-core machine never
    # reaches (at 0.3 s, a CI run beside a benchmark counted a second timeout)
    fake_openai.enqueue(Action.rate_limit(0.01), Action.server_error(500), Action.invalid_json(), Action.hang(4.0))
    llm = make_llm(fake_openai.endpoint(max_retries=5, timeout_s=1.5))
    assert llm.complete(MSG).text == OK
    assert llm.complete(MSG, role="judge").text == OK
    assert llm.usage()["agent"].faults == {"rate_limit": 1, "server": 1, "invalid_body": 1, "timeout": 1}
    assert llm.usage()["judge"].faults == {}
    assert llm.usage_total().faults == {"rate_limit": 1, "server": 1, "invalid_body": 1, "timeout": 1}


def test_an_empty_completion_is_recorded_as_such_not_retried(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.enqueue(Action.empty())
    llm = make_llm(fake_openai.endpoint())
    c = llm.complete(MSG)
    assert c.text == "" and c.empty and c.finish_reason == "stop"
    assert fake_openai.request_count == 1
    assert llm.usage()["agent"].empty_completions == 1 and llm.usage()["agent"].retries == 0
    assert not llm.complete(MSG, use_cache=False).empty


@pytest.mark.parametrize("status", [401, 403])
def test_a_rejected_key_is_fatal_at_once_and_names_the_key_source(status: int, fake_openai: FakeOpenAI,
                                                                  make_llm, monkeypatch) -> None:
    monkeypatch.setenv("WS_FAULT_KEY", "sk-wrong")
    fake_openai.enqueue(*[Action.unauthorized(status)] * 5)
    llm = make_llm(fake_openai.endpoint(api_key_env="WS_FAULT_KEY"))
    with pytest.raises(LLMAuthError) as info:
        llm.complete(MSG)
    exc = info.value
    assert isinstance(exc, LLMFatalError) and isinstance(exc, LLMConfigError) and error_kind(exc) == "auth"
    assert fake_openai.request_count == 1  # never retried
    msg = str(exc)
    assert f"HTTP {status}" in msg and "$WS_FAULT_KEY" in msg and "role 'agent'" in msg and fake_openai.base_url in msg
    assert llm.usage()["agent"].failures == {"auth": 1}


def test_a_401_without_a_configured_key_says_a_placeholder_was_sent(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.enqueue(Action.unauthorized())
    llm = make_llm(fake_openai.endpoint())
    with pytest.raises(LLMAuthError, match="no API key is configured, so the placeholder 'EMPTY' was sent"):
        llm.complete(MSG)


def test_an_unreachable_endpoint_is_fatal_after_its_retries(make_llm) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from worldsmith.llm import EndpointConfig

    llm = make_llm(EndpointConfig(provider="openai", model="m", base_url=f"http://127.0.0.1:{port}/v1",
                                  max_retries=1, backoff_base_s=0.001, timeout_s=2))
    with pytest.raises(LLMFatalError) as info:
        llm.complete(MSG)
    assert info.value.kind == "unreachable" and f"127.0.0.1:{port}" in str(info.value)
    assert llm.usage()["agent"].faults == {"connection": 1} and llm.usage()["agent"].failures == {"connection": 1}


def test_a_hang_past_the_timeout_on_every_attempt_is_fatal(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.enqueue(*[Action.hang(3.0)] * 2)
    llm = make_llm(fake_openai.endpoint(timeout_s=0.3, max_retries=1))
    with pytest.raises(LLMFatalError, match="no answer from .* within 0.3 s.*2 attempts.*timeout_s") as info:
        llm.complete(MSG)
    assert info.value.kind == "unreachable" and fake_openai.request_count == 2


def test_faults_on_a_schedule(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.schedule = lambda n: Action.server_error(500) if n % 2 == 0 else None
    llm = make_llm(fake_openai.endpoint())
    for _ in range(3):
        assert llm.complete(MSG, use_cache=False).text == OK
    assert fake_openai.request_count == 6 and llm.usage()["agent"].faults == {"server": 3}


def test_the_embedded_provider_times_its_lazy_load_apart(make_llm, monkeypatch) -> None:
    """llm.load() returns the load time once; the request after it does not pay it again."""
    import time

    from worldsmith.llm import EndpointConfig
    from worldsmith.llm.providers.embedded import EmbeddedProvider

    loads: list[str] = []

    def fake_model(self, role):  # stands for verify + llama.cpp load: slow the first time only
        if not loads:
            time.sleep(0.3)
        loads.append(role)
        return object()

    monkeypatch.setattr(EmbeddedProvider, "model", fake_model)
    llm = make_llm(EndpointConfig(provider="embedded", model="smollm2-135m"))
    first = llm.load("agent")
    second = llm.load("agent")
    assert first >= 0.3 and second < 0.1 and loads == ["agent", "agent"]


def test_providers_without_a_load_step_report_zero(fake_openai: FakeOpenAI, make_llm) -> None:
    assert make_llm(fake_openai.endpoint()).load("agent") == 0.0
    assert fake_openai.request_count == 0


def test_fatal_errors_survive_pickling() -> None:
    import pickle

    exc = pickle.loads(pickle.dumps(LLMAuthError("rejected", role="judge", endpoint="http://x/v1")))
    assert isinstance(exc, LLMAuthError) and str(exc) == "rejected"
    assert (exc.kind, exc.role, exc.endpoint) == ("auth", "judge", "http://x/v1")
