"""Training throughput on CPU: seconds per optimizer step and tokens/s for SFT (TRL SFTTrainer) and SFT+RL
(SFTRLTrainer over sandboxed rollouts), with the rollout time split into generation / sandbox / reward.

    python benchmarks/train.py                 # the tiny model (2 layers, hidden 32), a few seconds a step
    python benchmarks/train.py --model smollm2-135m --steps 4   # an embedded model (needs its GGUF; slow on CPU)
    python benchmarks/train.py --model qwen2.5-coder-0.5b --generation-only --prompt-tokens 2800
    python benchmarks/train.py --model qwen2.5-coder-0.5b --checkpoint-only [--lora]

`--generation-only` times one rollout turn of `prompts × generations` contexts with `hf_generate`, the group's
shared prompt prefilled once (its KV cache copied to each rollout) against every row prefilled in full, greedy so
both produce the same tokens (checked); median of `--steps` repeats.

`--checkpoint-only` times the resumable Trainer checkpoint `train sft` writes (weights or LoRA adapters, optimizer,
scheduler, RNG; `worldsmith.training.sft` with a save after every step): seconds and MB a save, against seconds a
step, and what a save costs at the default cadence (one every 10 minutes of training).

Each figure is the median over the measured steps (the first step, which warms caches, is left out). RL rollouts
play one scripted code turn first (so every rollout really runs a cell in its sandbox; a random model never writes
one) and sample the later turns from the model.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CODE = "<think>\nlook at the data\n</think>\n<code>\nimport pandas as pd\nprint(pd.read_csv('sales.csv').shape)\n</code>"
ANSWER = "<think>\nread the shape\n</think>\n<answer>\n@rows[1000]\n</answer>"


def load(model_name: str) -> tuple[Any, Any]:
    if model_name == "tiny":
        from tests.training.tiny_lm import tiny_model, tiny_tokenizer

        tok = tiny_tokenizer()
        return tiny_model(tok), tok
    from worldsmith.training.models import load_student  # TRAIN-SFT's loader (GGUF or HF path)

    return load_student(model_name)


class StepClock:
    """A TrainerCallback recording wall time per optimizer step."""

    def __new__(cls) -> Any:
        from transformers import TrainerCallback

        class _Clock(TrainerCallback):  # type: ignore[misc]
            def __init__(self) -> None:
                self.times: list[float] = []
                self._t = 0.0

            def on_step_begin(self, *a: Any, **k: Any) -> None:
                self._t = time.perf_counter()

            def on_step_end(self, *a: Any, **k: Any) -> None:
                self.times.append(time.perf_counter() - self._t)

        return _Clock()


def expert_rows(tok: Any, n: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        prompt = [{"role": "user", "content": f"How many rows does sales.csv have? (variant {i})"}]
        msgs = prompt + [{"role": "assistant", "content": CODE}, {"role": "user", "content": "<interpreter>\n(1000, 2)\n</interpreter>"},
                         {"role": "assistant", "content": ANSWER}]
        ids = tok.encode(tok.apply_chat_template(msgs, tokenize=False), add_special_tokens=False)
        head = len(tok.encode(tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True),
                              add_special_tokens=False))
        rows.append({"prompt": prompt, "input_ids": ids, "completion_mask": [0] * head + [1] * (len(ids) - head)})
    return rows


def bench_sft(model_name: str, steps: int, batch: int, out: Path) -> dict[str, float]:
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    model, tok = load(model_name)
    rows = expert_rows(tok, steps * batch)
    ds = Dataset.from_list([{"input_ids": r["input_ids"], "completion_mask": r["completion_mask"]} for r in rows])
    clock = StepClock()
    trainer = SFTTrainer(model=model, processing_class=tok, train_dataset=ds, callbacks=[clock],
                         args=SFTConfig(output_dir=str(out / "sft"), max_steps=steps, per_device_train_batch_size=batch,
                                        report_to=[], save_strategy="no", use_cpu=True, logging_steps=1,
                                        completion_only_loss=True))
    trainer.train()
    tokens = statistics.mean(len(r["input_ids"]) for r in rows) * batch
    step_s = statistics.median(clock.times[1:] or clock.times)
    return {"s/step": step_s, "tokens/s": tokens / step_s}


def bench_checkpoint(model_name: str, steps: int, lora: bool, out: Path) -> dict[str, float]:
    from datasets import Dataset
    from transformers import TrainerCallback

    from worldsmith.training.data import DataStats, SFTData
    from worldsmith.training.sft import SFTRunConfig, build_trainer

    saves: list[tuple[float, float]] = []  # (seconds, MB)

    class SaveClock(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.t = time.perf_counter()  # the save follows this step's callbacks

        def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6
            saves.append((time.perf_counter() - self.t, size))

    model, tok = load(model_name)
    rows = expert_rows(tok, steps)
    data = SFTData(train=Dataset.from_list([{"input_ids": r["input_ids"], "completion_mask": r["completion_mask"]}
                                            for r in rows]), validation=None, stats=DataStats())
    clock = StepClock()
    cfg = SFTRunConfig(max_steps=steps + 1, lora=lora, save_every_steps=1, save_every_minutes=0)
    build_trainer(data, model, tok, cfg, out / "ckpt", callbacks=[clock, SaveClock()]).train()
    save_s = statistics.median(s for s, _ in saves[1:] or saves)
    step_s = statistics.median(clock.times[1:] or clock.times)
    return {"save s": save_s, "checkpoint MB": statistics.median(mb for _, mb in saves), "s/step (no save)": step_s,
            "save / step": save_s / step_s, "overhead at one save per 10 min (%)": 100 * save_s / 600}


def bench_rl(model_name: str, steps: int, prompts: int, generations: int, out: Path) -> dict[str, float]:
    from datasets import Dataset

    from worldsmith.core.runs import RunDir
    from worldsmith.tools.sandbox import SandboxConfig
    from worldsmith.training import rl_run
    from worldsmith.training.rollout import hf_generate

    model, tok = load(model_name)
    data = out / "sales.csv"
    data.write_text("region,amount\n" + "".join(f"r{i % 7},{i}\n" for i in range(1000)))
    rows = [{"prompt": r["prompt"], "task_id": f"t{i}", "answers": json.dumps([{"name": "rows", "value": 1000}]),
             "inputs": [str(data)], "expert_input_ids": r["input_ids"], "expert_completion_mask": r["completion_mask"]}
            for i, r in enumerate(expert_rows(tok, prompts * steps))]
    firsts = {tuple(tok.encode(tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True),
                               add_special_tokens=False)) for r in rows}
    code_ids = tok.encode(CODE, add_special_tokens=False) + [tok.eos_token_id]

    def generate(contexts: list[list[int]]) -> list[list[int]]:
        sampled = hf_generate(model, tok, contexts, max_new_tokens=32)
        return [code_ids if tuple(c) in firsts else s for c, s in zip(contexts, sampled)]

    reward_s: list[float] = []

    def reward(prompts_: Any, completions: Any, **kw: Any) -> list[float]:
        from worldsmith.training.rewards import closed_form_reward

        t = time.perf_counter()
        r = closed_form_reward(prompts_, completions, **kw)
        reward_s.append(time.perf_counter() - t)
        return [x + 0.01 * i for i, x in enumerate(r)]  # distinct rewards, so no group is filtered

    clock = StepClock()
    original = rl_run.build_trainer

    def build_with_clock(*a: Any, **k: Any) -> Any:
        trainer = original(*a, **k)
        trainer.add_callback(clock)
        return trainer

    rl_run.build_trainer = build_with_clock  # type: ignore[assignment]
    backend = "local" if shutil.which("bwrap") else "process"
    cfg = rl_run.RLRunConfig(max_steps=steps, prompts_per_step=prompts, num_generations=generations, lr=1e-4,
                             max_completion_tokens=512, max_new_tokens=32, max_turns=3, mask_void=False,
                             save_checkpoint=False, pool_size=prompts * generations)
    run = RunDir.create("bench-rl", out, config={})
    try:
        summary = rl_run.train_rl(Dataset.from_list(rows), model, tok, cfg, run, [reward],
                                  sandbox=SandboxConfig(backend=backend, timeout_s=60), generator=generate)
    finally:
        rl_run.build_trainer = original  # type: ignore[assignment]
    history = json.loads((run.path / "history.json").read_text())
    step_s = statistics.median(clock.times[1:] or clock.times)
    tokens = [h.get("num_tokens") for h in history if h.get("num_tokens") is not None]
    per_step = statistics.median([b - a for a, b in zip([0.0] + tokens, tokens)][1:] or tokens)
    n = max(summary["steps"], 1)
    return {"s/step": step_s, "tokens/s": per_step / step_s,
            "rollout generation s/step": summary["rollout_generation_s"] / n,
            "rollout sandbox s/step (summed over sessions)": summary["rollout_sandbox_s"] / n,
            "rollout wait on sandbox s/step": summary["rollout_sandbox_wait_s"] / n,
            "reward s/step": sum(reward_s) / n}


def bench_generation(model_name: str, reps: int, prompts: int, generations: int, prompt_tokens: int,
                     new_tokens: int) -> dict[str, float]:
    from worldsmith.training.rollout import hf_generate

    model, tok = load(model_name)
    model.eval()
    contexts = []
    for p in range(prompts):  # a table to describe, as long as an analyst prompt with its data profile
        rows = "".join(f"{i},{(i * 37 + p) % 101},r{i % 7}\n" for i in range(prompt_tokens))
        msgs = [{"role": "user", "content": f"Describe this table ({p}):\nid,amount,region\n{rows}"}]
        ids = tok.encode(tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True),
                         add_special_tokens=False)
        contexts += [ids[-prompt_tokens:]] * generations
    res: dict[str, float] = {}
    turns: dict[bool, list[list[int]]] = {}
    for share in (False, True):
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            turns[share] = hf_generate(model, tok, contexts, max_new_tokens=new_tokens, temperature=0,
                                       share_prefixes=share)
            times.append(time.perf_counter() - t)
        res[f"turn s ({'shared prefix' if share else 'every row prefilled'})"] = statistics.median(times)
    res["speed-up"] = res["turn s (every row prefilled)"] / res["turn s (shared prefix)"]
    res["same tokens (1 = yes)"] = float(turns[False] == turns[True])
    res["new tokens per row"] = statistics.mean(len(t) for t in turns[True])
    return res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny", help="'tiny', an embedded model name or a checkpoint path")
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps per trainer (first one not measured)")
    parser.add_argument("--prompts", type=int, default=2, help="RL: prompts per step")
    parser.add_argument("--generations", type=int, default=4, help="RL: rollouts per prompt")
    parser.add_argument("--generation-only", action="store_true", help="time one rollout turn's generation only")
    parser.add_argument("--prompt-tokens", type=int, default=2800, help="--generation-only: tokens per prompt")
    parser.add_argument("--new-tokens", type=int, default=64, help="--generation-only: tokens per turn")
    parser.add_argument("--checkpoint-only", action="store_true", help="time the resumable checkpoint of train sft")
    parser.add_argument("--lora", action="store_true", help="--checkpoint-only: LoRA adapters instead of every weight")
    args = parser.parse_args()
    if args.checkpoint_only:
        out = Path(tempfile.mkdtemp(prefix="bench-ckpt-"))
        try:
            res = bench_checkpoint(args.model, args.steps, args.lora, out)
        finally:
            shutil.rmtree(out, ignore_errors=True)
        print(f"model {args.model}{' (LoRA)' if args.lora else ' (full)'}; a save after each of {args.steps + 1} "
              f"steps, median of the last {args.steps}")
        for k, v in res.items():
            print(f"  {k:<40} {v:10.3f}")
        return
    if args.generation_only:
        res = bench_generation(args.model, args.steps, args.prompts, args.generations, args.prompt_tokens,
                               args.new_tokens)
        print(f"model {args.model}; one turn of {args.prompts} prompts x {args.generations} rollouts, "
              f"{args.prompt_tokens}-token prompts, up to {args.new_tokens} new tokens, median of {args.steps}")
        for k, v in res.items():
            print(f"  {k:<40} {v:10.3f}")
        return
    import os

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    out = Path(tempfile.mkdtemp(prefix="bench-train-"))
    try:
        sft = bench_sft(args.model, args.steps, args.prompts * args.generations, out)
        rl = bench_rl(args.model, args.steps, args.prompts, args.generations, out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(f"model {args.model}; {args.steps} steps each (median of the last {args.steps - 1}); "
          f"RL: {args.prompts} prompts x {args.generations} rollouts a step, up to 3 turns")
    for name, res in (("SFT", sft), ("SFT+RL", rl)):
        for k, v in res.items():
            print(f"  {name:<7} {k:<48} {v:10.3f}")


if __name__ == "__main__":
    main()
