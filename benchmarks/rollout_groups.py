"""Will the RL term train? Sample rollout groups of an embedded student with llama.cpp before spending CPU hours.

    python benchmarks/rollout_groups.py --tasks runs/rl-probe-q05/tasks/train --student qwen2.5-coder-0.5b \\
        --generations 4 --turns 2 --tokens 256 --temperatures 1.0 0.7
    python benchmarks/rollout_groups.py --tasks … --student runs/sft/student.gguf --tokenizer runs/sft/checkpoint …
        # a trained student, exported with `worldsmith train export`

A CPU SFT+RL step of the 0.5B takes 15-40 minutes, and it trains no RL term when every rollout of a group has a void
turn or all its rewards are equal (the group filter). This samples the same groups in a minute or two: the rollouts
go through the trainer's own environment (`training/rollout.SandboxEnvironment`: chat-template tokens, sandboxed
cells, interpreter messages, the last-turn nudge, the answer guards) and are scored by the trainer's rewards and
group filter; only the sampler differs (llama.cpp on the student's GGUF instead of `model.generate` on its
dequantised weights), so rates are estimates of the trainer's, not its exact draws. Per temperature it prints the
void-turn rate, the answered rate, the reward spread and the share of groups the filter drops, and writes every
rollout's messages to OUT/rollout_groups.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def llama_generator(llm: Any, tokenizer: Any, eos_ids: set[int], *, temperature: float, max_new_tokens: int,
                    rng: random.Random) -> Any:
    """A TurnGenerator over llama.cpp: one turn per context, ending at EOS, an action stop sequence or the limit;
    each turn gets its own sampler seed (llama.cpp reuses the model's seed otherwise: a group would be one draw)."""
    from worldsmith.tools.grammar import ACTION_STOP_SEQUENCES

    def generate(contexts: list[list[int]]) -> list[list[int]]:
        turns = []
        for ctx in contexts:
            llm.set_seed(rng.randrange(2**31))
            new: list[int] = []
            for t in llm.generate(ctx, temp=temperature, top_p=1.0, top_k=0, min_p=0.0, reset=True):
                new.append(int(t))
                if int(t) in eos_ids or len(new) >= max_new_tokens:
                    break
                if tokenizer.decode(new).rstrip().endswith(ACTION_STOP_SEQUENCES):
                    break
            turns.append(new)
        return turns

    return generate


def group_stats(rewards: list[float], void: list[bool], answered: list[bool], group: int) -> dict[str, Any]:
    """The trainer's view of one batch: which groups the equal-reward filter drops, which rollouts train L_RL."""
    import torch

    from worldsmith.training.rl_loss import equal_reward_groups

    filtered = equal_reward_groups(torch.tensor(rewards), group).tolist()
    trains = [not filtered[i // group] and not void[i] for i in range(len(rewards))]
    return {"rollouts": len(rewards), "void_rate": sum(void) / len(void), "answered_rate": sum(answered) / len(void),
            "reward_mean": statistics.fmean(rewards), "reward_std": statistics.pstdev(rewards),
            "filtered_groups": sum(filtered) / len(filtered), "rollouts_training_rl": sum(trains)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=Path, required=True, help="a task collection (its train split is sampled)")
    ap.add_argument("--student", default="qwen2.5-coder-0.5b",
                    help="an embedded model name, or a trained student's GGUF (`worldsmith train export`)")
    ap.add_argument("--tokenizer", default=None,
                    help="with a GGUF --student: its checkpoint folder (the tokenizer the trainer would use)")
    ap.add_argument("--generations", type=int, default=4, help="rollouts per task (the group size G)")
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=256, help="tokens per assistant turn")
    ap.add_argument("--budget", type=int, default=2048, help="completion tokens per rollout")
    ap.add_argument("--temperatures", type=float, nargs="+", default=[1.0])
    ap.add_argument("--max-tasks", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="where rollout_groups.json goes (default: --tasks)")
    a = ap.parse_args()

    from worldsmith.core.config import load_settings
    from worldsmith.core.taskpkg import TaskCollection, read_task_package
    from worldsmith.llm.providers.embedded import load_model
    from worldsmith.training.models import embedded_gguf, load_tokenizer
    from worldsmith.training.rewards import datamind_reward
    from worldsmith.training.rl_data import rl_rows
    from worldsmith.training.rollout import RolloutConfig, SandboxEnvironment, rollout_output, rollout_reward

    settings = load_settings()
    models_dir = settings.llm.resolved_models_dir(settings.home)
    gguf = Path(a.student) if a.student.endswith(".gguf") else embedded_gguf(a.student, models_dir)
    if gguf is None or not gguf.is_file():
        sys.exit(f"--student {a.student!r} is neither an embedded model name (worldsmith llm models lists them) nor "
                 "a GGUF file")
    if a.student.endswith(".gguf") and not a.tokenizer:
        sys.exit("a GGUF --student needs --tokenizer: the checkpoint folder it was exported from")
    coll = TaskCollection(a.tasks)
    tasks = [read_task_package(a.tasks / e.path) for e in coll.entries() if e.split not in ("test", "dev")]
    rows, _ = rl_rows(tasks[:a.max_tasks])
    if not rows:
        sys.exit(f"{a.tasks}: no closed-form train task to roll out")
    tokenizer = load_tokenizer(a.tokenizer or a.student, models_dir=models_dir)
    llm = load_model(gguf, a.budget + 4096, None).llama  # the embedded provider's loader and thread count
    env = SandboxEnvironment(tokenizer, RolloutConfig(max_turns=a.turns, max_new_tokens=a.tokens), settings.sandbox)
    reward = rollout_reward(datamind_reward)
    rng = random.Random(a.seed)
    report: dict[str, Any] = {"student": a.student, "gguf": str(gguf), "generations": a.generations,
                              "turns": a.turns, "tokens": a.tokens, "tasks": len(rows), "by_temperature": {}}
    try:
        for temp in a.temperatures:
            generate = llama_generator(llm, tokenizer, env.frame.eos_ids, temperature=temp,
                                       max_new_tokens=a.tokens, rng=rng)
            start = time.perf_counter()
            rewards: list[float] = []
            void: list[bool] = []
            answered: list[bool] = []
            kept: list[dict[str, Any]] = []
            for k, row in enumerate(rows, 1):
                g = a.generations
                names = [[str(x["name"]) for x in json.loads(row["answers"])]] * g
                rollouts = env.run([row["prompt"]] * g, [[Path(p) for p in row["inputs"]]] * g, generate,
                                   a.budget, names, [row["setup"]] * g)
                out = rollout_output(rollouts)
                scores = reward([row["prompt"]] * g, [None] * g, answers=[row["answers"]] * g,
                                rule=[row["rule"]] * g, **{k2: out[k2] for k2 in ("rollout_messages", "answer_tokens",
                                                                                  "unsupported", "answered")})
                rewards += scores
                void += out["void"]
                answered += out["answered"]
                kept += [{"task_id": row["task_id"], "reward": s, "void": r.void, "answer": r.answer,
                          "unsupported": r.unsupported, "messages": r.messages} for s, r in zip(scores, rollouts)]
                print(f"T={temp} task {k}/{len(rows)} {row['task_id']}: rewards {scores} void {out['void']}",
                      flush=True)
            stats = group_stats(rewards, void, answered, a.generations)
            stats["seconds"] = round(time.perf_counter() - start, 1)
            report["by_temperature"][str(temp)] = {**stats, "rollouts_detail": kept}
            print(json.dumps({"temperature": temp, **stats}), flush=True)
    finally:
        env.close()
    out_dir = a.out or a.tasks
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "rollout_groups.json").write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
