"""Resumable training runs: periodic Trainer checkpoints inside the run directory, and the newest complete one.

    callback = SaveEvery(steps=0, minutes=10)            # a Trainer checkpoint every 10 min of training
    trainer.train(resume_from_checkpoint=latest_checkpoint(run.path / TRAINER_DIR))

A run's Trainer output folder (`<run>/trainer`) gets `checkpoint-<step>/` every `steps` optimizer steps or
`minutes` of training, whichever comes first: the weights (LoRA: the adapters), optimizer, scheduler and RNG states,
and `trainer_state.json` (step, log history) written last. transformers keeps only the newest (`save_total_limit`
1, the older one deleted after the new one is complete). A folder without a readable `trainer_state.json` is a save
cut short by a kill, never resumed from. Each checkpoint also records the training seconds spent so far
(CLOCK_FILE), so a resumed run's `seconds` count every leg and `seconds_this_leg` the last one. When the run ends,
its final model goes to `<run>/checkpoint/` (atomic, LoRA merged) and the Trainer folder is removed.

`worldsmith train sft|rl --resume RUN` rebuilds the same data from the run's config.json (a fingerprint of the
tokenized data refuses a resume when the inputs changed) and continues from the newest complete checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from worldsmith.core.store import atomic_write_text

#: the Trainer's output folder inside a run directory (its periodic checkpoints)
TRAINER_DIR = "trainer"
#: the final model inside a run directory
FINAL_DIR = "checkpoint"
_CHECKPOINT = re.compile(r"checkpoint-(\d+)")
#: beside a checkpoint's files: the training seconds the run had spent when it was saved, over all its legs
CLOCK_FILE = "worldsmith_clock.json"


def save_callback(steps: int, minutes: float, *, prior_seconds: float = 0.0) -> Any:
    """A TrainerCallback asking for a checkpoint every `steps` optimizer steps or `minutes` of training (0: off),
    never at the last step (the final model is saved then anyway). Each checkpoint it sees saved gets CLOCK_FILE:
    `prior_seconds` (the earlier legs of a resumed run, `checkpoint_seconds`) plus this leg's training time."""
    from transformers import TrainerCallback

    if steps < 0 or minutes < 0:
        raise ValueError(f"checkpoint cadence must be ≥ 0 (got every {steps} steps, {minutes} minutes)")

    class SaveEvery(TrainerCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.last = self.began = time.monotonic()

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.last = self.began = time.monotonic()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if state.global_step >= state.max_steps:
                return
            due_steps = steps > 0 and state.global_step % steps == 0
            due_time = minutes > 0 and time.monotonic() - self.last >= minutes * 60
            if due_steps or due_time:
                control.should_save = True

        def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.last = time.monotonic()
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if folder.is_dir():
                clock = {"step": state.global_step, "train_seconds": round(prior_seconds + self.last - self.began, 2)}
                atomic_write_text(folder / CLOCK_FILE, json.dumps(clock))

    return SaveEvery()


def checkpoint_seconds(checkpoint: Path | None) -> float:
    """The training seconds a run had spent when `checkpoint` was saved, over all its legs; 0.0 without a
    checkpoint, or for one saved without a clock (a kill between the save and the clock: its legs are not counted)."""
    if checkpoint is None:
        return 0.0
    try:
        return float(json.loads((checkpoint / CLOCK_FILE).read_text(encoding="utf-8"))["train_seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def checkpoint_step(path: Path) -> int | None:
    """The optimizer step a complete checkpoint folder was saved at; None when it is incomplete or not one."""
    if not (m := _CHECKPOINT.fullmatch(path.name)) or not path.is_dir():
        return None
    try:
        state = json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return int(state.get("global_step", m.group(1)))


def resumed_step(checkpoint: Path | None) -> int:
    """The step a run resumes after (0: a run from the start); read before training rotates that folder away."""
    return (checkpoint_step(checkpoint) or 0) if checkpoint is not None else 0


def latest_checkpoint(output_dir: Path, *, remove_incomplete: bool = True) -> Path | None:
    """The newest complete `checkpoint-<step>` in `output_dir` (None: none yet). Incomplete ones (a kill mid-save)
    are removed, so the Trainer's rotation never counts them."""
    if not output_dir.is_dir():
        return None
    complete: list[tuple[int, Path]] = []
    for path in output_dir.iterdir():
        if not _CHECKPOINT.fullmatch(path.name):
            continue
        step = checkpoint_step(path)
        if step is not None:
            complete.append((step, path))
        elif remove_incomplete:
            shutil.rmtree(path, ignore_errors=True)
    return max(complete)[1] if complete else None


def save_final(trainer: Any, tokenizer: Any, path: Path) -> Path:
    """The trained model + tokenizer as a plain Hugging Face folder (LoRA merged), written beside `path` and renamed
    into place, so a kill never leaves half a checkpoint where a finished one is expected."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(model, "merge_and_unload"):  # a peft model: bake the adapters in
        model = model.merge_and_unload()
    tmp = path.with_name(f".{path.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    shutil.rmtree(path, ignore_errors=True)
    tmp.replace(path)
    return path


def fingerprint(rows: Iterable[Any]) -> str:
    """A short hash of the training rows (token ids, masks, prompts), to tell a resume that its data changed."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(row, sort_keys=True, default=str).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()[:16]


def refuse_finished(run_path: Path, events: list[dict[str, Any]]) -> None:
    """Raise when the run ended well: its last `run_finished` event says so, or (killed in its last moments) its
    summary.json and final model are written. There is nothing to resume then."""
    ends = [e for e in events if e.get("event") == "run_finished"]
    if (ends and ends[-1].get("status") == "ok") or ((run_path / "summary.json").is_file()
                                                     and (run_path / FINAL_DIR).is_dir()):
        raise ValueError(f"{run_path}: this run finished (its model is in {run_path / FINAL_DIR}); nothing to "
                         "resume. Start a new run, e.g. from that checkpoint with --model.")
