"""SFT+RL trainer: γ schedules, the mixed loss against stock GRPO and a hand-computed NLL, group filtering, void masking,
gradient accumulation of the SFT term. Tiny random model (tests/training/tiny_lm.py); no training loop here except
where named (the 3-step run is in test_rl_run.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from worldsmith.training.rl_loss import equal_reward_groups, masked_nll, pad_right  # noqa: E402
from worldsmith.training.schedules import parse_schedule  # noqa: E402

from tests.training.tiny_lm import tiny_model, tiny_tokenizer  # noqa: E402


# ---- γ schedules ----------------------------------------------------------------------------------------
def test_cosine_default_runs_from_0_9_to_0_05_along_a_half_cosine() -> None:
    g = parse_schedule("cosine")
    assert g(0, 11) == pytest.approx(0.9)
    assert g(10, 11) == pytest.approx(0.05)
    assert g(5, 11) == pytest.approx((0.9 + 0.05) / 2)  # midpoint of a half cosine
    # a quarter of the way: 0.05 + 0.85 * (1 + cos(pi/4)) / 2
    assert g(2, 9) == pytest.approx(0.05 + 0.85 * (1 + math.sqrt(0.5)) / 2)
    values = [g(s, 11) for s in range(11)]
    assert all(a > b for a, b in zip(values, values[1:]))


def test_linear_constant_and_two_stage_schedules() -> None:
    lin = parse_schedule("linear")
    assert [round(lin(s, 5), 4) for s in range(5)] == [0.9, 0.6875, 0.475, 0.2625, 0.05]
    assert parse_schedule("constant:0.3")(7, 10) == 0.3
    two = parse_schedule("sft-then-rl:30")
    assert [two(s, 10) for s in range(10)] == [1.0] * 3 + [0.0] * 7
    assert parse_schedule("cosine:1:0")(0, 3) == 1.0 and parse_schedule("cosine:1:0")(2, 3) == 0.0
    assert parse_schedule("linear:0.5:0.1").spec == "linear:0.5:0.1"
    assert parse_schedule("cosine")(0, 1) == pytest.approx(0.05)  # a one-step run is its last step


@pytest.mark.parametrize("bad", ["cosin", "constant", "constant:2", "linear:0.9", "sft-then-rl:120", "cosine:a:b"])
def test_bad_schedule_specs_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="schedule"):
        parse_schedule(bad)


# ---- tensor pieces --------------------------------------------------------------------------------------
def test_masked_nll_matches_a_hand_computed_value() -> None:
    # vocabulary of 2; logits favour token 0 at position 0 with log-odds ln 3: p(0) = 3/4, p(1) = 1/4
    logits = torch.tensor([[[math.log(3), 0.0], [0.0, 0.0], [5.0, 5.0]]])
    ids = torch.tensor([[0, 1, 0]])
    mask = torch.tensor([[0, 1, 1]])  # token 1 predicted from position 0 (p = 1/4), token 0 from position 1 (p = 1/2)
    assert masked_nll(logits, ids, mask).item() == pytest.approx(math.log(4) + math.log(2))
    assert masked_nll(logits, ids, torch.tensor([[1, 0, 1]])).item() == pytest.approx(math.log(2))


def test_equal_reward_groups() -> None:
    r = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.3, 0.3, float("nan"), 0.2])
    assert equal_reward_groups(r, 2).tolist() == [True, False, True, True]
    assert equal_reward_groups(r, 4).tolist() == [False, False]
    with pytest.raises(ValueError):
        equal_reward_groups(r, 3)


def test_pad_right() -> None:
    assert pad_right([[1, 2], [], [3]], 9).tolist() == [[1, 2], [9, 9], [3, 9]]


# ---- the trainer ----------------------------------------------------------------------------------------
def _reward(prompts, completions, **kw):  # noqa: ANN001, ANN201 - TRL's signature
    return [float(len(str(c)) % 3) for c in completions]


def _trainer(tmp_path: Path, tok, model, cls=None, **cfg):  # noqa: ANN001, ANN202
    from datasets import Dataset

    from worldsmith.training.rl import SFTRLConfig, SFTRLTrainer

    args = dict(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=2,
                max_completion_length=16, report_to=[], use_cpu=True, logging_steps=1, max_steps=1,
                save_strategy="no")
    args.update(cfg)
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": f"q{i}"}]} for i in range(4)])
    trainer = (cls or SFTRLTrainer)(model=model, reward_funcs=[_reward], args=SFTRLConfig(**args),
                                    train_dataset=ds, processing_class=tok)
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop; these tests call the loss directly
    return trainer


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    tok = tiny_tokenizer()
    return tok, tiny_model(tok), tmp_path_factory.mktemp("rl")


def _batch(tok, advantages, lengths, expert=None):  # noqa: ANN001, ANN202
    """A hand-made generated batch: prompts of 3 tokens, completions of `lengths` tokens (right padded)."""
    g = torch.Generator().manual_seed(1)
    b, width = len(lengths), max(lengths)
    comp = torch.randint(0, 200, (b, width), generator=g)
    cmask = torch.tensor([[1] * n + [0] * (width - n) for n in lengths])
    out = {"prompt_ids": torch.randint(0, 200, (b, 3), generator=g), "prompt_mask": torch.ones(b, 3, dtype=torch.long),
           "completion_ids": comp, "completion_mask": cmask,
           "advantages": torch.tensor(advantages, dtype=torch.float), "num_items_in_batch": cmask.sum()}
    ids = expert or [[] for _ in range(b)]
    out["sft_input_ids"] = pad_right([e[0] for e in ids] if expert else ids, tok.pad_token_id)
    out["sft_attention_mask"] = pad_right([[1] * len(e[0]) for e in ids] if expert else ids, 0)
    out["sft_mask"] = pad_right([e[1] for e in ids] if expert else ids, 0)
    out["sft_num_tokens"] = out["sft_mask"][:, 1:].sum()
    return out


def test_gamma_zero_is_stock_grpo_dapo_loss(tiny) -> None:  # noqa: ANN001
    from trl import GRPOTrainer

    tok, model, tmp = tiny
    mixed = _trainer(tmp, tok, model, gamma_schedule="constant:0")
    stock = _trainer(tmp, tok, model, cls=GRPOTrainer)
    batch = _batch(tok, [1.0, -1.0, 0.5, 2.0], [4, 2, 3, 1])
    model.train()
    ours, theirs = mixed.compute_loss(model, batch), stock.compute_loss(model, batch)
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-7)
    # on-policy (ratio 1), DAPO is −Σ_i A_i·n_i / Σ_i n_i over the trained tokens
    assert ours.item() == pytest.approx(-(1 * 4 - 1 * 2 + 0.5 * 3 + 2 * 1) / 10, abs=1e-6)


def test_gamma_one_is_the_masked_nll_of_the_expert(tiny) -> None:  # noqa: ANN001
    tok, model, tmp = tiny
    trainer = _trainer(tmp, tok, model, gamma_schedule="constant:1")
    expert = [([5, 6, 7, 8], [0, 0, 1, 1]), ([], []), ([9, 10, 11], [0, 1, 1]), ([], [])]
    batch = _batch(tok, [1.0, -1.0, 0.5, 2.0], [4, 2, 3, 1], expert)
    model.train()
    loss = trainer.compute_loss(model, batch)
    nll = 0.0
    for ids, mask in (e for e in expert if e[0]):
        logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
        nll -= sum(logp[t - 1, ids[t]].item() for t in range(1, len(ids)) if mask[t])
    assert loss.item() == pytest.approx(nll / 4, rel=1e-5)  # 4 trained expert tokens in the batch


def test_the_sft_term_computes_logits_only_where_a_trained_token_is_predicted(tiny) -> None:  # noqa: ANN001
    tok, model, tmp = tiny
    trainer = _trainer(tmp, tok, model, gamma_schedule="constant:1")
    # row 1 trains tokens 5 and 6 (predicted at 4, 5), row 2 token 2 (predicted at 1): 3 of 7 positions need logits
    expert = [([5, 6, 7, 8, 9, 10, 11], [0, 0, 0, 0, 0, 1, 1]), ([12, 13, 14, 15], [0, 0, 1, 0])]
    batch = _batch(tok, [1.0, -1.0], [2, 2], expert)
    widths = []
    hook = model.lm_head.register_forward_hook(lambda m, inp, out: widths.append(out.shape[1]))
    model.train()
    loss = trainer.sft_loss(model, batch)
    hook.remove()
    assert widths == [3]
    nll = 0.0
    for ids, mask in expert:
        logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
        nll -= sum(logp[t - 1, ids[t]].item() for t in range(1, len(ids)) if mask[t])
    assert loss.item() == pytest.approx(nll / 3, rel=1e-5)


def test_sft_term_under_gradient_accumulation_equals_one_batch(tiny) -> None:  # noqa: ANN001
    tok, model, tmp = tiny
    trainer = _trainer(tmp, tok, model, gamma_schedule="constant:1")
    expert = [([5, 6, 7, 8], [0, 1, 1, 1]), ([9, 10, 11], [0, 0, 1])]
    whole = _batch(tok, [0.0, 0.0], [2, 2], expert)
    model.train()

    def grads(batches, accumulation):  # noqa: ANN001, ANN202
        model.zero_grad()
        trainer.args.gradient_accumulation_steps = trainer.args.steps_per_generation = accumulation
        trainer.current_gradient_accumulation_steps = accumulation
        for b in batches:
            trainer.sft_loss(model, b).backward()
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).clone()

    halves = [{k: (v[i:i + 1] if v.ndim else v) for k, v in whole.items()} for i in (0, 1)]
    one, two = grads([whole], 1), grads(halves, 2)
    trainer.args.gradient_accumulation_steps = trainer.args.steps_per_generation = 1
    assert one.abs().sum() > 0
    assert torch.allclose(one, two, atol=1e-6)


def _generated(trainer, rewards, void):  # noqa: ANN001, ANN202
    """Run the trainer's mask step on a fake generation output with the given rewards and void flags."""
    n = len(rewards)
    out = {"completion_ids": torch.zeros(n, 3, dtype=torch.long), "completion_mask": torch.ones(n, 3, dtype=torch.long),
           "advantages": torch.ones(n), "num_items_in_batch": torch.tensor(3 * n)}
    trainer._last_rewards = torch.tensor(rewards, dtype=torch.float).unsqueeze(1)
    rows = [{"void": v, "expert_input_ids": [1, 2, 3], "expert_completion_mask": [0, 1, 1]} for v in void]
    trainer.model.train()
    return trainer.add_sft_and_masks(rows, out)


def test_equal_reward_groups_train_sft_only(tiny) -> None:  # noqa: ANN001
    tok, model, tmp = tiny
    trainer = _trainer(tmp, tok, model)
    out = _generated(trainer, [1.0, 1.0, 0.0, 1.0], [False] * 4)
    assert out["tool_mask"].sum(1).tolist() == [0, 0, 3, 3]
    assert out["advantages"].tolist() == [0.0, 0.0, 1.0, 1.0]
    assert out["num_items_in_batch"].item() == 6
    assert out["sft_mask"].sum(1).tolist() == [2, 0, 2, 0]  # one expert example per group, filtered or not
    assert trainer._metrics["train"]["rl/filtered_group_frac"][-1] == 0.5


def test_a_void_completion_contributes_nothing(tiny) -> None:  # noqa: ANN001
    tok, model, tmp = tiny
    trainer = _trainer(tmp, tok, model, gamma_schedule="constant:0")
    out = _generated(trainer, [1.0, 0.0, 0.0, 1.0], [False, True, False, False])
    assert out["tool_mask"].sum(1).tolist() == [3, 0, 3, 3]
    assert out["advantages"][1].item() == 0.0
    assert trainer._metrics["train"]["rl/void_rate"][-1] == 0.25
    # the loss of a batch with the void completion equals the loss without it
    model.train()
    batch = _batch(tok, [1.0, -3.0, 0.5, 0.0], [4, 3, 2, 2])
    batch["tool_mask"] = torch.ones_like(batch["completion_mask"])
    batch["tool_mask"][1] = 0
    batch["advantages"][1] = 0.0
    batch["num_items_in_batch"] = (batch["completion_mask"] * batch["tool_mask"]).sum()
    without = {k: (v[[0, 2, 3]] if v.ndim else v) for k, v in batch.items()}
    assert trainer.compute_loss(model, batch).item() == pytest.approx(trainer.compute_loss(model, without).item(),
                                                                      abs=1e-7)
