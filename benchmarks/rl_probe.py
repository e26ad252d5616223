"""A short SFT+RL probe on CPU: one student, the tasks of a few train worlds, the worlds' oracles as the SFT term.

    python benchmarks/rl_probe.py --out runs/rl-probe-q05 --student qwen2.5-coder-0.5b --worlds customer_pricing:11 \\
        --steps 2 --turns 2 --tokens 256

It asks whether the RL term trains at all for a student (groups with unequal rewards, rollouts without a void turn),
without the full student pipeline's SFT and evals (benchmarks/student.py); benchmarks/rollout_groups.py estimates
the same in minutes with llama.cpp before a step is spent. The worlds stage is student.py's (engine
templates, no LLM); the RL stage is `worldsmith train rl`'s code path (`app.train_rl.rl_from_paths`). Per-step
metrics go to OUT/rl/events.jsonl as each step ends; history, curves, report and checkpoint at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from student import TEACHER, Pipeline, PipelineConfig  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="run directory (the worlds stage resumes)")
    ap.add_argument("--student", default="qwen2.5-coder-0.5b", help="embedded model name or checkpoint path")
    ap.add_argument("--worlds", nargs="+", default=["customer_pricing:11"], metavar="TEMPLATE:SEED")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--prompts", type=int, default=1, help="distinct train tasks per step")
    ap.add_argument("--generations", type=int, default=4, help="rollouts per prompt (the group size G)")
    ap.add_argument("--turns", type=int, default=2, help="turns per rollout")
    ap.add_argument("--tokens", type=int, default=256, help="tokens per assistant turn")
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--grad-accum", type=int, default=1, help="micro-batches a step's rollouts are split into (memory)")
    ap.add_argument("--temperature", type=float, default=1.0, help="rollout sampling temperature")
    ap.add_argument("--full", action="store_true", help="full fine-tuning instead of LoRA")
    ap.add_argument("--expert-max-tokens", type=int, default=4096, help="longest oracle for the SFT term (tokens)")
    a = ap.parse_args()

    from worldsmith.app.train_rl import RLRequest, rl_from_paths

    p = Pipeline(PipelineConfig(out=a.out, student=a.student, train_worlds=tuple(a.worlds), heldout_worlds=(),
                                teacher=None, lora=not a.full))
    p.stage("worlds", p.worlds)
    train = a.out / "tasks" / "train"
    req = RLRequest(tasks=[train], data=[train], model=a.student, out=p.fresh("rl"), max_steps=a.steps,
                    prompts_per_step=a.prompts, num_generations=a.generations, max_turns=a.turns,
                    max_new_tokens=a.tokens, lora=not a.full, lr=a.lr, temperature=a.temperature,
                    grad_accum=a.grad_accum, expert_max_tokens=a.expert_max_tokens,
                    expert_max_turn_tokens=p.cfg.max_tokens)  # an expert's turn fits the eval's turn budget
    summary = rl_from_paths(p.settings(TEACHER), req)
    print(json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    main()
