"""benchmarks/rollout_groups.py: the trainer's view of sampled groups (hand-computed), and its llama.cpp turn
generator's stops and per-turn seeds (on a stand-in for llama_cpp.Llama that plays fixed token streams)."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("torch")

from tests.benchmarks import script  # noqa: E402


def _module():
    return script("rollout_groups")


def test_group_stats_match_the_trainers_filter_and_void_mask() -> None:
    # group 1: rewards differ, one rollout void → 3 rollouts train L_RL; group 2: all -0.1 → filtered
    stats = _module().group_stats([0.0, 0.0, -0.1, 0.0, -0.1, -0.1, -0.1, -0.1],
                                  [False, True, False, False, False, False, False, False],
                                  [True, True, False, True, False, False, False, False], 4)
    assert stats["rollouts"] == 8 and stats["rollouts_training_rl"] == 3
    assert stats["void_rate"] == pytest.approx(1 / 8) and stats["answered_rate"] == pytest.approx(3 / 8)
    assert stats["filtered_groups"] == pytest.approx(0.5)
    assert stats["reward_mean"] == pytest.approx(-0.5 / 8)


class _Llama:
    """Plays `streams[i]` on the i-th generate call; records the seed set before each."""

    def __init__(self, streams: list[list[int]]) -> None:
        self.streams, self.seeds, self.calls = streams, [], 0

    def set_seed(self, seed: int) -> None:
        self.seeds.append(seed)

    def generate(self, tokens, **kw):  # noqa: ANN001, ANN003, ANN201
        stream = self.streams[self.calls]
        self.calls += 1
        yield from stream


def test_the_llama_generator_stops_like_the_trainers_and_reseeds_every_turn() -> None:
    from tests.training.tiny_lm import tiny_tokenizer

    tok = tiny_tokenizer()
    code = tok.encode("<think>\nx\n</think>\n<code>\nprint(1)\n</code>", add_special_tokens=False)
    tail = tok.encode("\nmore text the model would imagine", add_special_tokens=False)
    eos = tok.eos_token_id
    llm = _Llama([code + tail, [5, 6, eos, 7, 8], list(range(20, 320))])
    gen = _module().llama_generator(llm, tok, {eos}, temperature=1.0, max_new_tokens=200, rng=random.Random(0))
    out = gen([[1], [1], [1]])
    assert out[0] == code  # cut at the stop sequence </code>
    assert out[1] == [5, 6, eos]  # the EOS that ends the turn is kept, as model.generate's turns keep it
    assert len(code) < 200 and out[2] == list(range(20, 220))  # the per-turn limit
    assert len(llm.seeds) == 3 and len(set(llm.seeds)) == 3
