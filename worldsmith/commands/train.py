"""`worldsmith train <verb>`: fine-tune a student on what the project produced (services in worldsmith.app.train).

The group is open for extension: a module listed in EXTENSIONS (e.g. `worldsmith.commands.train_rl`) that exists
gets `register_train(train_app)` called, and adds its verbs to the same group.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from worldsmith.commands.common import (
    EXIT_USAGE,
    STATE,
    console,
    emit_json,
    fail,
    friendly_errors,
)

#: Modules that add verbs to `worldsmith train` (skipped while they do not exist).
EXTENSIONS = ("worldsmith.commands.train_rl",)


def build_train_app() -> typer.Typer:
    train_app = typer.Typer(help="Train students (SFT, SFT+RL) on the project's trajectories and tasks.",
                            no_args_is_help=True)
    train_app.command("data")(data_cmd)
    train_app.command("sft")(sft_cmd)
    train_app.command("export")(export_cmd)
    for name in EXTENSIONS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register_train(train_app)
    return train_app


def step_reporter(label: str, show: bool) -> tuple[Progress, Callable[[int, int], None]]:
    """A rich bar on a terminal; in a log file or pipe a line every ~5% of the steps; nothing when not `show`."""
    progress = Progress(TextColumn(f"[bold]{label}[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console, disable=not show or not console.is_terminal)
    bar = progress.add_task(label, total=None)

    def on_step(step: int, total: int) -> None:
        if show and not console.is_terminal and (step == total or step % max(1, total // 20) == 0):
            console.print(f"{label} step {step}/{total}", highlight=False)
        progress.update(bar, completed=step, total=total)

    return progress, on_step


def check_resume(ctx: typer.Context, resume: Path | None, *, needed: str) -> None:
    """`--resume RUN` takes every training option from the run's config.json: refuse others given beside it, and
    without it require `needed` (the command's one required input)."""
    given = [p for p in ctx.command.params if p.name not in ("resume", "json_out")  # (typer vendors click: by name)
             and getattr(ctx.get_parameter_source(p.name), "name", None) == "COMMANDLINE"]
    if resume is not None:
        if not resume.is_dir():
            fail(f"--resume {resume}: no such run directory", code=EXIT_USAGE)
        if given:
            fail(f"--resume continues the run with the options it was started with (its config.json); drop "
                 f"{', '.join(p.opts[0] for p in given)}", code=EXIT_USAGE)
    elif not ctx.params.get(needed.lstrip("-").replace("-", "_")):
        fail(f"give {needed} (or --resume RUN to continue a killed run)", code=EXIT_USAGE)


def check_data_options(data: list[Path], overflow: str) -> None:
    """The SFT data options `train data` and `train sft` share: every --data path exists, --overflow is known."""
    for p in data:
        if not p.exists():
            fail(f"--data {p}: no such folder", code=EXIT_USAGE)
    if overflow not in ("drop", "truncate"):
        fail(f"--overflow must be drop or truncate, got {overflow!r}", code=EXIT_USAGE)


def register(app: typer.Typer) -> None:
    app.add_typer(build_train_app(), name="train")


def data_cmd(data: Annotated[list[Path] | None, typer.Option("--data", help="Eval run dir, task collection (its oracle trajectories) or folder of trajectory JSON (repeatable).")] = None,
             model: Annotated[str, typer.Option(help="Student whose tokenizer and chat template render the examples (as in train sft).")] = "smollm2-135m",
             tasks: Annotated[list[Path] | None, typer.Option("--tasks", help="Task collection giving groups and splits (repeatable).")] = None,
             max_tokens: Annotated[int, typer.Option(help="Longest example in tokens.")] = 4096,
             overflow: Annotated[str, typer.Option(help="Too-long examples: drop | truncate.")] = "drop",
             max_turn_tokens: Annotated[int | None, typer.Option(help="Assistant turns longer than this (tokens) never train (default: analyst.max_tokens_per_turn; 0: no limit).")] = None,
             validation: Annotated[float, typer.Option(help="Share of worlds/workspaces held out for validation.")] = 0.1,
             seed: Annotated[int, typer.Option(help="Seed for the split.")] = 0,
             out: Annotated[Path | None, typer.Option(help="Write the manifest here (JSON lines: every input trajectory, its split or why it was dropped).")] = None,
             show: Annotated[str | None, typer.Option(help="Print the tokens that train in one example (a trajectory id, or a task id: its first example).")] = None,
             context: Annotated[bool, typer.Option("--context", help="With --show: print the whole example as the student reads it, the context between the trained spans too.")] = False,
             json_out: Annotated[bool, typer.Option("--json", help="Machine-readable: stats and manifest.")] = False) -> None:
    """Build the dataset train sft would train on, without training: what trains, what was dropped and why."""
    from collections import Counter
    from functools import partial

    from worldsmith.app.train import SFTRequest, sft_data_from_paths
    from worldsmith.core.store import ArtifactError
    from worldsmith.training.data import rejected_summary, segments, write_manifest

    if not data:
        fail("give --data (an eval run, a task collection or a folder of trajectories)", code=EXIT_USAGE)
    if context and show is None:
        fail("--context prints the example --show names: give --show ID too", code=EXIT_USAGE)
    check_data_options(data, overflow)
    req = SFTRequest(data=list(data), model=model, tasks=list(tasks or []), max_tokens=max_tokens, overflow=overflow,
                     max_turn_tokens=max_turn_tokens, validation_fraction=validation, seed=seed)
    with friendly_errors(ValueError, FileNotFoundError, ArtifactError, ImportError, OSError):
        built, tokenizer = sft_data_from_paths(STATE.settings(), req)
        if out is not None:
            write_manifest(out, built.manifest)
    example = None
    if show is not None:
        rows = [r for split in (built.train, built.validation) if split is not None for r in split]
        example = next((r for r in rows if r["trajectory_id"] == show), None) or next(
            (r for r in rows if r["task_id"] == show), None)
        if example is None:
            dropped = next((e["outcome"] for e in built.manifest if show in (e["trajectory_id"], e["task_id"])), None)
            fail(f"--show {show}: " + (f"dropped ({dropped})" if dropped else "no input trajectory has this id"),
                 code=EXIT_USAGE)
    parts = segments(example, tokenizer) if example is not None else []
    spans = [text for trained, text in parts if trained]
    if json_out:
        payload: dict = {"stats": built.stats.to_dict(), "manifest": built.manifest}
        if example is not None:
            payload["shown"] = {"trajectory_id": example["trajectory_id"], "trained": spans}
            if context:
                payload["shown"]["segments"] = [{"trained": t, "text": text} for t, text in parts]
        emit_json(payload)
        return
    st = built.stats
    say = partial(console.print, highlight=False, soft_wrap=True)  # whole lines in a log or pipe
    say(f"{model}: {st.train} train examples ({st.train_groups} groups), {st.validation} validation "
        f"({st.validation_groups} groups) from {st.loaded} trajectories; {st.train_tokens:,} train tokens, "
        f"{st.trained_tokens:,} of them trained")
    kept = Counter((e["outcome"], e["label"]) for e in built.manifest if e["outcome"] in ("train", "validation"))
    say("kept by label: " + ", ".join(f"{n} {label} ({split})" for (split, label), n in sorted(kept.items())))
    say(f"dropped: {rejected_summary(st)}")
    if st.truncated or st.long_turns_masked:
        say(f"{st.truncated} truncated to {max_tokens} tokens; {st.long_turns_masked} turns over the turn "
            "limit kept as context without loss")
    if out is not None:
        say(f"manifest: {out}")
    if example is not None:
        say(f"\n{example['trajectory_id']} ({example['task_id']}): {example['n_tokens']} tokens, "
            f"{example['n_trained']} trained in {len(spans)} spans")
        i = 0
        for trained, text in parts if context else [(True, span) for span in spans]:
            i += trained
            console.rule(f"trained span {i}" if trained else "context (no loss)",
                         style="bold green" if trained else "dim")
            console.out(text, highlight=False)


def sft_cmd(ctx: typer.Context,
            data: Annotated[list[Path] | None, typer.Option("--data", help="Eval run dir, task collection (its oracle trajectories) or folder of trajectory JSON (repeatable).")] = None,
            model: Annotated[str, typer.Option(help="Student: 'tiny', an embedded model name (smollm2-135m, qwen2.5-coder-0.5b) or a Hugging Face checkpoint path.")] = "smollm2-135m",
            out: Annotated[Path | None, typer.Option(help="Run directory to create (default: runs/<stamp>-train-sft-…).")] = None,
            tasks: Annotated[list[Path] | None, typer.Option("--tasks", help="Task collection giving groups and splits (repeatable).")] = None,
            epochs: Annotated[float, typer.Option(help="Cold-start epochs over the train split.")] = 1.0,
            lr: Annotated[float | None, typer.Option(help="Peak learning rate (default 2e-5 full, 2e-4 LoRA).")] = None,
            lora: Annotated[bool, typer.Option("--lora/--full", help="LoRA adapters (merged on save) or full fine-tuning.")] = False,
            max_steps: Annotated[int, typer.Option(help="Stop after N optimizer steps (-1: run the epochs).")] = -1,
            batch_size: Annotated[int, typer.Option(help="Examples per micro-batch.")] = 1,
            grad_accum: Annotated[int, typer.Option(help="Micro-batches per optimizer step.")] = 1,
            max_tokens: Annotated[int, typer.Option(help="Longest example in tokens.")] = 4096,
            overflow: Annotated[str, typer.Option(help="Too-long examples: drop | truncate.")] = "drop",
            max_turn_tokens: Annotated[int | None, typer.Option(help="Assistant turns longer than this (tokens) stay as context but never train; a trajectory left with no trainable turn is dropped (default: the analyst's per-turn budget, analyst.max_tokens_per_turn; 0: no limit).")] = None,
            validation: Annotated[float, typer.Option(help="Share of worlds/workspaces held out for validation.")] = 0.1,
            seed: Annotated[int, typer.Option(help="Seed for the split, the tiny model and training.")] = 0,
            save_every_steps: Annotated[int, typer.Option(help="A resumable checkpoint every N optimizer steps (0: by time only).")] = 0,
            save_every_minutes: Annotated[float, typer.Option(help="A resumable checkpoint every M minutes of training (0: by steps only).")] = 10.0,
            resume: Annotated[Path | None, typer.Option(help="Continue a killed run in its run directory, from its newest checkpoint (its options come from the run's config.json).")] = None,
            json_out: Annotated[bool, typer.Option("--json", help="Machine-readable summary.")] = False) -> None:
    """Supervised fine-tuning: only the model's own valid turns train; writes curves, report and checkpoint."""
    from worldsmith.app.train import SFTRequest, resume_sft, sft_from_paths
    from worldsmith.core.store import ArtifactError
    from worldsmith.llm import LLMError

    check_resume(ctx, resume, needed="--data")
    check_data_options(data or [], overflow)
    progress, on_step = step_reporter("sft", show=not json_out)
    with friendly_errors(ValueError, FileNotFoundError, FileExistsError, ArtifactError, ImportError, RuntimeError,
                         LLMError), progress:
        if resume is not None:
            summary = resume_sft(STATE.settings(), resume, progress=on_step)
        else:
            req = SFTRequest(data=list(data or []), model=model, out=out, tasks=list(tasks or []), epochs=epochs,
                             lr=lr, lora=lora, max_steps=max_steps, batch_size=batch_size, grad_accum=grad_accum,
                             max_tokens=max_tokens, overflow=overflow, max_turn_tokens=max_turn_tokens,
                             validation_fraction=validation, seed=seed, save_every_steps=save_every_steps,
                             save_every_minutes=save_every_minutes)
            summary = sft_from_paths(STATE.settings(), req, progress=on_step)
    if json_out:
        emit_json(summary)
        return
    resumed = f" (resumed from step {summary['resumed_from_step']})" if summary.get("resumed_from_step") else ""
    console.print(f"SFT {summary['model']}: {summary['steps']} steps{resumed}, loss {summary['final_loss']:.4f}, "
                  f"{summary['data_train']} train / {summary['data_validation']} validation examples "
                  f"(dropped: {summary['data_rejected']})", highlight=False)
    console.print(f"report: {summary['report']}\ncheckpoint: {summary['checkpoint']}", highlight=False)


def export_cmd(checkpoint: Annotated[Path, typer.Argument(help="A trained checkpoint folder (train sft / train rl), LoRA adapters merged if given.")],
               out: Annotated[Path, typer.Option(help="GGUF file to write.")] = Path("student.gguf"),
               base: Annotated[str | None, typer.Option(help="The GGUF the student was loaded from: embedded model name or file (default: found from the checkpoint's run).")] = None,
               out_type: Annotated[str, typer.Option(help="Tensor type: f16 | f32 | q8_0 (llama.cpp's quantizer: half of f16's bytes, faster on CPU); norms and biases stay f32.")] = "f16",
               json_out: Annotated[bool, typer.Option("--json", help="Machine-readable summary.")] = False) -> None:
    """Write a checkpoint back into its base GGUF (metadata kept, weights replaced) for the embedded provider."""
    from worldsmith.training.export import OUT_TYPES, export_checkpoint

    if not checkpoint.is_dir():
        fail(f"{checkpoint}: no such checkpoint folder", code=EXIT_USAGE)
    if out_type not in OUT_TYPES:
        fail(f"--out-type must be one of {', '.join(OUT_TYPES)}, got {out_type!r}", code=EXIT_USAGE)
    settings = STATE.settings()
    with friendly_errors(ValueError, FileNotFoundError, NotImplementedError, ImportError):
        path = export_checkpoint(checkpoint, out=out, base=base, out_type=out_type,  # type: ignore[arg-type]
                                 models_dir=settings.llm.resolved_models_dir(settings.home))
    from worldsmith.llm.models import sha256_file

    info = {"status": "ok", "gguf": str(path), "bytes": path.stat().st_size, "sha256": sha256_file(path)}
    if json_out:
        emit_json(info)
        return
    console.print(f"wrote {path} ({info['bytes'] / 1e6:.0f} MB, sha256 {info['sha256']}); serve it with the "
                  f"embedded provider: worldsmith --set llm.roles.agent.model={path} eval --tasks TASKS",
                  highlight=False, soft_wrap=True)  # not broken into lines: the command is copied as it is
