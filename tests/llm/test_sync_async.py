"""One async implementation: the sync API is a thin wrapper that gives the same results from any thread."""

from __future__ import annotations

import asyncio
import inspect
import threading

import pytest
from pydantic import BaseModel

from tests.fakes.fake_openai import Action, FakeOpenAI
from worldsmith.llm import EndpointConfig
from worldsmith.llm.client import LLM
from worldsmith.llm.providers.base import Provider
from worldsmith.llm.providers.embedded import EmbeddedProvider
from worldsmith.llm.providers.openai_compat import OpenAIProvider
from worldsmith.llm.providers.scripted import ScriptedProvider

SCRIPTED = EndpointConfig(provider="scripted", model="sync-async-test")
MSG = [{"role": "user", "content": "two plus two"}]


class Sum(BaseModel):
    total: int


def _same(a, b) -> None:  # type: ignore[no-untyped-def]
    skip = {"latency_s"}
    assert a.model_dump(exclude=skip) == b.model_dump(exclude=skip)


def test_sync_and_async_complete_give_the_same_completion(fake_openai: FakeOpenAI, make_llm) -> None:
    fake_openai.responder = lambda body: "four, I think"
    llm = make_llm(fake_openai.endpoint(max_tokens=20), cache=False)
    sync = llm.complete(MSG, stop=["I"], seed=3)
    other = asyncio.run(llm.acomplete(MSG, stop=["I"], seed=3))
    _same(sync, other)
    assert sync.text == "four, " and sync.sampling["seed"] == 3 and sync.request_messages == MSG
    assert fake_openai.requests[0] == fake_openai.requests[1]  # the provider got byte-identical requests


def test_sync_and_async_structured_give_the_same_result(make_llm) -> None:
    llm = make_llm(SCRIPTED)
    llm.script("agent").queue('{"total": "four"}', '{"total": 4}', '{"total": "four"}', '{"total": 4}')
    sync = llm.structured_result(MSG, Sum)
    other = asyncio.run(llm.astructured_result(MSG, Sum))
    assert sync.value == other.value == Sum(total=4) and sync.repaired and other.repaired
    _same(sync.completion, other.completion)
    assert llm.usage()["agent"].repairs == 2


async def test_sync_call_inside_a_running_loop_still_works(make_llm) -> None:
    llm = make_llm(SCRIPTED)
    llm.script("agent").fallback(lambda req: f"echo {req.last_user}")
    assert llm.complete(MSG).text == "echo two plus two"  # blocks this loop while it waits, but completes
    assert (await llm.acomplete(MSG)).text == "echo two plus two"


def test_sync_call_from_the_llm_own_loop_says_to_await(make_llm) -> None:
    llm = make_llm(SCRIPTED)
    # a responder runs on the LLM's loop; a sync call there would wait on itself forever
    llm.script("agent").fallback(lambda req: llm.complete([{"role": "user", "content": "inner"}]).text)
    with pytest.raises(RuntimeError, match="await the async method"):
        llm.complete(MSG)


def test_sync_calls_from_threads_share_one_loop_and_are_independent(make_llm) -> None:
    llm = make_llm(SCRIPTED)
    llm.script("agent").fallback(lambda req: req.last_user.upper())
    out: dict[int, str] = {}

    def work(i: int) -> None:
        out[i] = llm.complete([{"role": "user", "content": f"q{i}"}]).text

    threads = [threading.Thread(target=work, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == {i: f"Q{i}" for i in range(12)}
    assert llm._loop.thread is not None and llm._loop.thread.name == "worldsmith-llm"


def test_close_stops_the_loop_and_the_llm_stays_usable(fake_openai: FakeOpenAI, make_llm) -> None:
    llm: LLM = make_llm(fake_openai.endpoint(), cache=False)
    assert llm._loop.thread is None  # nothing runs until the sync API is used
    llm.complete(MSG)
    thread = llm._loop.thread
    assert thread is not None and thread.is_alive()
    llm.close()
    assert not thread.is_alive() and llm._loop.thread is None
    fake_openai.enqueue(Action.reply("again"))
    assert llm.complete(MSG).text == "again"


def test_providers_are_async_only() -> None:
    for cls in (Provider, EmbeddedProvider, OpenAIProvider, ScriptedProvider):
        assert "complete" not in vars(cls), f"{cls.__name__} still has a sync complete()"
        assert inspect.iscoroutinefunction(cls.acomplete) and inspect.iscoroutinefunction(cls.aembed)


def test_sync_methods_only_wrap_their_async_twins() -> None:
    for name in ("complete", "structured_result", "structured", "embed"):
        body = inspect.getsource(getattr(LLM, name)).split('"""')[-1]  # the code after the docstring
        lines = [ln for ln in body.strip().splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].strip().startswith(f"return self._sync(self.a{name}("), (name, lines)


def test_an_llm_dropped_without_close_stops_its_loop(tmp_path) -> None:
    import gc

    from worldsmith.llm import LLMConfig

    llm = LLM(LLMConfig(default=SCRIPTED), home=tmp_path)
    llm.script("agent").fallback("ok")
    assert llm.complete(MSG).text == "ok"
    thread = llm._loop.thread
    assert thread is not None and thread.is_alive()
    del llm
    gc.collect()
    assert not thread.is_alive()
