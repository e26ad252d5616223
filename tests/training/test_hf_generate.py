"""Turn generation with `model.generate`: contexts that share a prefix have it prefilled once (its KV cache copied to
each row), and the turns are the ones each context alone would get."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from worldsmith.training.rollout import hf_generate, shared_prefix_plan  # noqa: E402

from tests.training.tiny_lm import tiny_model, tiny_tokenizer  # noqa: E402


def test_the_plan_groups_contexts_by_their_shared_prefix() -> None:
    a = list(range(100))
    b = list(range(100)) + [7, 8]
    c = [5] * 80 + [1]
    d = [5] * 80 + [2, 3]
    e = [9] * 30
    groups, lengths = shared_prefix_plan([a, c, b, e, d], min_shared=64)
    as_sets = sorted((sorted(g), n) for g, n in zip(groups, lengths))
    # a and b share 100 tokens, but a must keep one to prefill: 99; c and d share 80; e is alone (its own prefix)
    assert as_sets == [([0, 2], 99), ([1, 4], 80), ([3], 29)]
    assert shared_prefix_plan([a, c, e], min_shared=64) is None  # nothing shared: the plain path
    assert shared_prefix_plan([a, a, a], min_shared=64) == ([[0, 1, 2]], [99])


def _count_prefill(model):  # noqa: ANN001, ANN202
    """Token positions the model embeds, summed over forward calls."""
    seen = []
    model.model.embed_tokens.register_forward_hook(lambda m, inp, out: seen.append(inp[0].numel()))
    return seen


def test_shared_prefixes_give_each_context_its_own_turns_for_less_prefill() -> None:
    tok = tiny_tokenizer()
    model = tiny_model(tok, hidden_size=64)
    model.eval()
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, 250, (300,), generator=g).tolist()
    other = torch.randint(0, 250, (280,), generator=g).tolist()
    # two groups: three rollouts of one prompt at different turns, two of another, plus a context sharing nothing
    contexts = [prompt, prompt + [10, 11, 12], prompt, other + [40], other, [3] * 20]
    alone = [hf_generate(model, tok, [c], max_new_tokens=8, temperature=0, share_prefixes=False)[0] for c in contexts]
    plain_seen = _count_prefill(model)
    plain = hf_generate(model, tok, contexts, max_new_tokens=8, temperature=0, share_prefixes=False)
    plain_tokens = sum(plain_seen)
    model2 = tiny_model(tok, hidden_size=64)
    model2.eval()
    shared_seen = _count_prefill(model2)
    shared = hf_generate(model2, tok, contexts, max_new_tokens=8, temperature=0)
    assert shared == alone == plain
    assert all(len(t) == 8 for t in shared)  # (the random model never ends its turn early)
    # plain: 6 rows × the longest context (303) prefilled, then 7 decode steps × 6 rows
    assert plain_tokens == 6 * 303 + 7 * 6
    # shared: the 3 prefixes (299, 279, 19; left-padded to 299) once, then 6 rows × the longest rest (4), then decode
    assert sum(shared_seen) == 3 * 299 + 6 * 4 + 7 * 6


def test_a_checkpoints_generation_config_does_not_change_the_sampling() -> None:
    tok = tiny_tokenizer()
    model = tiny_model(tok, hidden_size=64)
    model.eval()
    ctx = [[7] * 40]
    greedy = hf_generate(model, tok, ctx, max_new_tokens=12, temperature=0)[0]
    model.generation_config.top_k = 1  # as a checkpoint's generation_config.json may set (Qwen2.5: top_k 20)
    torch.manual_seed(0)
    sampled = [hf_generate(model, tok, ctx, max_new_tokens=12, temperature=1.0)[0] for _ in range(3)]
    # top_k 1 would make every sample the greedy turn; the near-uniform random model samples other tokens
    assert all(s != greedy for s in sampled)
    torch.manual_seed(0)
    assert hf_generate(model, tok, ctx, max_new_tokens=12, temperature=1.0, top_k=1)[0] == greedy
