"""Per-token logprobs and generated token ids on Completion, where the provider gives them."""

from __future__ import annotations

from tests.fakes.fake_openai import FakeOpenAI
from worldsmith.llm import EndpointConfig

MSG = [{"role": "user", "content": "say three words"}]


def test_logprobs_when_asked(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.responder = lambda body: "alpha beta gamma"
    llm = make_llm(fake_openai.endpoint(), cache=False)
    c = llm.complete(MSG, logprobs=True)
    # the fake server reports the i-th word with logprob -0.5 * (i + 1)
    assert [(t.token, t.logprob) for t in c.logprobs] == [("alpha", -0.5), (" beta", -1.0), (" gamma", -1.5)]
    assert "".join(t.token for t in c.logprobs) == c.text
    assert fake_openai.requests[-1]["logprobs"] is True
    plain = llm.complete(MSG)
    assert plain.logprobs is None and plain.token_ids is None and "logprobs" not in fake_openai.requests[-1]


def test_token_ids_where_the_server_returns_them(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.responder = lambda body: "one two"
    llm = make_llm(fake_openai.endpoint(extra_body={"return_token_ids": True}), cache=False)
    c = llm.complete(MSG)
    assert c.token_ids == [1000, 1001] and fake_openai.requests[-1]["return_token_ids"] is True


async def test_logprobs_survive_the_cache_and_are_part_of_its_key(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.responder = lambda body: "x y"
    llm = make_llm(fake_openai.endpoint())
    plain = await llm.acomplete(MSG)
    first = await llm.acomplete(MSG, logprobs=True)  # not served by the entry without logprobs
    again = await llm.acomplete(MSG, logprobs=True)
    assert fake_openai.request_count == 2 and plain.logprobs is None
    assert again.cached and again.logprobs == first.logprobs and [t.logprob for t in again.logprobs] == [-0.5, -1.0]


def test_scripted_provider_has_no_logprobs(make_llm) -> None:
    llm = make_llm(EndpointConfig(provider="scripted", model="lp"))
    llm.script("agent").fallback("fine")
    c = llm.complete(MSG, logprobs=True)
    assert c.text == "fine" and c.logprobs is None and c.token_ids is None


def test_langchain_adapter_passes_logprobs_through(fake_openai: FakeOpenAI, make_llm) -> None:
    from worldsmith.llm.langchain import WorldsmithChatModel

    fake_openai.responder = lambda body: "yes no"
    chat = WorldsmithChatModel(llm=make_llm(fake_openai.endpoint(), cache=False))
    msg = chat.invoke("answer", logprobs=True)
    assert msg.content == "yes no"
    assert msg.response_metadata["logprobs"]["content"] == [{"token": "yes", "logprob": -0.5},
                                                            {"token": " no", "logprob": -1.0}]
