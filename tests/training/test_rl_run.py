"""A 3-step SFT+RL run on the tiny model: real rollouts (first turn scripted code through a real sandbox, later turns
sampled from the model), a scripted reward; the run directory gets history, curves, summary, report, checkpoint."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from worldsmith.core.runs import RunDir  # noqa: E402
from worldsmith.tools.sandbox import SandboxConfig  # noqa: E402
from worldsmith.training.rl_run import RLRunConfig, train_rl  # noqa: E402
from worldsmith.training.rollout import hf_generate  # noqa: E402

from tests.training.tiny_lm import tiny_model, tiny_tokenizer  # noqa: E402

CODE = "<think>\nlook\n</think>\n<code>\nprint(open('sales.csv').read().count('north'))\n</code>"


def tiny_rl_rows(tok, data_file: Path) -> list[dict]:  # noqa: ANN001
    """Two prompts of one question over `data_file`, the first with an expert answer for the SFT term."""
    prompts = [[{"role": "user", "content": f"How many north rows? ({i})"}] for i in range(2)]
    expert = prompts[0] + [{"role": "assistant", "content": "<think>\ncount\n</think>\n<answer>\n@n[1]\n</answer>"}]
    text = tok.apply_chat_template(expert, tokenize=False)
    ids = tok.encode(text, add_special_tokens=False)
    n_prompt = len(tok.encode(tok.apply_chat_template(prompts[0], tokenize=False, add_generation_prompt=True),
                              add_special_tokens=False))
    return [{"prompt": p, "task_id": f"t{i}", "answers": json.dumps([{"name": "n", "value": 1}]),
             "inputs": [str(data_file)], "expert_input_ids": ids if i == 0 else [],
             "expert_completion_mask": ([0] * n_prompt + [1] * (len(ids) - n_prompt)) if i == 0 else []}
            for i, p in enumerate(prompts)]


def scripted_first_turn(model, tok, rows: list[dict]):  # noqa: ANN001, ANN201
    """A generator whose first turn is the scripted CODE cell and whose later turns the model samples itself."""
    firsts = {tuple(tok.encode(tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True),
                               add_special_tokens=False)) for r in rows}

    def generate(contexts):  # noqa: ANN001, ANN202
        sampled = hf_generate(model, tok, contexts, max_new_tokens=12)
        return [tok.encode(CODE, add_special_tokens=False) + [tok.eos_token_id] if tuple(c) in firsts else s
                for c, s in zip(contexts, sampled)]

    return generate


def scripted_reward(prompts, completions, **kw):  # noqa: ANN001, ANN201
    return [float(len(json.dumps(c)) % 7) for c in completions]


def test_three_step_sft_rl_run(tmp_path: Path, sales_csv: Path) -> None:
    from datasets import Dataset

    tok = tiny_tokenizer()
    model = tiny_model(tok)
    before = [p.detach().clone() for p in model.parameters()]
    rows = tiny_rl_rows(tok, sales_csv)
    generate = scripted_first_turn(model, tok, rows)

    run = RunDir.create("train-rl", tmp_path, config={})
    backend = "local" if shutil.which("bwrap") else "process"
    cfg = RLRunConfig(max_steps=3, prompts_per_step=2, num_generations=2, lr=1e-2, max_completion_tokens=400,
                      max_new_tokens=12, max_turns=2, mask_void=False)
    summary = train_rl(Dataset.from_list(rows), model, tok, cfg, run, [scripted_reward],
                       sandbox=SandboxConfig(backend=backend, preload=[], timeout_s=20), generator=generate)

    assert summary["steps"] == 3
    history = json.loads((run.path / "history.json").read_text())
    assert len(history) == 3
    gammas = [h["sft/gamma"] for h in history]
    assert gammas[0] == pytest.approx(0.9) and gammas[-1] == pytest.approx(0.05)  # cosine over 3 steps
    for key in ("reward", "rl/loss", "entropy", "rl/void_rate", "rl/filtered_group_frac", "rollout/cells"):
        assert all(key in h for h in history), key
    assert any("sft/loss" in h for h in history)  # the expert's prompt came up (2 prompts a step, 1 with an expert)
    assert summary["rollout_sandbox_s"] > 0
    # each step says where its rollout time went: the generator's turns take some, the cells run in sessions
    assert all(h["rollout/generation_s"] > 0 and h["rollout/sandbox_s"] > 0 for h in history)
    assert (run.path / "curves.png").stat().st_size > 1000
    assert "| step | reward | γ |" in (run.path / "report.md").read_text()
    assert (Path(summary["checkpoint"]) / "config.json").exists()
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    # rollout progress reaches events.jsonl before each step ends: every step's 4 rollouts (2 prompts × 2) open with
    # a generation round of 4 turns, each runs the scripted cell once, and both events precede the step's own
    events = [e for e in run.events() if e["event"] in ("rollout_turns", "rollouts", "step")]
    for k in (1, 2, 3):
        of_step = [(i, e) for i, e in enumerate(events) if e.get("step") == k]
        kinds = [e["event"] for _, e in of_step]
        assert kinds[0] == "rollout_turns" and kinds.count("rollouts") == 1, kinds
        assert kinds.index("rollouts") < kinds.index("step")  # (the last step also logs the run's summary)
        assert of_step[0][1]["generated"] == 4 and of_step[0][1]["tokens"] > 0
        done = of_step[kinds.index("rollouts")][1]
        assert done["rollouts"] == 4 and done["cells"] == 4 and done["sandbox_s"] > 0
    # every completion is in rollouts.jsonl with what the model wrote, its reward and the advantage it trained with
    samples = [json.loads(line) for line in (run.path / "rollouts.jsonl").read_text().splitlines()]
    assert [r["step"] for r in samples] == [1] * 4 + [2] * 4 + [3] * 4
    assert all(r["task_id"] in ("t0", "t1") and r["messages"][0]["content"] == CODE for r in samples)
    for r in samples:  # the scripted rule, applied by hand to the logged messages (an unanswered rollout: empty)
        scored = r["messages"] if r["answer"] is not None else [{"role": "assistant", "content": ""}]
        assert r["rewards"] == {"scripted_reward": float(len(json.dumps(scored)) % 7)}
    for k in range(0, 12, 2):  # groups of 2: equal rewards → filtered, advantage 0; else ± and summing to 0
        a, b = samples[k:k + 2]
        assert a["filtered"] == b["filtered"] == (a["rewards"] == b["rewards"])
        if a["filtered"]:
            assert a["advantage"] == b["advantage"] == 0
        else:
            assert a["advantage"] == pytest.approx(-b["advantage"]) and a["advantage"] != 0


@pytest.mark.parametrize("gspo, expected", [
    # DAPO (DataMind / the DAPO paper): token-level ratios and loss, clip-higher 0.2 / 0.28
    (False, {"importance_sampling_level": "token", "loss_type": "dapo", "epsilon": 0.2, "epsilon_high": 0.28}),
    # GSPO paper v2 §5.1: sequence-level ratio, per-sequence loss, clip 3e-4 / 4e-4
    (True, {"importance_sampling_level": "sequence", "loss_type": "grpo", "epsilon": 3e-4, "epsilon_high": 4e-4}),
])
def test_the_gspo_switch_trains_gspo_as_its_paper_does(tmp_path: Path, gspo: bool, expected: dict) -> None:
    from worldsmith.training.rl_run import trainer_config

    cfg = trainer_config(RLRunConfig(gspo=gspo, max_steps=1), tmp_path)
    assert {k: getattr(cfg, k) for k in expected} == expected
    assert cfg.beta == 0.0
