"""`worldsmith train rl`: SFT+RL over sandboxed rollouts (service: worldsmith.app.train_rl).

Added to the `train` group by `add_rl_command(train_app)` (alias `register_train`, the hook commands/train.py calls).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from worldsmith.commands.common import EXIT_USAGE, STATE, console, emit_json, fail, friendly_errors


def add_rl_command(train_app: typer.Typer) -> None:
    train_app.command("rl")(rl_cmd)


register_train = add_rl_command  # the name commands/train.py looks for in its extension modules


def rl_cmd(ctx: typer.Context,
           tasks: Annotated[Optional[list[Path]], typer.Option("--tasks", help="Task collection whose closed-form train tasks are rolled out (repeatable).")] = None,
           data: Annotated[Optional[list[Path]], typer.Option("--data", help="Expert trajectories for the SFT term: eval run, task collection (oracles) or folder (repeatable).")] = None,
           model: Annotated[str, typer.Option(help="Student: 'tiny', an embedded model name, or a checkpoint path (e.g. from `train sft`).")] = "tiny",
           out: Annotated[Optional[Path], typer.Option(help="Run directory to create (default: runs/<stamp>-train-rl-…).")] = None,
           max_steps: Annotated[int, typer.Option(help="Optimizer steps.")] = 20,
           prompts: Annotated[int, typer.Option("--prompts-per-step", help="Distinct tasks per step.")] = 2,
           generations: Annotated[int, typer.Option("--generations", help="Rollouts per task (the GRPO group).")] = 4,
           grad_accum: Annotated[int, typer.Option(help="Micro-batches per optimizer step.")] = 1,
           lr: Annotated[float, typer.Option(help="Learning rate.")] = 1e-6,
           gamma: Annotated[str, typer.Option(help="SFT weight schedule: cosine | linear | constant:<v> | sft-then-rl:<pct>.")] = "cosine",
           lora: Annotated[bool, typer.Option("--lora/--full", help="LoRA adapters (merged on save) or full fine-tuning.")] = False,
           gspo: Annotated[bool, typer.Option("--gspo/--token-level", help="GSPO as its paper trains it: sequence-level ratios, per-sequence loss, clip 3e-4/4e-4.")] = False,
           max_turns: Annotated[int, typer.Option(help="Turns per rollout.")] = 10,
           max_tokens: Annotated[int, typer.Option("--max-completion-tokens", help="Token budget of a rollout (model + interpreter).")] = 2048,
           max_new_tokens: Annotated[int, typer.Option(help="Tokens per assistant turn.")] = 512,
           temperature: Annotated[float, typer.Option(help="Sampling temperature of rollouts.")] = 1.0,
           reward: Annotated[str, typer.Option(help="datamind (correct × length factor, −0.1 malformed) | closed-form.")] = "datamind",
           pool: Annotated[int, typer.Option("--pool", help="Warm sandbox sessions kept ready (0: start on demand).")] = 0,
           max_tasks: Annotated[Optional[int], typer.Option(help="Use at most N tasks.")] = None,
           expert_max_tokens: Annotated[int, typer.Option(help="Longest expert example for the SFT term (tokens).")] = 4096,
           seed: Annotated[int, typer.Option(help="Seed for sampling and the tiny model.")] = 0,
           save_every_steps: Annotated[int, typer.Option(help="A resumable checkpoint every N optimizer steps (0: by time only).")] = 0,
           save_every_minutes: Annotated[float, typer.Option(help="A resumable checkpoint every M minutes of training (0: by steps only).")] = 10.0,
           resume: Annotated[Optional[Path], typer.Option(help="Continue a killed run in its run directory, from its newest checkpoint (its options come from the run's config.json).")] = None,
           json_out: Annotated[bool, typer.Option("--json", help="Machine-readable summary.")] = False) -> None:
    """SFT+RL: γ·SFT + (1−γ)·DAPO over multi-turn sandboxed rollouts; writes curves, report and checkpoint."""
    from worldsmith.app.train_rl import REWARDS, RLRequest, resume_rl, rl_from_paths
    from worldsmith.commands.train import check_resume, step_reporter
    from worldsmith.core.store import ArtifactError
    from worldsmith.tools.sandbox import SandboxError

    check_resume(ctx, resume, needed="--tasks")
    for p in [*(tasks or []), *(data or [])]:
        if not p.exists():
            fail(f"{p}: no such folder", code=EXIT_USAGE)
    if reward not in REWARDS:
        fail(f"--reward must be one of {', '.join(REWARDS)}, got {reward!r}", code=EXIT_USAGE)
    progress, on_step = step_reporter("rl", show=not json_out)
    with friendly_errors(ValueError, FileNotFoundError, FileExistsError, ArtifactError, ImportError, RuntimeError,
                         SandboxError), progress:
        if resume is not None:
            summary = resume_rl(STATE.settings(), resume, progress=on_step)
        else:
            req = RLRequest(tasks=list(tasks or []), data=list(data or []), model=model, out=out,
                            max_steps=max_steps, prompts_per_step=prompts, num_generations=generations,
                            grad_accum=grad_accum, lr=lr, gamma=gamma, lora=lora, gspo=gspo, max_turns=max_turns,
                            max_completion_tokens=max_tokens, max_new_tokens=max_new_tokens,
                            temperature=temperature, reward=reward, pool_size=pool, max_tasks=max_tasks,
                            expert_max_tokens=expert_max_tokens, seed=seed, save_every_steps=save_every_steps,
                            save_every_minutes=save_every_minutes)
            summary = rl_from_paths(STATE.settings(), req, progress=on_step)
    if json_out:
        emit_json(summary)
        return
    resumed = f" (resumed from step {summary['resumed_from_step']})" if summary.get("resumed_from_step") else ""
    console.print(f"SFT+RL {summary['model']}: {summary['steps']} steps{resumed} on {summary['tasks']} tasks "
                  f"({summary['with_expert']} with an expert), final reward {summary['final_reward']}", highlight=False)
    console.print(f"report: {summary['report']}\ncheckpoint: {summary['checkpoint']}", highlight=False)
