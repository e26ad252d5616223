"""One SFT+RL run: config → `SFTRLTrainer` over sandboxed rollouts → run directory with curves, summary, checkpoint.

    summary = train_rl(dataset, model, tokenizer, RLRunConfig(max_steps=20), run, reward_funcs=[datamind_reward])

The run directory (core/runs.RunDir) gets `rollout_turns` events as each generation round of a step's rollouts
ends, a `rollouts` event when they are done, one `step` event per logged step, history.json (TRL's log history),
curves.png (reward, γ, L_SFT / L_RL, entropy, void rate), summary.json, report.md and checkpoint/ (model +
tokenizer; LoRA adapters are merged first so the checkpoint loads as a plain model). rollouts.jsonl gets every
completion of every step as it is scored: the messages the student wrote and read, its answer, each reward
function's score, the advantage it trained with and why it was masked (void turn, equal-reward group).
While it trains, `trainer/checkpoint-<step>/` is saved every `save_every_steps` steps or `save_every_minutes` minutes;
`train_rl(..., resume_from=…)` continues from one, and drops the rollouts.jsonl lines of the steps it redoes.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from worldsmith.core.runs import RunDir
from worldsmith.core.store import append_jsonl, atomic_write_text, read_jsonl
from worldsmith.core.sandbox_config import SandboxConfig
from worldsmith.training.checkpoints import (
    FINAL_DIR,
    TRAINER_DIR,
    checkpoint_seconds,
    resumed_step,
    save_callback,
    save_final,
)
from worldsmith.training.rollout import RolloutConfig, SandboxEnvironment, TurnGenerator, rollout_reward

#: ``progress(step, total_steps)`` after each optimizer step.
Progress = Callable[[int, int], None]

#: every completion of every step, with its rewards and masks (`log_samples`)
SAMPLES = "rollouts.jsonl"

#: (panel title, log keys drawn in it)
CURVES = (("reward", ("reward",)), ("γ (SFT weight)", ("sft/gamma",)), ("losses", ("sft/loss", "rl/loss")),
          ("entropy", ("entropy",)), ("void rate / filtered groups", ("rl/void_rate", "rl/filtered_group_frac")))


@dataclass
class RLRunConfig:
    max_steps: int = 20
    prompts_per_step: int = 2  # distinct prompts per optimizer step; completions = prompts × num_generations
    num_generations: int = 4
    grad_accum: int = 1
    lr: float = 1e-6
    gamma_schedule: str = "cosine"
    lora: bool = False
    lora_rank: int = 16
    gspo: bool = False  # GSPO as its paper trains it (rl.GSPO_SETTINGS) instead of DAPO
    beta: float = 0.0
    max_completion_tokens: int = 2048
    max_new_tokens: int = 512  # per turn
    max_turns: int = 10
    temperature: float = 1.0
    mask_void: bool = True
    filter_equal_groups: bool = True
    pool_size: int = 0
    reward_weights: list[float] | None = None  # one per reward function; weight 0 = logged only (a component)
    seed: int = 0
    bf16: bool = False
    save_checkpoint: bool = True
    save_every_steps: int = 0  # a resumable Trainer checkpoint every N optimizer steps (0: by time only)
    save_every_minutes: float = 10.0  # … and every M minutes of training (0: by steps only)


def trainer_config(cfg: RLRunConfig, output_dir: Path) -> Any:
    from worldsmith.training.rl import SFTRLConfig, objective_settings

    return SFTRLConfig(
        output_dir=str(output_dir), max_steps=cfg.max_steps, learning_rate=cfg.lr,
        per_device_train_batch_size=cfg.prompts_per_step * cfg.num_generations // cfg.grad_accum,
        gradient_accumulation_steps=cfg.grad_accum, num_generations=cfg.num_generations,
        max_completion_length=cfg.max_completion_tokens, temperature=cfg.temperature,
        gamma_schedule=cfg.gamma_schedule, mask_void=cfg.mask_void, filter_equal_groups=cfg.filter_equal_groups,
        **objective_settings(cfg.gspo), beta=cfg.beta, seed=cfg.seed,
        reward_weights=cfg.reward_weights,
        logging_steps=1, save_strategy="no", save_total_limit=1, report_to=[], bf16=cfg.bf16, use_cpu=not _cuda(),
        log_completions=False, disable_tqdm=True)  # progress goes through `progress`; stdout stays free for --json


def lora_config(cfg: RLRunConfig) -> Any:
    from peft import LoraConfig

    return LoraConfig(r=cfg.lora_rank, lora_alpha=2 * cfg.lora_rank, lora_dropout=0.0, task_type="CAUSAL_LM",
                      target_modules="all-linear")


def build_trainer(dataset: Any, model: Any, tokenizer: Any, cfg: RLRunConfig, output_dir: Path,
                  reward_funcs: Sequence[Callable[..., list[float]]], env: SandboxEnvironment) -> Any:
    from worldsmith.training.rl import SFTRLTrainer

    if (cfg.prompts_per_step * cfg.num_generations) % cfg.grad_accum:
        raise ValueError(f"prompts_per_step × num_generations ({cfg.prompts_per_step * cfg.num_generations}) must "
                         f"divide into grad_accum ({cfg.grad_accum}) micro-batches")
    return SFTRLTrainer(model=model, reward_funcs=[rollout_reward(f) for f in reward_funcs],
                        args=trainer_config(cfg, output_dir), train_dataset=dataset, processing_class=tokenizer,
                        rollout_func=env, peft_config=lora_config(cfg) if cfg.lora else None)


def train_rl(dataset: Any, model: Any, tokenizer: Any, cfg: RLRunConfig, run: RunDir,
             reward_funcs: Sequence[Callable[..., list[float]]], *, sandbox: SandboxConfig | None = None,
             generator: TurnGenerator | None = None, progress: Progress | None = None,
             resume_from: Path | None = None) -> dict[str, Any]:
    """Train (from the Trainer checkpoint `resume_from`, when given), then write history, curves, summary, report
    and checkpoint into `run`; returns the summary."""
    from transformers import PrinterCallback, TrainerCallback

    env = SandboxEnvironment(tokenizer, RolloutConfig(max_turns=cfg.max_turns, max_new_tokens=cfg.max_new_tokens,
                                                      pool_size=cfg.pool_size), sandbox, generator,
                             on_event=run.event)  # rollout progress in events.jsonl long before a step ends

    class _Events(TrainerCallback):  # type: ignore[misc]
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
            if logs:
                run.event("step", step=state.global_step, **{k: v for k, v in logs.items() if _finite(v)})

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if progress is not None:
                progress(state.global_step, state.max_steps)

    first, prior = resumed_step(resume_from), checkpoint_seconds(resume_from)
    drop_samples_after(run.path / SAMPLES, first)  # the steps this run does (again)
    start = time.perf_counter()
    try:
        trainer = build_trainer(dataset, model, tokenizer, cfg, run.path / TRAINER_DIR, reward_funcs, env)
        trainer.sample_log = lambda records: log_samples(run.path / SAMPLES, trainer.state.global_step + 1, records)
        trainer.add_callback(_Events())
        if cfg.save_checkpoint:
            trainer.add_callback(save_callback(cfg.save_every_steps, cfg.save_every_minutes, prior_seconds=prior))
        trainer.remove_callback(PrinterCallback)  # it prints every log dict to stdout; events.jsonl keeps them
        trainer.train(resume_from_checkpoint=str(resume_from) if resume_from is not None else None)
    finally:
        env.close()
    history = [h for h in trainer.state.log_history if "sft/gamma" in h or "reward" in h]
    run.write_json("history.json", history)
    curves = plot_curves(history, run.path / "curves.png")
    checkpoint = save_final(trainer, tokenizer, run.path / FINAL_DIR) if cfg.save_checkpoint else None
    last = history[-1] if history else {}
    elapsed = time.perf_counter() - start
    summary = {"steps": int(trainer.state.global_step), "seconds": round(prior + elapsed, 1),
               "seconds_this_leg": round(elapsed, 1),  # `seconds` adds the earlier legs of a resumed run
               "resumed_from_step": first or None,
               "final_reward": last.get("reward"), "final_gamma": last.get("sft/gamma"),
               "final_sft_loss": last.get("sft/loss"), "final_rl_loss": last.get("rl/loss"),
               "void_rate": last.get("rl/void_rate"), "rollout_generation_s": round(env.timings.generation_s, 2),
               "rollout_sandbox_s": round(env.timings.sandbox_s, 2),
               "rollout_sandbox_wait_s": round(env.timings.sandbox_wait_s, 2),
               "curves": str(curves) if curves else None, "checkpoint": str(checkpoint) if checkpoint else None,
               "config": asdict(cfg)}
    run.write_json("summary.json", summary)
    shutil.rmtree(run.path / TRAINER_DIR, ignore_errors=True)  # the resume points; the final model is saved
    run.write_report(render_report(summary, history))
    return summary


def drop_samples_after(path: Path, step: int) -> None:
    """Keep only the SAMPLES lines of steps ≤ `step` (a resumed run redoes the later ones; 0: start afresh)."""
    if path.is_file():
        kept = [r for r in read_jsonl(path) if int(r.get("step", 0)) <= step]
        atomic_write_text(path, "".join(json.dumps(r, default=str) + "\n" for r in kept))


def log_samples(path: Path, step: int, records: Sequence[dict[str, Any]]) -> None:
    """Append each completion of a generation batch to SAMPLES (`rl.rollout_samples`), tagged with its step."""
    for rec in records:
        append_jsonl(path, {"step": step, **rec})


def plot_curves(history: list[dict[str, Any]], path: Path) -> Path | None:
    """One panel per CURVES entry, x = optimizer step; None when nothing was logged."""
    if not history:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(CURVES), figsize=(4 * len(CURVES), 3.2))
    for ax, (title, keys) in zip(axes, CURVES):
        for key in keys:
            pts = [(h.get("step", i), h[key]) for i, h in enumerate(history) if _finite(h.get(key))]
            if pts:
                ax.plot(*zip(*pts), marker=".", label=key)
        ax.set_title(title)
        ax.set_xlabel("step")
        if len(keys) > 1:
            ax.legend(fontsize=7)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    tmp.replace(path)  # atomic: a reader never sees half an image
    return path


def render_report(summary: dict[str, Any], history: list[dict[str, Any]]) -> str:
    cfg = summary["config"]
    resumed = (f" (resumed after step {summary['resumed_from_step']}; this leg {summary['seconds_this_leg']} s)"
               if summary.get("resumed_from_step") else "")
    lines = [f"# SFT+RL run: {summary['steps']} steps in {summary['seconds']} s{resumed}", "",
             f"γ schedule `{cfg['gamma_schedule']}`, {cfg['num_generations']} rollouts per prompt, "
             f"{cfg['prompts_per_step']} prompts per step, lr {cfg['lr']:g}, "
             f"{'GSPO' if cfg['gspo'] else 'DAPO'}{' + LoRA' if cfg['lora'] else ''}.", "",
             "| step | reward | γ | L_SFT | L_RL | entropy | void rate | filtered groups |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for h in history:
        lines.append("| " + " | ".join([str(h.get("step", ""))] + [_fmt(h.get(k)) for k in (
            "reward", "sft/gamma", "sft/loss", "rl/loss", "entropy", "rl/void_rate", "rl/filtered_group_frac")]) + " |")
    lines += ["", f"Rollout time: generation {summary['rollout_generation_s']} s, sandbox "
              f"{summary['rollout_sandbox_s']} s (generation idle waiting on cells: {summary['rollout_sandbox_wait_s']} s).",
              "", "![curves](curves.png)" if summary.get("curves") else "(no curves: nothing was logged)",
              "", f"Every completion, with its messages, rewards and advantage: `{SAMPLES}`.",
              "", f"Checkpoint: `{summary['checkpoint']}`" if summary.get("checkpoint") else "No checkpoint saved."]
    return "\n".join(lines) + "\n"


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if _finite(v) else "–"


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())
