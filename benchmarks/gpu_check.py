"""GPU check: a few SFT+RL steps of `SFTRLTrainer` on a ~0.5B-class model built from a config (random weights, no
download), printing seconds per step, tokens/s and peak GPU memory. Run it through benchmarks/gpu_check.sh, which
installs the carried wheels the GPU machine lacks.

    python benchmarks/gpu_check.py                       # Qwen2.5-0.5B-sized model, bf16, on cuda
    python benchmarks/gpu_check.py --device cpu --tiny   # the same path on the tiny model (CI / laptops)
    python benchmarks/gpu_check.py --gspo --lora         # the two switches

What it exercises: TRL's generation (G completions per prompt, `model.generate`), rewards, the group filter, the
DAPO loss and the SFT term on expert sequences, γ schedule, optimizer steps. What it does not: sandboxed multi-turn
rollouts (those need the worldsmith sandbox and pydantic; benchmarks/train.py measures them on CPU). Imports only
`worldsmith.training.rl` (torch + trl) and a tokenizer helper.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

#: Qwen2.5-0.5B's shape (494M parameters with tied embeddings).
QWEN05 = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
              num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768, tie_word_embeddings=True,
              rope_theta=1_000_000.0, rms_norm_eps=1e-6)
TINY = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=4096, tie_word_embeddings=True)


def byte_tokenizer() -> Any:
    """A byte-level ChatML tokenizer built offline (TRAIN-SFT's models.tiny_tokenizer once merged)."""
    try:
        from worldsmith.training.models import tiny_tokenizer
    except ImportError:
        from tests.training.tiny_lm import tiny_tokenizer
    return tiny_tokenizer()


def build_model(tok: Any, tiny: bool, dtype: Any) -> Any:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    shape = TINY | {"vocab_size": len(tok)} if tiny else QWEN05  # real vocab: the LM head's cost is real
    cfg = Qwen2Config(**shape, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).to(dtype)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model


def dataset(tok: Any, n: int, prompt_chars: int, expert_chars: int) -> Any:
    from datasets import Dataset

    rows = []
    for i in range(n):
        prompt = [{"role": "user", "content": (f"task {i}: " + "describe the sales table. " * 64)[:prompt_chars]}]
        answer = ("<think>\n" + "the total is the sum of amounts. " * 64)[:expert_chars] + "\n</think>\n<answer>\n@t[1]\n</answer>"
        head = tok.encode(tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True),
                          add_special_tokens=False)
        ids = tok.encode(tok.apply_chat_template(prompt + [{"role": "assistant", "content": answer}], tokenize=False),
                         add_special_tokens=False)
        rows.append({"prompt": prompt, "expert_input_ids": ids,
                     "expert_completion_mask": [0] * len(head) + [1] * (len(ids) - len(head))})
    return Dataset.from_list(rows)


def synthetic_reward(prompts: Any, completions: Any, completion_ids: Any = None, **kw: Any) -> list[float]:
    """The share of even token ids: varies within a group of sampled completions, so the RL term does work."""
    return [sum(1 for t in ids if t % 2 == 0) / max(len(ids), 1) for ids in completion_ids]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--tiny", action="store_true", help="2-layer hidden-32 model instead of the 0.5B shape")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--prompts", type=int, default=4, help="prompts per step")
    ap.add_argument("--generations", type=int, default=4, help="completions per prompt")
    ap.add_argument("--completion-tokens", type=int, default=None, help="default 512 (cuda) / 24 (cpu)")
    ap.add_argument("--gspo", action="store_true", help="sequence-level importance sampling")
    ap.add_argument("--lora", action="store_true", help="LoRA adapters (peft) instead of full fine-tuning")
    args = ap.parse_args()

    import torch
    from transformers import TrainerCallback

    from worldsmith.training.rl import SFTRLConfig, SFTRLTrainer, objective_settings

    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("gpu_check: --device cuda but torch sees no GPU (torch.cuda.is_available() is False)")
    completion = args.completion_tokens or (512 if cuda else 24)
    tok = byte_tokenizer()
    t0 = time.perf_counter()
    model = build_model(tok, args.tiny, torch.bfloat16 if cuda else torch.float32)
    n_params = sum(p.numel() for p in model.parameters())
    ds = dataset(tok, args.prompts * args.steps, 256 if cuda else 64, 1024 if cuda else 64)

    class Clock(TrainerCallback):  # type: ignore[misc]
        times: list[float] = []

        def on_step_begin(self, *a: Any, **k: Any) -> None:
            if cuda:
                torch.cuda.synchronize()
            self.t = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            if cuda:
                torch.cuda.synchronize()
            self.times.append(time.perf_counter() - self.t)

    peft_config = None
    if args.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM")
    out = tempfile.mkdtemp(prefix="gpu-check-")
    cfg = SFTRLConfig(output_dir=out, max_steps=args.steps, per_device_train_batch_size=args.prompts * args.generations,
                      num_generations=args.generations, max_completion_length=completion, learning_rate=1e-6,
                      bf16=cuda, use_cpu=not cuda, logging_steps=1, report_to=[], save_strategy="no",
                      **objective_settings(args.gspo), gradient_checkpointing=cuda,
                      gamma_schedule="cosine", log_completions=False)
    clock = Clock()
    trainer = SFTRLTrainer(model=model, reward_funcs=[synthetic_reward], args=cfg, train_dataset=ds,
                           processing_class=tok, peft_config=peft_config, callbacks=[clock])
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    total = time.perf_counter() - t0
    hist = [h for h in trainer.state.log_history if "sft/gamma" in h]
    tokens = [h["num_tokens"] for h in hist if "num_tokens" in h]
    deltas = [b - a for a, b in zip([0.0] + tokens, tokens)]
    measured = clock.times[1:] or clock.times
    step_s = statistics.median(measured)
    tok_s = statistics.median(deltas[1:] or deltas) / step_s if deltas else float("nan")
    print(f"\n== gpu_check: {'tiny' if args.tiny else 'Qwen2.5-0.5B-shaped'} model, {n_params / 1e6:.1f}M params, "
          f"{args.device}{' (' + torch.cuda.get_device_name() + ')' if cuda else ''}, "
          f"{'GSPO' if args.gspo else 'DAPO'}{' + LoRA' if args.lora else ''}")
    print(f"steps {len(clock.times)}; {args.prompts} prompts x {args.generations} completions of <= {completion} tokens")
    print(f"step time median {step_s:.2f} s (first step {clock.times[0]:.2f} s); tokens/s {tok_s:.0f}")
    if cuda:
        print(f"peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB "
              f"(reserved {torch.cuda.max_memory_reserved() / 2**30:.2f} GiB)")
    for h in hist:
        print(f"  step {h.get('step', '?')}: γ {h['sft/gamma']:.3f}  L_SFT {h.get('sft/loss', float('nan')):.3f}  "
              f"L_RL {h.get('rl/loss', float('nan')):.4f}  reward {h.get('reward', float('nan')):.3f}  "
              f"entropy {h.get('entropy', float('nan')):.2f}")
    print(f"total wall {total:.1f} s")


if __name__ == "__main__":
    main()
