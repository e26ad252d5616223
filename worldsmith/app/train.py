"""Training services: `worldsmith train sft` (and the RL command, which adds its own service beside this one).

    summary = sft_from_paths(settings, SFTRequest(data=[Path("runs/…-eval-ab12"), Path("tasks/worlds")],
                                                  model="smollm2-135m", max_steps=50))

Order: resolve the tokenizer, build the dataset (so bad data fails before a model is loaded), then load the
student and train. Everything lands in one run directory: config.json, events.jsonl, data_stats.json,
examples.jsonl (every input trajectory and what became of it: train, validation or why it was dropped), curves.png,
history.json, summary.json, report.md and checkpoint/. `sft_data_from_paths` builds the same dataset without
training (`worldsmith train data`). A killed run continues with `resume_sft(settings, RUN)`:
the request comes back from its config.json and training from its newest Trainer checkpoint (checkpoints.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from worldsmith.core.config import Settings
from worldsmith.core.runs import RunDir
from worldsmith.training.data import MANIFEST, write_manifest


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
    save_every_steps: int = 0
    """A resumable checkpoint every N optimizer steps (0: by time only)."""
    save_every_minutes: float = 10.0
    """A resumable checkpoint every M minutes of training (0: by steps only)."""


Request = TypeVar("Request")


def request_config(req: Any) -> dict[str, Any]:
    """A request as config.json keeps it: paths absolute, so `--resume` finds them from any working directory."""
    def plain(v: Any) -> Any:
        if isinstance(v, Path):
            return str(v.resolve())
        return [plain(x) for x in v] if isinstance(v, list) else v

    return {k: plain(v) for k, v in asdict(req).items()}


def request_from_config(cls: type[Request], saved: dict[str, Any]) -> Request:
    """The request a run was started with, back from its config.json (`request_config`)."""
    kinds = {f.name: str(f.type) for f in fields(cls)}  # type: ignore[arg-type]
    values = {}
    for name, value in saved.items():
        if name not in kinds:
            continue  # a field an older version had
        if "list[Path]" in kinds[name]:
            value = [Path(v) for v in value or []]
        elif "Path" in kinds[name] and value is not None:
            value = Path(value)
        values[name] = value
    return cls(**values)


def saved_run(run_path: Path) -> dict[str, Any]:
    """A killed training run's config.json; an actionable error for a folder that is not a run, or for a run that
    finished (nothing to resume)."""
    from worldsmith.core.store import read_jsonl
    from worldsmith.training.checkpoints import refuse_finished

    config, events = run_path / "config.json", run_path / "events.jsonl"
    if not config.is_file() or not events.is_file():
        raise FileNotFoundError(f"{run_path}: not a training run directory (no config.json / events.jsonl); give "
                                "the folder `worldsmith train` printed as its run directory")
    refuse_finished(run_path, read_jsonl(events))
    return json.loads(config.read_text(encoding="utf-8"))


def reopen_run(run_path: Path, saved: dict[str, Any], fingerprint_now: str) -> tuple[RunDir, Path | None]:
    """The run directory reopened and the Trainer checkpoint to continue from (None: from the start), once the data
    rebuilt from its config proves to be the data it started with."""
    from worldsmith.training.checkpoints import TRAINER_DIR, latest_checkpoint

    if saved.get("data_fingerprint") not in (None, fingerprint_now):
        raise ValueError(f"{run_path}: the training data built from its inputs differs from the run's (fingerprint "
                         f"{fingerprint_now}, was {saved['data_fingerprint']}); a resume needs the same data and "
                         "settings. Start a new run instead.")
    run = RunDir.open(run_path)
    return run, latest_checkpoint(run_path / TRAINER_DIR)


def sft_from_paths(settings: Settings, req: SFTRequest, *, progress: Callable[[int, int], None] | None = None
                   ) -> dict[str, Any]:
    """Build the dataset from `req.data`, fine-tune `req.model`, write the run directory; return its summary."""
    run_config, data_config, data = _sft_data(settings, req)
    config = {"request": request_config(req), "sft": asdict(run_config), "data": asdict(data_config),
              "data_fingerprint": _data_fingerprint(data), "settings": settings.masked()}
    run = RunDir.create_at("train-sft", settings.runs_dir, req.out, config)
    run.write_json("data_stats.json", data.stats.to_dict())
    write_manifest(run.path / MANIFEST, data.manifest)
    return _train_sft(settings, req, run_config, data, run, None, progress)


def resume_sft(settings: Settings, run_path: Path, *, progress: Callable[[int, int], None] | None = None
               ) -> dict[str, Any]:
    """Continue a killed `train sft` run in its own directory, from its newest complete Trainer checkpoint (from the
    start when it saved none); refused when it finished or when its data no longer builds the same."""
    saved = saved_run(run_path)
    req = request_from_config(SFTRequest, saved["request"])
    run_config, _, data = _sft_data(settings, req)
    run, checkpoint = reopen_run(run_path, saved, _data_fingerprint(data))
    return _train_sft(settings, req, run_config, data, run, checkpoint, progress)


def sft_data_from_paths(settings: Settings, req: SFTRequest) -> tuple[Any, Any]:
    """The dataset `sft_from_paths(settings, req)` would train on (its `manifest` says what became of each input
    trajectory) and the student's tokenizer, with no model loaded and nothing written."""
    _, data, tokenizer = _sft_dataset(settings, req)
    return data, tokenizer


def _sft_data(settings: Settings, req: SFTRequest) -> tuple[Any, Any, Any]:
    from worldsmith.training.sft import SFTRunConfig

    run_config = SFTRunConfig(epochs=req.epochs, max_steps=req.max_steps, lr=req.lr, lora=req.lora,
                              batch_size=req.batch_size, grad_accum=req.grad_accum, seed=req.seed,
                              save_every_steps=req.save_every_steps, save_every_minutes=req.save_every_minutes)
    data_config, data, _ = _sft_dataset(settings, req)
    return run_config, data_config, data


def _sft_dataset(settings: Settings, req: SFTRequest) -> tuple[Any, Any, Any]:
    from worldsmith.agents.analyst import system_prompt
    from worldsmith.training.data import (
        DataConfig,
        build_sft_dataset,
        collection_meta,
        load_trajectories,
    )
    from worldsmith.training.models import load_tokenizer

    if not req.data:
        raise ValueError("train sft: give at least one --data path (an eval run, a task collection or a folder)")
    turn_limit = settings.analyst.max_tokens_per_turn if req.max_turn_tokens is None else req.max_turn_tokens
    data_config = DataConfig(max_tokens=req.max_tokens, overflow=req.overflow,  # type: ignore[arg-type]
                             validation_fraction=req.validation_fraction, seed=req.seed,
                             max_turn_tokens=turn_limit or None)
    tokenizer = load_tokenizer(req.model, models_dir=settings.llm.resolved_models_dir(settings.home))
    trajectories, meta = load_trajectories(req.data, system_prompt=system_prompt() if req.oracle_system_prompt else None)
    for coll in req.tasks:
        meta.update(collection_meta(coll))
    return data_config, build_sft_dataset(trajectories, tokenizer, tasks=meta, config=data_config), tokenizer


def _data_fingerprint(data: Any) -> str:
    from worldsmith.training.checkpoints import fingerprint

    splits = [data.train] + ([data.validation] if data.validation is not None else [])
    return fingerprint(pair for split in splits  # whole columns: a row at a time is slow on a datasets.Dataset
                       for pair in zip(split["input_ids"], split["completion_mask"], strict=True))


def _train_sft(settings: Settings, req: SFTRequest, run_config: Any, data: Any, run: RunDir, resume_from: Path | None,
               progress: Callable[[int, int], None] | None) -> dict[str, Any]:
    from worldsmith.training.models import load_student
    from worldsmith.training.sft import train_sft

    try:
        model, tokenizer = load_student(req.model, models_dir=settings.llm.resolved_models_dir(settings.home),
                                        seed=req.seed)
        result = train_sft(data, model, tokenizer, run_config, run, model_name=req.model,
                           max_length=req.max_tokens, progress=progress, resume_from=resume_from)
    except BaseException as exc:
        run.finish(status="failed", error=f"{type(exc).__name__}: {exc}")
        raise
    run.finish(status="ok", steps=result.summary["steps"], final_loss=result.summary["final_loss"])
    return {"status": "ok", "run_dir": str(run.path), "report": str(run.path / "report.md"),
            "checkpoint": str(result.checkpoint) if result.checkpoint else None, **result.summary}
