"""Pipelines: operators in order over one table of rows, checked before they run and resumable after a kill.

    p = Pipeline("tasks").add(SampleSpecs(), input_world_key="world_dir").add(WriteRequest(llm), ...)
    p.compile(initial_keys={"world_dir"})          # every binding checked, no model called
    rows = await p.arun(StepStorage(run / "pipeline"), [{"world_dir": "..."}])
    rows = await p.arun(StepStorage(run / "pipeline"))   # after kill -9: continues at the first unfinished step
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from worldsmith.core.aio import run_sync
from worldsmith.core.operators import Binding, BindingError, Operator, Row
from worldsmith.core.storage import StepStorage


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a pipeline, said where it is."""

    step: int
    operator: str
    key: str
    message: str

    def __str__(self) -> str:
        where = f"step {self.step} ({self.operator})" if self.step else "pipeline"
        return f"{where}: {self.key}: {self.message}"


class PipelineCompileError(ValueError):
    def __init__(self, name: str, problems: list[Problem]):
        self.problems = problems
        super().__init__(f"pipeline {name!r} does not compile ({len(problems)} problem(s)):\n"
                         + "\n".join(f"  - {p}" for p in problems))


@dataclass
class Step:
    op: Operator
    keys: dict[str, str]
    binding: Binding | None = None


@dataclass
class Pipeline:
    name: str
    steps: list[Step] = field(default_factory=list)
    _compiled_for: frozenset[str] | None = None

    def add(self, op: Operator, **keys: str) -> Pipeline:
        self.steps.append(Step(op, keys))
        self._compiled_for = None
        return self

    def compile(self, initial_keys: Iterable[str]) -> Pipeline:
        """Check every binding against the columns that exist at that step; raise one error listing every problem.

        A step's input must be an initial column or an earlier step's output; an output may only replace an
        existing column that the same step also reads (an in-place refinement); required parameters must be set.
        """
        initial = frozenset(initial_keys)
        columns = set(initial)
        problems: list[Problem] = []
        if not self.steps:
            problems.append(Problem(0, "", "steps", "the pipeline has no steps"))
        for i, step in enumerate(self.steps, 1):
            op = step.op
            try:
                step.binding = op.bind(**step.keys)
            except BindingError as exc:
                problems.append(Problem(i, op.name, "binding", str(exc).partition(": ")[2]))
                continue
            for attr in op.missing():
                problems.append(Problem(i, op.name, attr, "required parameter is not set"))
            for logical, col in step.binding.inputs.items():
                if col not in columns:
                    problems.append(Problem(i, op.name, f"input {logical}={col!r}",
                                            f"no such column; available: {', '.join(sorted(columns)) or 'none'}"))
            read = set(step.binding.inputs.values())
            for logical, col in step.binding.outputs.items():
                if col in columns and col not in read:
                    problems.append(Problem(i, op.name, f"output {logical}={col!r}",
                                            "would overwrite an existing column the step does not read; bind another "
                                            "name, or read it too to refine it in place"))
                columns.add(col)
        if problems:
            raise PipelineCompileError(self.name, problems)
        self._compiled_for = initial
        return self

    def signature(self) -> dict[str, Any]:
        return {"pipeline": self.name, "steps": [{"op": s.op.name, "keys": dict(sorted(s.keys.items()))}
                                                 for s in self.steps]}

    async def arun(self, storage: StepStorage, rows: list[Row] | None = None) -> list[Row]:
        """Run from the first unfinished step. Give `rows` on the first run; omit them to resume a stored run."""
        storage.check_signature(self.signature())
        if rows is not None:
            storage.seed(rows)
        elif not storage.is_done(0, "input"):
            raise ValueError(f"{storage.root}: nothing to resume (no stored input rows); pass the initial rows")
        if self._compiled_for is None:
            first = storage.rows(0)
            self.compile(first[0].keys() if first else ())
        for i, step in enumerate(self.steps, 1):
            if storage.is_done(i, step.op.name):
                continue
            if storage.next_index != i:
                raise ValueError(f"{storage.root}: step {i} ({step.op.name}) cannot run: storage is at step "
                                 f"{storage.next_index}")
            storage.emit({"type": "pipeline", "step": step.op.name, "index": i, "status": "started"})
            await step.op.arun(storage, **step.keys)
        return storage.read()

    def run(self, storage: StepStorage, rows: list[Row] | None = None) -> list[Row]:
        return run_sync(self.arun(storage, rows))

    def resume(self, storage: StepStorage) -> list[Row]:
        """Sync resume; async callers use `await arun(storage)` without rows."""
        return run_sync(self.arun(storage))
