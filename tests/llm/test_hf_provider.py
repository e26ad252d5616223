"""The 'hf' provider: a local checkpoint folder (a trained student) answers through the same LLM layer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")

from worldsmith.llm import EndpointConfig, LLMConfigError, LLMRequestError
from worldsmith.llm.providers import make_provider
from worldsmith.llm.providers.hf import HFProvider, cut_at_stop
from worldsmith.llm.types import ProviderRequest
from worldsmith.training.models import tiny_model, tiny_tokenizer

MESSAGES = [{"role": "system", "content": "You analyse data."}, {"role": "user", "content": "What is 2+2?"}]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ckpt")
    tok = tiny_tokenizer()
    tiny_model(tok, seed=1).save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path


def provider(model: str) -> HFProvider:
    p = make_provider(EndpointConfig(provider="hf", model=model), key_path=lambda r, f: f"llm.roles.{r}.{f}",
                      models_dir=Path("/nonexistent"))
    assert isinstance(p, HFProvider)
    return p


def complete(p: HFProvider, **kw) -> object:
    req = ProviderRequest(messages=MESSAGES, role="agent", **({"max_tokens": 12, "temperature": 0.0} | kw))
    return asyncio.run(p.acomplete(req))


def test_greedy_generation_is_deterministic_and_bounded_by_max_tokens(checkpoint: Path) -> None:
    p = provider(str(checkpoint))
    p.check("agent")
    assert asyncio.run(p.aload("agent")) >= 0.0  # loaded once, shared afterwards
    assert asyncio.run(p.aload("agent")) < 0.5
    a, b = complete(p), complete(p)
    assert a.text == b.text and a.token_ids == b.token_ids
    # a random model rarely ends its turn within 12 tokens; when it runs out it says so
    assert a.completion_tokens == len(a.token_ids) <= 12
    assert a.finish_reason == ("length" if a.completion_tokens == 12 else "stop")
    assert a.prompt_tokens == len(tiny_tokenizer().apply_chat_template(MESSAGES, add_generation_prompt=True,
                                                                        tokenize=True)["input_ids"])


def test_stop_sequences_cut_the_text_before_them(checkpoint: Path) -> None:
    p = provider(str(checkpoint))
    free = complete(p, max_tokens=20)
    stop = free.text[3:5] if len(free.text) >= 5 else free.text[-1:]
    assert stop, "the free generation produced no text to stop at"
    cut = complete(p, max_tokens=20, stop=[stop])
    assert cut.text == free.text[:free.text.find(stop)]
    assert cut.finish_reason == "stop"


def test_seeded_sampling_is_reproducible(checkpoint: Path) -> None:
    p = provider(str(checkpoint))
    a = complete(p, temperature=1.0, seed=7)
    b = complete(p, temperature=1.0, seed=7)
    assert a.text == b.text


def test_a_folder_that_is_not_a_checkpoint_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(LLMConfigError, match="llm.roles.agent.model: .*not a checkpoint folder"):
        provider(str(tmp_path)).check("agent")
    with pytest.raises(LLMConfigError, match="not a checkpoint folder"):
        provider("no-such-model").check("agent")


def test_structured_output_is_refused_with_the_key_to_change(checkpoint: Path) -> None:
    req = ProviderRequest(messages=MESSAGES, role="judge", max_tokens=4, temperature=0.0, schema={"type": "object"})
    with pytest.raises(LLMRequestError, match="llm.roles.judge.provider: the hf provider has no structured output"):
        asyncio.run(provider(str(checkpoint)).acomplete(req))


def test_cut_at_stop_uses_the_earliest_stop() -> None:
    assert cut_at_stop("abc</code>def<interpreter>", ["<interpreter>", "</code>"]) == ("abc", True)
    assert cut_at_stop("abc", ["x", ""]) == ("abc", False)
