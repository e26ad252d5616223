"""Supervised fine-tuning on trajectory datasets with TRL's `SFTTrainer` (full fine-tuning or LoRA).

    result = train_sft(data, model, tokenizer, SFTRunConfig(epochs=2, lora=True), run_dir)

The dataset (data.py) is already tokenized with a `labels` column (-100 outside the model's own valid turns), which
`SFTTrainer` uses as is: only assistant tokens carry loss, and the loss is the token-level mean NLL over them (TRL's
`nll` loss, normalised by the number of trained tokens in the accumulated batch). Every logged step goes to the run's
events.jsonl; at the end the run directory holds `curves.png`, `history.json`, `report.md` and the checkpoint
(`checkpoint/`: model + tokenizer; LoRA adapters are merged so the folder is a plain Hugging Face model that the `hf`
LLM provider and llama.cpp's GGUF converter read). While it trains, `trainer/checkpoint-<step>/` is saved every
`save_every_steps` steps or `save_every_minutes` minutes, which `train_sft(..., resume_from=…)` continues from
(checkpoints.py).
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from worldsmith.core.runs import RunDir
from worldsmith.training.checkpoints import (
    FINAL_DIR,
    TRAINER_DIR,
    checkpoint_seconds,
    resumed_step,
    save_callback,
    save_final,
)
from worldsmith.training.data import SFTData, rejected_summary
from worldsmith.training.models import GGUF_EXPORT_HINT
from worldsmith.training.report import last_value, plot_curves, table

#: ``progress(step, total_steps)`` after each optimizer step.
Progress = Callable[[int, int], None]
CURVES = ("loss", "eval_loss", "learning_rate", "grad_norm", "mean_token_accuracy", "entropy")


@dataclass(frozen=True)
class SFTRunConfig:
    """Knobs of one SFT run (defaults suit a CPU cold start of a small student)."""

    epochs: float = 1.0
    """Passes over the train split (cold-start epochs); ignored when max_steps > 0."""
    max_steps: int = -1
    """Stop after this many optimizer steps (-1: run the epochs)."""
    lr: float | None = None
    """Peak learning rate; default 2e-5 for full fine-tuning, 2e-4 for LoRA."""
    batch_size: int = 1
    """Examples per device per micro-batch."""
    grad_accum: int = 1
    """Micro-batches per optimizer step."""
    warmup_ratio: float = 0.0
    """Share of steps with a linear warm-up (passed to transformers as a fractional warmup_steps)."""
    scheduler: str = "cosine"
    """transformers lr scheduler name."""
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    lora: bool = False
    """Train LoRA adapters (peft) instead of every weight; merged into the saved checkpoint."""
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    seed: int = 0
    bf16: bool | None = None
    """Mixed precision; None: on when a CUDA device supports bf16, off on CPU."""
    save: bool = True
    """Write the checkpoint (model + tokenizer) under the run directory."""
    save_every_steps: int = 0
    """A resumable Trainer checkpoint every N optimizer steps (0: by time only)."""
    save_every_minutes: float = 10.0
    """A resumable Trainer checkpoint every M minutes of training (0: by steps only)."""

    def __post_init__(self) -> None:
        if self.epochs <= 0 and self.max_steps <= 0:
            raise ValueError("SFTRunConfig: set epochs > 0 or max_steps > 0")
        if self.batch_size < 1 or self.grad_accum < 1:
            raise ValueError(f"SFTRunConfig: batch_size and grad_accum must be ≥ 1 "
                             f"(got {self.batch_size}, {self.grad_accum})")
        if self.lr is not None and not self.lr > 0:
            raise ValueError(f"SFTRunConfig.lr must be positive, got {self.lr}")
        if self.save_every_steps < 0 or self.save_every_minutes < 0:
            raise ValueError("SFTRunConfig: save_every_steps and save_every_minutes must be ≥ 0")

    @property
    def learning_rate(self) -> float:
        return self.lr if self.lr is not None else (2e-4 if self.lora else 2e-5)


@dataclass
class SFTResult:
    run_dir: Path
    checkpoint: Path | None
    history: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def _use_bf16(config: SFTRunConfig) -> bool:
    if config.bf16 is not None:
        return config.bf16
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())


def sft_config(config: SFTRunConfig, output_dir: Path, *, has_validation: bool, max_length: int | None) -> Any:
    """TRL's SFTConfig for our pre-tokenized data (labels given, no packing; mid-run checkpoints come from
    `checkpoints.save_callback`, the newest one kept)."""
    from trl import SFTConfig

    return SFTConfig(output_dir=str(output_dir), num_train_epochs=config.epochs, max_steps=config.max_steps,
                     learning_rate=config.learning_rate, per_device_train_batch_size=config.batch_size,
                     per_device_eval_batch_size=config.batch_size, gradient_accumulation_steps=config.grad_accum,
                     warmup_steps=config.warmup_ratio, lr_scheduler_type=config.scheduler,
                     weight_decay=config.weight_decay, max_grad_norm=config.max_grad_norm, seed=config.seed,
                     data_seed=config.seed, logging_steps=1, save_strategy="no", save_total_limit=1, report_to="none",
                     eval_strategy="epoch" if has_validation else "no", max_length=max_length,
                     bf16=_use_bf16(config), packing=False, dataset_num_proc=None,
                     disable_tqdm=True)  # progress goes through `progress`; stdout stays free for --json


def lora_config(config: SFTRunConfig) -> Any:
    from peft import LoraConfig

    return LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules="all-linear", task_type="CAUSAL_LM")


def _event_callback(run: RunDir, progress: Progress | None) -> Any:
    from transformers import TrainerCallback

    class ToEvents(TrainerCallback):
        """Each Trainer log line becomes an `sft_log` event (the run's durable record of the curves)."""

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
            if logs:
                run.event("sft_log", step=state.global_step, **{k: v for k, v in logs.items()
                                                                if isinstance(v, (int, float, str))})

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if progress is not None:
                progress(state.global_step, state.max_steps)

    return ToEvents()


def build_trainer(data: SFTData, model: Any, tokenizer: Any, config: SFTRunConfig, output_dir: Path,
                  *, callbacks: list[Any] | None = None, max_length: int | None = None,
                  prior_seconds: float = 0.0) -> Any:
    """The configured SFTTrainer (exposed for tests and for the RL trainer's cold start). prior_seconds: the
    training time of a resumed run's earlier legs, carried into the clock of each checkpoint it saves."""
    from transformers import PrinterCallback
    from trl import SFTTrainer

    args = sft_config(config, output_dir, has_validation=data.validation is not None, max_length=max_length)
    callbacks = list(callbacks or [])
    if config.save:
        callbacks.append(save_callback(config.save_every_steps, config.save_every_minutes,
                                       prior_seconds=prior_seconds))
    trainer = SFTTrainer(model=model, args=args, train_dataset=data.train, eval_dataset=data.validation,
                         processing_class=tokenizer, peft_config=lora_config(config) if config.lora else None,
                         callbacks=callbacks)
    trainer.remove_callback(PrinterCallback)  # it prints every log dict to stdout; the events log keeps them
    return trainer


def train_sft(data: SFTData, model: Any, tokenizer: Any, config: SFTRunConfig, run: RunDir, *,
              model_name: str = "", max_length: int | None = None, progress: Progress | None = None,
              resume_from: Path | None = None) -> SFTResult:
    """Train (from the Trainer checkpoint `resume_from`, when given), then write curves, history, report and
    checkpoint into `run`. Raises RuntimeError when the loss is not finite (the checkpoint is not saved then)."""
    run.event("sft_started", model=model_name, config=asdict(config), data=data.stats.to_dict(),
              resumed_from=str(resume_from) if resume_from else None)
    first, prior = resumed_step(resume_from), checkpoint_seconds(resume_from)
    trainer = build_trainer(data, model, tokenizer, config, run.path / TRAINER_DIR,
                            callbacks=[_event_callback(run, progress)], max_length=max_length, prior_seconds=prior)
    t0 = time.monotonic()
    output = trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    elapsed = time.monotonic() - t0
    history = list(trainer.state.log_history)
    run.write_json("history.json", history)
    plot_curves(history, run.path / "curves.png", keys=[k for k in CURVES if last_value(history, k) is not None],
                title=f"SFT {model_name}".strip())
    final_loss = last_value(history, "loss")
    summary = {"model": model_name, "steps": trainer.state.global_step, "epochs": round(trainer.state.epoch or 0, 3),
               "train_loss": output.training_loss, "final_loss": final_loss,
               "eval_loss": last_value(history, "eval_loss"), "seconds": round(prior + elapsed, 2),
               "seconds_this_leg": round(elapsed, 2),  # `seconds` adds the earlier legs of a resumed run
               "seconds_per_step": round(elapsed / max(1, trainer.state.global_step - first), 3),
               "resumed_from_step": first or None,
               "lr": config.learning_rate, "lora": config.lora, **{f"data_{k}": v for k, v in
                                                                   data.stats.to_dict().items() if k != "rejected"},
               "data_rejected": rejected_summary(data.stats)}
    if final_loss is None or not math.isfinite(output.training_loss):
        run.write_report(render_report(summary, None))
        raise RuntimeError(f"SFT run {run.path}: training loss is not finite ({output.training_loss}); "
                           "no checkpoint saved")
    checkpoint = save_final(trainer, tokenizer, run.path / FINAL_DIR) if config.save else None
    summary["checkpoint"] = str(checkpoint) if checkpoint else None
    run.write_json("summary.json", summary)
    shutil.rmtree(run.path / TRAINER_DIR, ignore_errors=True)  # the resume points; the final model is saved
    run.write_report(render_report(summary, checkpoint))
    run.event("sft_finished", **{k: v for k, v in summary.items() if k != "model"})
    return SFTResult(run_dir=run.path, checkpoint=checkpoint, history=history, summary=summary)


def render_report(summary: dict[str, Any], checkpoint: Path | None) -> str:
    parts = [f"# SFT run: {summary.get('model') or 'student'}", "", table(summary), "", "![curves](curves.png)", ""]
    if checkpoint is not None:
        parts += ["## Use the checkpoint", "",
                  ("- evaluate it with the same harness (the agent role on the checkpoint, judges unchanged): "
                   f"`worldsmith --set llm.roles.agent.provider=hf --set llm.roles.agent.model={checkpoint} "
                   "eval --tasks TASKS`"),
                  f"- export to GGUF for the embedded provider: `{GGUF_EXPORT_HINT.replace('CHECKPOINT_DIR', str(checkpoint))}`",
                  ""]
    return "\n".join(parts)
