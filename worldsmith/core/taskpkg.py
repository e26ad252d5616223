"""Task packages: one Harbor-style directory per task plus a JSONL index per collection.

    <collection>/index.jsonl
    <collection>/tasks/<id>/task.toml        Harbor config + readable metadata (generated from task.json)
                            task.json        the full Task model, the source of truth when reading back
                            instruction.md   what the solver reads
                            environment/     the initial workspace files (the only data a solver sees)
                            environment/Dockerfile  the pinned image Harbor builds (core/harbor_layout.py)
                            tests/           verifier, runs without worldsmith: test.sh + grade.py + expected.json
                                             (closed form) or + grade_report.py, rubric.json, judge prompts (report)
                            solution/        solve.py + solve.sh when a reference solution exists

Solvers get `instruction.md` and `environment/` only; answers, rubrics and solutions stay outside.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

import tomli_w

from worldsmith.core import harbor_layout
from worldsmith.core.schemas import Task, TaskIndexEntry, WorkspaceFile, WorkspaceRef
from worldsmith.core.store import (
    ArtifactError,
    atomic_write_text,
    hash_tree,
    iter_files,
    public_mode,
    read_jsonl,
    read_model,
    remove_stale_temps,
    write_jsonl,
)


def workspace_ref(root: str | os.PathLike[str], files: Iterable[str] | None = None, *, keep_root: bool = True) -> WorkspaceRef:
    """Hash a workspace: every file under root, or just the given relative paths."""
    root = Path(root)
    if not root.is_dir():
        raise ArtifactError(f"{root}: workspace directory does not exist")
    if files is None:
        paths = list(iter_files(root))
    else:
        paths = []
        for rel in files:
            p = root / rel
            if not p.is_file():
                raise ArtifactError(f"{p}: workspace file listed in the task does not exist")
            paths.append(p)
    digest, entries = hash_tree(root, paths)
    return WorkspaceRef(files=[WorkspaceFile(path=r, sha256=h, size=s) for r, h, s in entries], content_hash=digest,
                        root=str(root) if keep_root else None)


def _task_toml(task: Task) -> dict:
    return harbor_layout.task_toml(task)


def write_task_package(task: Task, dest: str | os.PathLike[str], *, files_root: str | os.PathLike[str] | None = None,
                       solution_code: str | None = None, overwrite: bool = False) -> Path:
    """Write one task directory atomically (built in a temp dir, then renamed into place).

    `files_root` is where the workspace files are now (defaults to `task.workspace.root`). Their hashes are
    checked against the task's workspace ref, so a package never silently ships different data.
    Re-writing an identical package is a no-op, which makes pipelines resumable.
    """
    dest = Path(dest)
    src_root = Path(files_root or task.workspace.root or "")
    if task.workspace.files and not src_root.is_dir():
        raise ArtifactError(f"task {task.id}: workspace files root {src_root} does not exist")
    packaged = task.model_copy(update={"workspace": task.workspace.model_copy(update={"root": None})})
    if dest.exists():
        existing = dest / "task.json"
        if not overwrite and existing.exists() and existing.read_text(encoding="utf-8") == _task_json(packaged):
            return dest
        if not overwrite:
            raise ArtifactError(f"{dest}: a different task package already exists (pass overwrite=True to replace it)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(dest.parent, dest.name)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp"))
    public_mode(tmp, directory=True)
    try:
        env = tmp / "environment"
        env.mkdir()
        for f in task.workspace.files:
            target = env / f.path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src_root / f.path, target)
            if _sha256(target) != f.sha256:
                raise ArtifactError(f"task {task.id}: {src_root / f.path} changed since the task was made (hash mismatch)")
        (env / "Dockerfile").write_text(harbor_layout.dockerfile(task), encoding="utf-8")
        (tmp / "instruction.md").write_text(harbor_layout.instruction_md(task), encoding="utf-8")
        (tmp / "task.json").write_text(_task_json(packaged), encoding="utf-8")
        (tmp / "task.toml").write_text(tomli_w.dumps(_task_toml(task)), encoding="utf-8")
        _write_tests(task, tmp / "tests")
        if solution_code is not None:
            (tmp / "solution").mkdir()
            (tmp / "solution" / "solve.py").write_text(solution_code, encoding="utf-8")
            _write_exec(tmp / "solution" / "solve.sh", harbor_layout.solve_sh(task))
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _write_tests(task: Task, tests: Path) -> None:
    """The verifier: worldsmith's own graders shipped verbatim (stdlib only), their inputs and test.sh."""
    tests.mkdir()
    sources = harbor_layout.verifier_sources()
    shutil.copyfile(sources["grade.py"], tests / "grade.py")
    if task.kind == "closed_form":
        rule = "official" if task.metadata.get("strict_grading") else None
        expected = [{**a.model_dump(exclude_none=True), **({"rule": rule} if rule else {})} for a in task.answers]
        (tests / "expected.json").write_text(json.dumps(expected, indent=2) + "\n", encoding="utf-8")
    else:
        if task.rubric is None:
            raise ArtifactError(f"task {task.id}: a report task needs a rubric to be packaged")
        (tests / "rubric.json").write_text(task.rubric.model_dump_json(indent=2) + "\n", encoding="utf-8")
        shutil.copyfile(sources["grade_report.py"], tests / "grade_report.py")
        for name, text in harbor_layout.judge_prompt_texts().items():
            (tests / name).write_text(text, encoding="utf-8")
        (tests / "instruction.md").write_text(task.instruction.rstrip() + "\n", encoding="utf-8")
        inputs = [f.path for f in task.workspace.files]  # the task's own files: not part of the deliverable
        (tests / "workspace_inputs.json").write_text(json.dumps(inputs, indent=2) + "\n", encoding="utf-8")
    _write_exec(tests / "test.sh", harbor_layout.test_sh(task))


def _task_json(task: Task) -> str:
    return task.model_dump_json(indent=2) + "\n"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_exec(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)


def read_task_package(path: str | os.PathLike[str], *, verify: bool = True) -> Task:
    """Read a package back into the same Task model; with `verify`, check the environment files' hashes."""
    path = Path(path)
    task = read_model(path / "task.json", Task)
    if verify:
        _verify_files(task, path / "environment", f"{path}: environment file")
    return task.model_copy(update={"workspace": task.workspace.model_copy(update={"root": str(path / "environment")})})


def _verify_files(task: Task, root: Path, where: str) -> None:
    """Every workspace file of `task` exists under `root` and matches its recorded sha256."""
    for f in task.workspace.files:
        p = root / f.path
        if not p.is_file():
            raise ArtifactError(f"{where} {f.path} is missing")
        if _sha256(p) != f.sha256:
            raise ArtifactError(f"{where} {f.path} does not match its recorded hash")


TASK_LIST = "tasks.jsonl"


def read_task_list(folder: str | os.PathLike[str], *, verify: bool = True) -> list[Task]:
    """A frozen task list: `folder/tasks.jsonl`, one Task per line, each `workspace.root` a folder relative to
    `folder` (tasks over one world share its files instead of a copy per package). With `verify`, every
    workspace file must match its recorded hash."""
    folder = Path(folder)
    if not (folder / TASK_LIST).is_file():
        hint = f"; pass the folder that holds it ({folder.parent})" if folder.name == TASK_LIST else ""
        raise ArtifactError(f"{folder}: no {TASK_LIST} there{hint}")
    tasks = []
    for line_no, row in enumerate(read_jsonl(folder / TASK_LIST), 1):
        try:
            task = Task.model_validate(row)
        except ValueError as exc:
            raise ArtifactError(f"{folder / TASK_LIST}: line {line_no} is not a valid task: {exc}") from exc
        if not task.workspace.root or Path(task.workspace.root).is_absolute():
            raise ArtifactError(f"{folder / TASK_LIST}: task {task.id} needs a workspace root relative to {folder}")
        root = folder / task.workspace.root
        if verify:
            _verify_files(task, root, f"{folder}: task {task.id}: workspace file")
        tasks.append(task.model_copy(update={"workspace": task.workspace.model_copy(update={"root": str(root)})}))
    return tasks


def solution_code(path: str | os.PathLike[str]) -> str | None:
    p = Path(path) / "solution" / "solve.py"
    return p.read_text(encoding="utf-8") if p.exists() else None


class TaskCollection:
    """A folder of task packages with an `index.jsonl`; safe to add to from several threads."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        self._lock = threading.Lock()

    @property
    def index_path(self) -> Path:
        return self.root / "index.jsonl"

    def entries(self, split: str | None = None) -> list[TaskIndexEntry]:
        try:
            rows = [TaskIndexEntry.model_validate(r) for r in read_jsonl(self.index_path)]
        except ValueError as exc:
            raise ArtifactError(f"{self.index_path}: invalid index entry: {exc}") from exc
        return [e for e in rows if split is None or e.split == split]

    def add(self, task: Task, *, files_root: str | os.PathLike[str] | None = None, solution_code: str | None = None,
            group: str | None = None, overwrite: bool = False) -> Path:
        pkg = write_task_package(task, self.root / "tasks" / task.id, files_root=files_root,
                                 solution_code=solution_code, overwrite=overwrite)
        entry = TaskIndexEntry(id=task.id, kind=task.kind, split=task.split, category=task.category,
                               level=task.difficulty.level, source=task.provenance.source,
                               group=group or task.provenance.world_id or task.workspace.content_hash,
                               path=pkg.relative_to(self.root).as_posix(), content_hash=task.workspace.content_hash)
        with self._lock:
            rows = {e.id: e for e in self.entries()}
            rows[task.id] = entry
            write_jsonl(self.index_path, rows.values())
        return pkg

    def read(self, task_id: str) -> Task:
        for e in self.entries():
            if e.id == task_id:
                return read_task_package(self.root / e.path)
        raise ArtifactError(f"{self.index_path}: no task {task_id!r}")

    def tasks(self, split: str | None = None) -> list[Task]:
        return [read_task_package(self.root / e.path) for e in self.entries(split)]

    def assign_splits(self, test_fraction: float = 0.2, seed: int = 0) -> dict[str, str]:
        """Group-disjoint train/test split (a world or workspace never straddles the two).

        Rewrites the index and each package's task.json/task.toml. Returns {group: split}.
        """
        with self._lock:
            entries = self.entries()
            groups = sorted({e.group or e.id for e in entries})
            rng = random.Random(seed)
            rng.shuffle(groups)
            n_test = max(1, round(len(groups) * test_fraction)) if len(groups) > 1 and test_fraction > 0 else 0
            assignment = {g: ("test" if i < n_test else "train") for i, g in enumerate(groups)}
            updated = []
            for e in entries:
                split = assignment[e.group or e.id]
                pkg = self.root / e.path
                task = read_model(pkg / "task.json", Task).model_copy(update={"split": split})
                atomic_write_text(pkg / "task.json", _task_json(task))
                atomic_write_text(pkg / "task.toml", tomli_w.dumps(_task_toml(task)))
                updated.append(e.model_copy(update={"split": split}))
            write_jsonl(self.index_path, updated)
        return assignment
