"""`worldsmith train rl`: SFT+RL on a task collection's closed-form train tasks (service; the CLI is a thin layer).

    summary = rl_from_paths(settings, RLRequest(tasks=[Path("tasks/worlds")], data=[Path("tasks/worlds")],
                                                model="runs/…-train-sft-…/checkpoint", max_steps=20))

Order: tokenizer → expert examples (`--data`: the SFT dataset builder over trajectories; one per task feeds the SFT
term) → RL rows (`--tasks`) → model → training. The run directory holds config.json, events.jsonl, data_stats.json,
history.json, curves.png, summary.json, report.md, rollouts.jsonl and checkpoint/. A killed run continues with
`resume_rl(settings, RUN)`, from its newest Trainer checkpoint (checkpoints.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from worldsmith.core.config import Settings
from worldsmith.core.runs import RunDir

REWARDS = ("datamind", "closed-form")


@dataclass(frozen=True)
class RLRequest:
    tasks: list[Path]
    """Task collections whose closed-form train tasks are rolled out."""
    data: list[Path] = field(default_factory=list)
    """Expert trajectories for the SFT term: eval runs, task collections (oracles) or folders (as `train sft`)."""
    model: str = "tiny"
    """'tiny', an embedded model name, or a checkpoint path (e.g. the one `train sft` saved)."""
    out: Path | None = None
    max_steps: int = 20
    prompts_per_step: int = 2
    num_generations: int = 4
    grad_accum: int = 1
    lr: float = 1e-6
    gamma: str = "cosine"
    lora: bool = False
    gspo: bool = False
    max_turns: int = 10
    max_completion_tokens: int = 2048
    max_new_tokens: int = 512
    temperature: float = 1.0
    reward: str = "datamind"
    pool_size: int = 0
    max_tasks: int | None = None
    expert_max_tokens: int = 4096
    """Longest expert example for the SFT term (tokens); longer ones are dropped, as `train sft --max-tokens`."""
    expert_max_turn_tokens: int | None = None
    """Experts with a longer assistant turn are dropped (tokens); None: max_new_tokens, 0: no limit."""
    seed: int = 0
    save_every_steps: int = 0
    """A resumable checkpoint every N optimizer steps (0: by time only)."""
    save_every_minutes: float = 10.0
    """A resumable checkpoint every M minutes of training (0: by steps only)."""


def reward_functions(name: str) -> tuple[list[Any], list[float]]:
    """The reward functions and their weights. DataMind's reward comes with its components at weight 0, so TRL logs
    `rewards/closed_form_reward/*` (correctness) and `rewards/well_formed_reward/*` every step without training on
    them."""
    from worldsmith.training import rewards

    if name == "closed-form":
        return [rewards.closed_form_reward], [1.0]
    if name == "datamind":
        return [rewards.datamind_reward, rewards.closed_form_reward, well_formed_reward], [1.0, 0.0, 0.0]
    raise ValueError(f"--reward must be one of {', '.join(REWARDS)}, got {name!r}")


def well_formed_reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float]:
    """1.0 when every assistant turn parses and the last answers every requested name (rewards.well_formed)."""
    from worldsmith.training.rewards import well_formed

    answers = kwargs.get("answers") or [[] for _ in completions]
    return [float(well_formed(c, [str(a["name"]) for a in (spec or [])])) for c, spec in zip(completions, answers)]


def rl_from_paths(settings: Settings, req: RLRequest, *, progress: Callable[[int, int], None] | None = None
                  ) -> dict[str, Any]:
    """Build the RL rows (and experts), train `req.model` with SFT+RL, write the run directory; return its summary."""
    from worldsmith.app.train import request_config
    from worldsmith.training.checkpoints import fingerprint

    data = _rl_data(settings, req)
    run = RunDir.create_at("train-rl", settings.runs_dir, req.out,
                           {"request": request_config(req), "rl": asdict(data.cfg),
                            "data_fingerprint": fingerprint(data.rows), "settings": settings.masked()})
    run.write_json("data_stats.json", asdict(data.stats))
    return _train_rl(settings, req, data, run, None, progress)


def resume_rl(settings: Settings, run_path: Path, *, progress: Callable[[int, int], None] | None = None
              ) -> dict[str, Any]:
    """Continue a killed `train rl` run in its own directory, from its newest complete Trainer checkpoint (from the
    start when it saved none); refused when it finished or when its tasks no longer build the same rows."""
    from worldsmith.app.train import reopen_run, request_from_config, saved_run
    from worldsmith.training.checkpoints import fingerprint

    saved = saved_run(run_path)
    req = request_from_config(RLRequest, saved["request"])
    data = _rl_data(settings, req)
    run, checkpoint = reopen_run(run_path, saved, fingerprint(data.rows))
    return _train_rl(settings, req, data, run, checkpoint, progress)


@dataclass
class _RLData:
    cfg: Any  # RLRunConfig
    rewards: list[Any]
    rows: list[dict[str, Any]]
    dataset: Any
    stats: Any  # RLDataStats


def _rl_data(settings: Settings, req: RLRequest) -> _RLData:
    from worldsmith.core.taskpkg import TaskCollection, read_task_package
    from worldsmith.training.models import load_tokenizer
    from worldsmith.training.rl_data import rl_dataset, rl_rows
    from worldsmith.training.rl_run import RLRunConfig

    if not req.tasks:
        raise ValueError("train rl: give at least one --tasks collection")
    rewards, weights = reward_functions(req.reward)
    cfg = RLRunConfig(max_steps=req.max_steps, prompts_per_step=req.prompts_per_step,
                      num_generations=req.num_generations, grad_accum=req.grad_accum, lr=req.lr,
                      gamma_schedule=req.gamma, lora=req.lora, gspo=req.gspo, max_turns=req.max_turns,
                      max_completion_tokens=req.max_completion_tokens, max_new_tokens=req.max_new_tokens,
                      temperature=req.temperature, pool_size=req.pool_size, reward_weights=weights, seed=req.seed,
                      save_every_steps=req.save_every_steps, save_every_minutes=req.save_every_minutes)
    tokenizer = load_tokenizer(req.model, models_dir=settings.llm.resolved_models_dir(settings.home))
    turn_limit = req.max_new_tokens if req.expert_max_turn_tokens is None else req.expert_max_turn_tokens
    experts = _experts(req.data, tokenizer, req.expert_max_tokens, turn_limit or None) if req.data else {}
    # the index's split is authoritative (a package may predate assign_splits); test/dev never train
    tasks = [read_task_package(Path(coll) / e.path) for coll in req.tasks for e in TaskCollection(coll).entries()
             if e.split not in ("test", "dev")][:req.max_tasks]
    rows, stats = rl_rows(tasks, experts)
    return _RLData(cfg, rewards, rows, rl_dataset(rows), stats)


def _train_rl(settings: Settings, req: RLRequest, data: _RLData, run: RunDir, resume_from: Path | None,
              progress: Callable[[int, int], None] | None) -> dict[str, Any]:
    from worldsmith.training.models import load_student
    from worldsmith.training.rl_run import train_rl

    try:
        model, tokenizer = load_student(req.model, models_dir=settings.llm.resolved_models_dir(settings.home),
                                        seed=req.seed)
        summary = train_rl(data.dataset, model, tokenizer, data.cfg, run, data.rewards, sandbox=settings.sandbox,
                           progress=progress, resume_from=resume_from)
    except BaseException as exc:
        run.finish(status="failed", error=f"{type(exc).__name__}: {exc}")
        raise
    run.finish(status="ok", steps=summary["steps"], final_reward=summary["final_reward"])
    return {"status": "ok", "run_dir": str(run.path), "report": str(run.path / "report.md"), "model": req.model,
            "tasks": data.stats.rows, "with_expert": data.stats.with_expert, **summary}


def _experts(paths: list[Path], tokenizer: Any, max_tokens: int, max_turn_tokens: int | None
             ) -> dict[str, tuple[list[int], list[int]]]:
    """Expert examples for the SFT term by task: no longer than `max_tokens`; a turn longer than a rollout's turn
    may be (`max_turn_tokens`) carries no loss: the SFT term must not teach what generation would cut off."""
    from worldsmith.agents.analyst import system_prompt
    from worldsmith.training.data import DataConfig, build_sft_dataset, load_trajectories
    from worldsmith.training.rl_data import expert_index

    trajectories, meta = load_trajectories(paths, system_prompt=system_prompt())
    data = build_sft_dataset(trajectories, tokenizer, tasks=meta, config=DataConfig(validation_fraction=0.0, max_tokens=max_tokens,
                                                                             max_turn_tokens=max_turn_tokens))
    return expert_index(data.train)
