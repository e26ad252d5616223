"""LangChain interop: our BaseChatModel adapter and the ChatOpenAI builder."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from pydantic import BaseModel

from tests.fakes.fake_openai import FakeOpenAI
from worldsmith.llm import EndpointConfig, LLMConfigError
from worldsmith.llm.langchain import WorldsmithChatModel, chat_openai, chat_openai_for_role, to_chat_dicts

SCRIPTED = EndpointConfig(provider="scripted", model="lc-test")


class Answer(BaseModel):
    value: int


def test_adapter_maps_messages_stop_and_usage(make_llm) -> None:
    llm = make_llm(SCRIPTED)
    llm.script("analyst").fallback("<code>x=1</code><interpreter>1</interpreter>")
    chat = WorldsmithChatModel(llm=llm, role="analyst")
    out = chat.invoke([SystemMessage("be brief"), HumanMessage("go"), AIMessage("ok"), HumanMessage("again")],
                      stop=["<interpreter>"])
    assert isinstance(out, AIMessage) and out.content == "<code>x=1</code>"
    assert out.usage_metadata["output_tokens"] == 1 and out.response_metadata["finish_reason"] == "stop"
    req = llm.script("analyst").requests[0]
    assert [m["role"] for m in req.messages] == ["system", "user", "assistant", "user"]
    assert req.stop == ["<interpreter>"]
    assert llm.usage()["analyst"].calls == 1  # shared accounting


async def test_adapter_async_and_structured_output(make_llm) -> None:
    llm = make_llm(SCRIPTED)
    llm.script("judge").queue("hello", '{"value": "x"}', '{"value": 7}', '{"value": 8}', role="judge")
    chat = WorldsmithChatModel(llm=llm, role="judge")
    assert (await chat.ainvoke("hi")).content == "hello"
    structured = chat.with_structured_output(Answer)
    assert structured.invoke("what?") == Answer(value=7)  # repaired once
    assert await structured.ainvoke([HumanMessage("and now?")]) == Answer(value=8)
    assert llm.usage()["judge"].repairs == 1
    with pytest.raises(TypeError, match="unsupported call option"):
        chat.invoke("x", frequency_penalty=1.0)


def test_to_chat_dicts_keeps_text_blocks_and_rejects_images() -> None:
    msgs = [HumanMessage(content=[{"type": "text", "text": "a"}, "b"])]
    assert to_chat_dicts(msgs) == [{"role": "user", "content": "ab"}]
    with pytest.raises(ValueError, match="only text"):
        to_chat_dicts([HumanMessage(content=[{"type": "image_url", "image_url": {"url": "x"}}])])


def test_chat_openai_from_endpoint_accounts_usage(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.responder = lambda body: "four five six"
    llm = make_llm(fake_openai.endpoint(), roles={"teacher": {"max_tokens": 33}})
    chat = chat_openai_for_role(llm, "teacher")
    out = chat.invoke("one two three")
    assert out.content == "four five six"
    body = fake_openai.requests[0]
    assert body["model"] == "fake-model" and body.get("max_tokens", body.get("max_completion_tokens")) == 33
    u = llm.usage()["teacher"]
    assert (u.calls, u.prompt_tokens, u.completion_tokens) == (1, 3, 3)
    streamed = "".join(chunk.content for chunk in chat.stream("stream please"))
    assert streamed == "four five six"


def test_chat_openai_refuses_non_openai_endpoints() -> None:
    with pytest.raises(LLMConfigError, match="needs 'openai'"):
        chat_openai(EndpointConfig(provider="embedded"))
    with pytest.raises(LLMConfigError, match="api_key_env"):
        chat_openai(EndpointConfig(provider="openai", base_url="https://api.example.com/v1"))
