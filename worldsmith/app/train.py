"""Training services: `worldsmith train sft` (and the RL command, which adds its own service beside this one).

    summary = sft_from_paths(settings, SFTRequest(data=[Path("runs/…-eval-ab12"), Path("tasks/worlds")],
                                                  model="smollm2-135m", max_steps=50))

Order: resolve the tokenizer, build the dataset (so bad data fails before a model is loaded), then load the
student and train. Everything lands in one run directory: config.json, events.jsonl, data_stats.json, curves.png,
history.json, summary.json, report.md and checkpoint/.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from worldsmith.core.config import Settings
from worldsmith.core.runs import RunDir


@dataclass(frozen=True)
class SFTRequest:
    """What `worldsmith train sft` asks for (the CLI flags)."""

    data: list[Path]
    """Eval run directories, task collections (their oracle trajectories) or folders of trajectory JSON."""
    model: str = "smollm2-135m"
    """'tiny', an embedded model name (its GGUF) or a Hugging Face checkpoint path / id."""
    out: Path | None = None
    """The run directory to create; default <runs_dir>/<stamp>-train-sft-<hex>."""
    tasks: list[Path] = field(default_factory=list)
    """Extra task collections whose index gives groups and splits (when the data's own runs do not)."""
    epochs: float = 1.0
    max_steps: int = -1
    lr: float | None = None
    lora: bool = False
    batch_size: int = 1
    grad_accum: int = 1
    max_tokens: int = 4096
    overflow: str = "drop"
    max_turn_tokens: int | None = None
    """Drop trajectories with an assistant turn longer than this (tokens); None: the analyst's per-turn budget
    (settings analyst.max_tokens_per_turn), 0: no limit."""
    validation_fraction: float = 0.1
    seed: int = 0
    oracle_system_prompt: bool = True
    """Give engine oracles (written without a system prompt) the analyst's, so they train as the agent is prompted."""


def sft_from_paths(settings: Settings, req: SFTRequest, *, progress: Callable[[int, int], None] | None = None
                   ) -> dict[str, Any]:
    """Build the dataset from `req.data`, fine-tune `req.model`, write the run directory; return its summary."""
    from worldsmith.agents.analyst import system_prompt
    from worldsmith.training.data import (
        DataConfig,
        build_sft_dataset,
        collection_meta,
        load_trajectories,
    )
    from worldsmith.training.models import load_student, load_tokenizer
    from worldsmith.training.sft import SFTRunConfig, train_sft

    if not req.data:
        raise ValueError("train sft: give at least one --data path (an eval run, a task collection or a folder)")
    run_config = SFTRunConfig(epochs=req.epochs, max_steps=req.max_steps, lr=req.lr, lora=req.lora,
                              batch_size=req.batch_size, grad_accum=req.grad_accum, seed=req.seed)
    turn_limit = settings.analyst.max_tokens_per_turn if req.max_turn_tokens is None else req.max_turn_tokens
    data_config = DataConfig(max_tokens=req.max_tokens, overflow=req.overflow,  # type: ignore[arg-type]
                             validation_fraction=req.validation_fraction, seed=req.seed,
                             max_turn_tokens=turn_limit or None)
    models_dir = settings.llm.resolved_models_dir(settings.home)
    tokenizer = load_tokenizer(req.model, models_dir=models_dir)
    trajectories, meta = load_trajectories(req.data, system_prompt=system_prompt() if req.oracle_system_prompt else None)
    for coll in req.tasks:
        meta.update(collection_meta(coll))
    data = build_sft_dataset(trajectories, tokenizer, tasks=meta, config=data_config)
    config = {"request": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(req).items()},
              "sft": asdict(run_config), "data": asdict(data_config), "settings": settings.masked()}
    run = RunDir.create_at("train-sft", settings.runs_dir, req.out, config)
    run.write_json("data_stats.json", data.stats.to_dict())
    try:
        model, tokenizer = load_student(req.model, models_dir=models_dir, seed=req.seed)
        result = train_sft(data, model, tokenizer, run_config, run, model_name=req.model,
                           max_length=req.max_tokens, progress=progress)
    except BaseException as exc:
        run.finish(status="failed", error=f"{type(exc).__name__}: {exc}")
        raise
    run.finish(status="ok", steps=result.summary["steps"], final_loss=result.summary["final_loss"])
    return {"status": "ok", "run_dir": str(run.path), "report": str(run.path / "report.md"),
            "checkpoint": str(result.checkpoint) if result.checkpoint else None, **result.summary}
