"""SFT datasets: accepted trajectories → token ids with per-token loss masks, as Hugging Face `datasets`.

    trajs, tasks = load_trajectories(["runs/20261130-eval-ab12", "tasks/worlds"])
    data = build_sft_dataset(trajs, tokenizer, tasks=tasks, config=DataConfig(max_tokens=4096))
    data.train  # columns: input_ids, completion_mask, labels, trajectory_id, task_id, group, label, n_tokens, n_trained,
                #          has_void (the trajectory had a void turn: masked here; the RL trainer drops it entirely)

Which trajectories train (`accept`): a sampled one whose primary grade passed on the model's own answer (not a
post-processed one), and engine-written oracle / reference solutions; chat threads, failed or ungraded samples never do. Tasks of a collection's test/dev split and benchmark
tasks (DABench is evaluation only) are refused whatever their label.

The masks are `to_sft_example`'s (chat-template prefix diffs): `completion_mask[t] == 1` exactly where the model's own
valid assistant turns are (content and end-of-turn tokens); system, user, interpreter, feedback and void turns are 0.
`labels` is `input_ids` where the mask is 1 and -100 elsewhere, so TRL's `SFTTrainer` uses it as is, and the RL
trainer can take `completion_mask` for its SFT term.

The validation split is by group (world id or workspace hash, as in the task collection's index): no group appears
on both sides, so validation loss measures transfer to unseen worlds.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from worldsmith.core.schemas import UNPAID_GUARDS, Task, Trajectory
from worldsmith.core.store import ArtifactError, atomic_write_text, read_jsonl, read_model, sha256_json
from worldsmith.training.chat_tokenizers import ChatTokenizer, HFChatTokenizer
from worldsmith.training.sft_data import (
    IGNORE_INDEX,
    SFTExample,
    conversation,
    to_sft_example,
)

if TYPE_CHECKING:
    from datasets import Dataset

#: Task-id prefixes of benchmark questions (training/dabench.py names its tasks so): refused even when the eval run
#: that produced them no longer points at the benchmark folder.
BENCHMARK_ID_PREFIXES = ("dabench-",)
COLUMNS = ("input_ids", "completion_mask", "labels", "trajectory_id", "task_id", "group", "label", "n_tokens",
           "n_trained", "has_void")


@dataclass(frozen=True)
class TaskMeta:
    """What the dataset needs to know about a trajectory's task: its split unit, split and origin."""

    group: str
    split: str | None = None  # "train" / "test" / "dev" in a collection; None when unknown
    source: str | None = None  # Provenance.source: "benchmark" tasks never train


@dataclass(frozen=True)
class DataConfig:
    """How trajectories become an SFT dataset."""

    max_tokens: int = 4096
    """Longest example in tokens; a longer one is dropped or truncated (see `overflow`)."""
    overflow: Literal["drop", "truncate"] = "drop"
    """'drop' a too-long example, or 'truncate' it to its first `max_tokens` tokens (dropped if nothing trains)."""
    validation_fraction: float = 0.1
    """Share of groups (worlds / workspaces) held out for validation; 0 for none."""
    seed: int = 0
    """Seed of the group shuffle behind the validation split."""
    dedup: bool = True
    """Keep one example per distinct conversation (same roles and texts)."""
    skip_void: bool = False
    """Also drop trajectories with a void turn (their void turns never train either way)."""
    max_turn_tokens: int | None = None
    """Longest trainable assistant turn in tokens; a longer turn stays in the conversation as context but carries no
    loss, and a trajectory left with no trainable turn is dropped. Inference cuts a turn at its per-turn budget
    (analyst.max_tokens_per_turn), so a longer turn — a world's 13,000-character reference script as one cell, a
    long helper function — teaches what the harness would cut off. None: no limit."""

    def __post_init__(self) -> None:
        if self.max_tokens < 2:
            raise ValueError(f"DataConfig.max_tokens must be at least 2, got {self.max_tokens}")
        if self.max_turn_tokens is not None and self.max_turn_tokens < 1:
            raise ValueError(f"DataConfig.max_turn_tokens must be at least 1 (or None), got {self.max_turn_tokens}")
        if not 0 <= self.validation_fraction < 1:
            raise ValueError(f"DataConfig.validation_fraction must be in [0, 1), got {self.validation_fraction}")
        if self.overflow not in ("drop", "truncate"):
            raise ValueError(f"DataConfig.overflow must be 'drop' or 'truncate', got {self.overflow!r}")


@dataclass
class DataStats:
    """Counts of what happened to each input trajectory (the report's data table)."""

    loaded: int = 0
    rejected: dict[str, int] = field(default_factory=dict)  # reason -> count
    duplicates: int = 0
    too_long_dropped: int = 0
    truncated: int = 0
    train: int = 0
    validation: int = 0
    train_groups: int = 0
    validation_groups: int = 0
    train_tokens: int = 0
    trained_tokens: int = 0  # tokens with loss in the train split
    long_turns_masked: int = 0  # assistant turns over max_turn_tokens, kept as context without loss

    def reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SFTData:
    train: Dataset
    validation: Dataset | None
    stats: DataStats
    manifest: list[dict[str, Any]] = field(default_factory=list)
    """Every input trajectory in input order and what became of it (see `build_rows`)."""

    def save(self, out: str | Path) -> Path:
        """`out/train`, `out/validation` (datasets' save_to_disk), `out/stats.json` and the manifest."""
        out = Path(out)
        self.train.save_to_disk(str(out / "train"))
        if self.validation is not None:
            self.validation.save_to_disk(str(out / "validation"))
        atomic_write_text(out / "stats.json", json.dumps(self.stats.to_dict(), indent=2) + "\n")
        write_manifest(out / MANIFEST, self.manifest)
        return out


# --------------------------------------------------------------------------------------------- acceptance


def has_void(traj: Trajectory) -> bool:
    """A void turn in its steps or its recorded conversation (the last call's messages and reply)."""
    return traj.has_void_turn or any(m.source == "model_void" for m in traj.messages())


def accept(traj: Trajectory, meta: TaskMeta | None = None, *, skip_void: bool = False) -> str | None:
    """None when the trajectory may train, else the reason it may not (a key of `DataStats.rejected`)."""
    from worldsmith.training.evaluate import (
        primary_grade,  # evaluate pulls in graders: only when asked
    )

    if (meta is not None and meta.source == "benchmark") or traj.task_id.startswith(BENCHMARK_ID_PREFIXES):
        return "benchmark task (evaluation only)"
    if meta is not None and meta.split in ("test", "dev"):
        return f"task in the {meta.split} split"
    if traj.label == "chat":
        return "chat thread"
    if traj.status != "answered":
        return f"status {traj.status}"
    if traj.label == "sampled":
        grade = primary_grade(traj)
        if grade is None:
            return "not graded"
        if not grade.passed:
            return "failed its grade"
        if traj.graded_answer is not None and traj.graded_answer != traj.final_answer:
            return "graded after post-processing"  # the model's own answer, which would train, was not the one graded
        if unpaid_answer(traj):
            return "answer no output shows"  # a right guess: imitating it teaches guessing
    if skip_void and has_void(traj):
        return "has a void turn"
    return None


def unpaid_answer(traj: Trajectory) -> bool:
    """Whether a guard of core/schemas.UNPAID_GUARDS fired on the final answer and it was kept (not re-asked)."""
    answers = [s.index for s in traj.steps if s.action is not None and s.action.kind == "answer"]
    return bool(answers) and any(g.kind in UNPAID_GUARDS and g.step == answers[-1] and not g.reasked
                                 for g in traj.guards)


# --------------------------------------------------------------------------------------------- loading


def collection_meta(root: str | Path) -> dict[str, TaskMeta]:
    """task id → TaskMeta from a task collection's index.jsonl."""
    from worldsmith.core.taskpkg import TaskCollection

    return {e.id: TaskMeta(group=e.group or e.id, split=e.split, source=e.source)
            for e in TaskCollection(root).entries()}


def _task_meta(task: Task) -> TaskMeta:
    group = task.provenance.world_id or task.workspace.content_hash or task.id
    return TaskMeta(group=group, split=task.split, source=task.provenance.source)


def _read_folder(folder: Path) -> list[Trajectory]:
    paths = sorted(p for p in folder.rglob("*.json") if p.is_file())
    return [read_model(p, Trajectory) for p in paths]


def _eval_tasks_path(run: Path) -> Path | None:
    """The tasks path an eval run directory was started on (its `eval_request` event)."""
    for ev in read_jsonl(run / "events.jsonl"):
        if ev.get("event") == "eval_request" and ev.get("tasks"):
            return Path(ev["tasks"])
    return None


def load_source(path: str | Path, *, system_prompt: str | None = None) -> tuple[list[Trajectory], dict[str, TaskMeta]]:
    """Trajectories and their tasks' metadata from one of:

    - a task collection (index.jsonl): its oracle trajectories (`oracle/*.json`), given `system_prompt` when they
      have none (engine oracles are written without one; pass the analyst's so they train as the agent is prompted);
    - an eval run directory (events.jsonl + trajectories/): its trajectories; the task collection it evaluated, when
      that still exists, gives groups and splits. A DABench eval run is refused (evaluation only);
    - any folder of trajectory JSON files (groups fall back to `metadata.group` or the task id)."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: not a folder (expected a task collection, an eval run directory or a "
                                "folder of trajectory JSON files)")
    meta: dict[str, TaskMeta] = {}
    if (path / "index.jsonl").is_file():
        meta = collection_meta(path)
        oracle = path / "oracle"
        trajs = _read_folder(oracle) if oracle.is_dir() else []
        if system_prompt:
            trajs = [t if t.system_prompt or t.calls else t.model_copy(update={"system_prompt": system_prompt})
                     for t in trajs]
        return trajs, meta
    if (path / "events.jsonl").is_file() and (path / "trajectories").is_dir():
        tasks_path = _eval_tasks_path(path)
        if tasks_path is not None and (tasks_path / "questions.jsonl").is_file():
            raise ValueError(f"{path}: an eval run on a DABench-format folder ({tasks_path}); benchmark "
                             "questions are evaluation only and never enter training data")
        if tasks_path is not None and (tasks_path / "index.jsonl").is_file():
            meta = collection_meta(tasks_path)
        elif tasks_path is not None and (tasks_path / "task.json").is_file():
            task = read_model(tasks_path / "task.json", Task)
            meta = {task.id: _task_meta(task)}
        return _read_folder(path / "trajectories"), meta
    trajs = _read_folder(path)
    if not trajs:
        raise ArtifactError(f"{path}: no trajectory JSON files found")
    return trajs, meta


def load_trajectories(paths: Iterable[str | Path], *, system_prompt: str | None = None
                      ) -> tuple[list[Trajectory], dict[str, TaskMeta]]:
    """`load_source` over several paths; metadata merged (a later source's entry for a task wins)."""
    trajs: list[Trajectory] = []
    meta: dict[str, TaskMeta] = {}
    for p in paths:
        t, m = load_source(p, system_prompt=system_prompt)
        trajs.extend(t)
        meta.update(m)
    return trajs, meta


# --------------------------------------------------------------------------------------------- building


def group_of(traj: Trajectory, meta: Mapping[str, TaskMeta]) -> str:
    """The split unit of a trajectory: its task's group, else `metadata['group']`, else the task id."""
    m = meta.get(traj.task_id)
    return m.group if m is not None else str(traj.metadata.get("group") or traj.task_id)


def conversation_key(traj: Trajectory) -> str:
    """Same roles and texts in the same order → same key (the dedup key)."""
    return sha256_json([[m.role, m.content] for m in conversation(traj)])


def split_groups(groups: Iterable[str], fraction: float, seed: int) -> set[str]:
    """The groups held out for validation: round(n·fraction) of them (at least one when fraction > 0 and there are
    two or more groups, never all), chosen by a seeded shuffle of the sorted names."""
    names = sorted(set(groups))
    if fraction <= 0 or len(names) < 2:
        return set()
    rng = random.Random(seed)
    rng.shuffle(names)
    n = min(len(names) - 1, max(1, round(len(names) * fraction)))
    return set(names[:n])


def _row(traj: Trajectory, ex: SFTExample, group: str) -> dict[str, Any]:
    return {"input_ids": ex.input_ids, "completion_mask": ex.loss_mask, "labels": ex.labels,
            "trajectory_id": traj.id, "task_id": traj.task_id, "group": group, "label": traj.label,
            "n_tokens": len(ex.input_ids), "n_trained": sum(ex.loss_mask), "has_void": has_void(traj)}


def _fit(ex: SFTExample, config: DataConfig, stats: DataStats) -> SFTExample | None:
    if len(ex.input_ids) <= config.max_tokens:
        return ex
    if config.overflow == "drop":
        stats.too_long_dropped += 1
        return None
    n = config.max_tokens
    cut = SFTExample(messages=ex.messages, input_ids=ex.input_ids[:n], loss_mask=ex.loss_mask[:n],
                     labels=ex.labels[:n])
    if not any(cut.loss_mask):
        stats.too_long_dropped += 1
        return None
    stats.truncated += 1
    return cut


def _mask_long_turns(ex: SFTExample, limit: int) -> tuple[SFTExample, int]:
    """`ex` with every trained span (one assistant turn) longer than `limit` tokens masked; how many were."""
    long = [(a, b) for a, b in ex.trained_spans() if b - a > limit]
    if not long:
        return ex, 0
    mask = list(ex.loss_mask)
    for a, b in long:
        mask[a:b] = [0] * (b - a)
    labels = [t if m else IGNORE_INDEX for t, m in zip(ex.input_ids, mask)]
    return replace(ex, loss_mask=mask, labels=labels), len(long)


def as_chat_tokenizer(tokenizer: Any) -> ChatTokenizer:
    """A ChatTokenizer as is; a Hugging Face tokenizer wrapped in HFChatTokenizer."""
    return tokenizer if isinstance(tokenizer, ChatTokenizer) else HFChatTokenizer(tokenizer)


def build_rows(trajectories: Sequence[Trajectory], tokenizer: Any, *, tasks: Mapping[str, TaskMeta] | None = None,
               config: DataConfig | None = None, stats: DataStats | None = None,
               manifest: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Accepted, deduplicated, length-limited rows (dicts of the dataset's columns), in input order. `manifest`,
    when given, gets one entry per input trajectory: its ids, group and `outcome` — "kept", "truncated" (kept, cut
    to `max_tokens`) or why it was dropped (the reason `stats` counts it under, "duplicate", "too long")."""
    config = config or DataConfig()
    stats = stats if stats is not None else DataStats()
    tasks = tasks or {}
    tok = as_chat_tokenizer(tokenizer)
    seen: set[str] = set()
    rows: list[dict[str, Any]] = []
    for traj in trajectories:
        stats.loaded += 1
        group = group_of(traj, tasks)
        outcome = _build_row(traj, group, tok, tasks, config, stats, seen, rows)
        if manifest is not None:
            manifest.append({"trajectory_id": traj.id, "task_id": traj.task_id, "group": group, "label": traj.label,
                             "outcome": outcome})
    return rows


def _build_row(traj: Trajectory, group: str, tok: ChatTokenizer, tasks: Mapping[str, TaskMeta], config: DataConfig,
               stats: DataStats, seen: set[str], rows: list[dict[str, Any]]) -> str:
    """`traj`'s row appended to `rows` ("kept" or "truncated"), or the reason it is not."""
    reason = accept(traj, tasks.get(traj.task_id), skip_void=config.skip_void)
    if reason is not None:
        stats.reject(reason)
        return reason
    if config.dedup:
        key = conversation_key(traj)
        if key in seen:
            stats.duplicates += 1
            return "duplicate"
        seen.add(key)
    ex = to_sft_example(traj, tok)
    if not any(ex.loss_mask):
        stats.reject("no trainable turn")
        return "no trainable turn"
    if config.max_turn_tokens is not None:
        ex, masked = _mask_long_turns(ex, config.max_turn_tokens)
        stats.long_turns_masked += masked
        if not any(ex.loss_mask):
            reason = f"every turn longer than {config.max_turn_tokens} tokens"
            stats.reject(reason)
            return reason
    fitted = _fit(ex, config, stats)
    if fitted is None:
        return "too long"
    rows.append(_row(traj, fitted, group))
    return "truncated" if fitted is not ex else "kept"


def _dataset(rows: list[dict[str, Any]]) -> Dataset:
    from datasets import Dataset

    return Dataset.from_dict({c: [r[c] for r in rows] for c in COLUMNS})


def build_sft_dataset(trajectories: Sequence[Trajectory], tokenizer: Any, *,
                      tasks: Mapping[str, TaskMeta] | None = None, config: DataConfig | None = None) -> SFTData:
    """Train (and validation, group-disjoint) datasets from trajectories. `tokenizer`: a ChatTokenizer or a Hugging
    Face tokenizer. Raises ValueError when nothing is left to train on, with the rejection counts."""
    config = config or DataConfig()
    stats = DataStats()
    manifest: list[dict[str, Any]] = []
    rows = build_rows(trajectories, tokenizer, tasks=tasks, config=config, stats=stats, manifest=manifest)
    held = split_groups((r["group"] for r in rows), config.validation_fraction, config.seed)
    train = [r for r in rows if r["group"] not in held]
    val = [r for r in rows if r["group"] in held]
    if not train:
        raise ValueError(f"no trajectory left to train on: {stats.loaded} loaded, rejected {stats.rejected}, "
                         f"{stats.duplicates} duplicates, {stats.too_long_dropped} too long "
                         f"(max_tokens={config.max_tokens})")
    stats.train, stats.validation = len(train), len(val)
    stats.train_groups = len({r["group"] for r in train})
    stats.validation_groups = len(held)
    stats.train_tokens = sum(r["n_tokens"] for r in train)
    stats.trained_tokens = sum(r["n_trained"] for r in train)
    kept = iter(rows)  # the kept entries of the manifest are the rows, in the same order
    for entry in manifest:
        if entry["outcome"] in ("kept", "truncated"):
            row = next(kept)
            entry.update(outcome="validation" if row["group"] in held else "train", n_tokens=row["n_tokens"],
                         n_trained=row["n_trained"], truncated=entry["outcome"] == "truncated")
    return SFTData(train=_dataset(train), validation=_dataset(val) if val else None, stats=stats, manifest=manifest)


#: The manifest's file name in a dataset folder and in a `train sft` run directory.
MANIFEST = "examples.jsonl"


def write_manifest(path: str | Path, manifest: Sequence[Mapping[str, Any]]) -> Path:
    """`manifest` as JSON lines, atomically."""
    return atomic_write_text(path, "".join(json.dumps(dict(e), sort_keys=True) + "\n" for e in manifest))


def read_manifest(path: str | Path) -> list[dict[str, Any]]:
    """A manifest written by `write_manifest` (a run directory or dataset folder is looked into)."""
    path = Path(path)
    path = path / MANIFEST if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no example manifest (runs of `train sft` before it was written have none)")
    return read_jsonl(path)


def trained_text(row: Mapping[str, Any], tokenizer: Any) -> list[str]:
    """The decoded spans of a row that carry loss, in order (for golden tests and eyeballing a dataset)."""
    return [text for trained, text in segments(row, tokenizer) if trained]


def segments(row: Mapping[str, Any], tokenizer: Any) -> list[tuple[bool, str]]:
    """The whole rendered row, decoded in order as (trains, text) runs: the context (system, user and interpreter
    turns, chat-template tokens) between the spans that carry loss."""
    tok = as_chat_tokenizer(tokenizer)
    ids = list(row["input_ids"])
    ex = SFTExample(messages=[], input_ids=ids, loss_mask=list(row["completion_mask"]))
    out: list[tuple[bool, str]] = []
    at = 0
    for a, b in ex.trained_spans():
        if a > at:
            out.append((False, tok.decode(ids[at:a])))
        out.append((True, tok.decode(ids[a:b])))
        at = b
    if at < len(ids):
        out.append((False, tok.decode(ids[at:])))
    return out


def rejected_summary(stats: DataStats) -> str:
    """One line: what was dropped and why."""
    parts = [f"{n} {reason}" for reason, n in Counter(stats.rejected).most_common()]
    if stats.duplicates:
        parts.append(f"{stats.duplicates} duplicate")
    if stats.too_long_dropped:
        parts.append(f"{stats.too_long_dropped} too long")
    return ", ".join(parts) or "none"


__all__ = [
    "COLUMNS",
    "IGNORE_INDEX",
    "MANIFEST",
    "DataConfig",
    "DataStats",
    "SFTData",
    "TaskMeta",
    "accept",
    "as_chat_tokenizer",
    "build_rows",
    "build_sft_dataset",
    "collection_meta",
    "conversation_key",
    "group_of",
    "has_void",
    "load_source",
    "load_trajectories",
    "read_manifest",
    "rejected_summary",
    "segments",
    "split_groups",
    "trained_text",
    "write_manifest",
]
