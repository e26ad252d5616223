"""Step-wise storage of a pipeline's rows in a folder, made to survive `kill -9`.

    <root>/pipeline.json           the pipeline's signature (steps and bindings): resume refuses a different one
    <root>/steps/00-input.jsonl    the initial rows
    <root>/steps/NN-<op>.jsonl     each step's output, written once, atomically (temp file + rename)
    <root>/steps.jsonl             StepLedger: one record per finished step, with its file's hash
    <root>/rows/NN-<op>.jsonl      per-row ledger of a running step (appended and fsynced row by row)

A step counts as finished only when its ledger record exists and its file still has the recorded hash, so a
kill between writing the file and recording it simply reruns the step, whose rows come from the row ledger.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from worldsmith.core.store import (ArtifactError, StepLedger, append_jsonl, atomic_write_text, read_jsonl, sha256_json,
                                   write_jsonl)

Row = dict[str, Any]
Event = Callable[[dict[str, Any]], None]


class StepStorage:
    def __init__(self, root: str | os.PathLike[str], on_event: Event | None = None):
        self.root = Path(root)
        (self.root / "steps").mkdir(parents=True, exist_ok=True)
        self.ledger = StepLedger(self.root / "steps.jsonl")
        self._on_event = on_event
        self._verified: set[str] = set()  # steps whose file hash was checked once; only this object writes them

    # ------------------------------------------------------------------ progress

    def emit(self, event: dict[str, Any]) -> None:
        """Forward a progress event to whoever runs the pipeline (a CLI printer, a graph's stream)."""
        if self._on_event is not None:
            self._on_event(event)

    # ------------------------------------------------------------------ steps

    @staticmethod
    def _key(index: int, name: str) -> str:
        return f"{index:02d}-{name}"

    def step_path(self, index: int, name: str) -> Path:
        return self.root / "steps" / f"{self._key(index, name)}.jsonl"

    def is_done(self, index: int, name: str) -> bool:
        return self._done(self._key(index, name))

    def _done(self, key: str) -> bool:
        if key not in self._verified and self.ledger.done(key):
            self._verified.add(key)
        return key in self._verified

    def finished(self) -> list[tuple[int, str]]:
        """(index, operator name) of every finished step, in order."""
        out = []
        for key in self.ledger.keys():
            idx, _, name = key.partition("-")
            if self._done(key):
                out.append((int(idx), name))
        return sorted(set(out))

    @property
    def next_index(self) -> int:
        done = self.finished()
        return done[-1][0] + 1 if done else 0

    def seed(self, rows: list[Row]) -> None:
        """Store the initial rows as step 0; on a resumed run they must be the same rows."""
        if self.is_done(0, "input"):
            stored = self.rows(0)
            if sha256_json(stored) != sha256_json(_jsonable(rows)):
                raise ArtifactError(f"{self.root}: already holds a run started from other input rows; "
                                    "resume it without new input, or use a fresh folder")
            return
        self.commit(0, "input", rows)

    def read(self) -> list[Row]:
        """The rows of the last finished step (what the next step reads)."""
        done = self.finished()
        if not done:
            raise ArtifactError(f"{self.root}: no rows yet; seed the storage with the initial rows first")
        return self.rows(done[-1][0])

    def rows(self, step: int | str) -> list[Row]:
        """The output of a finished step, by index or operator name (the last step of that name)."""
        done = dict(self.finished())
        if isinstance(step, str):
            matches = [i for i, n in done.items() if n == step]
            if not matches:
                raise ArtifactError(f"{self.root}: no finished step {step!r}; finished: {', '.join(done.values())}")
            step = matches[-1]
        if step not in done:
            raise ArtifactError(f"{self.root}: step {step} has not finished")
        return read_jsonl(self.step_path(step, done[step]))

    def commit(self, index: int, name: str, rows: list[Row]) -> Path:
        """Write a step's rows atomically and record the step as finished (each step is written once)."""
        if self.is_done(index, name):
            raise ArtifactError(f"{self.root}: step {self._key(index, name)} is already finished")
        path = write_jsonl(self.step_path(index, name), _jsonable(rows))
        self.ledger.record(self._key(index, name), outputs=[path], rows=len(rows))
        self._verified.add(self._key(index, name))
        (self.root / "rows" / f"{self._key(index, name)}.jsonl").unlink(missing_ok=True)
        self.emit({"type": "pipeline", "step": name, "index": index, "rows": len(rows)})
        return path

    # ------------------------------------------------------------------ per-row ledger

    def done_rows(self, index: int, name: str) -> dict[int, list[Row]]:
        """Rows of an unfinished step already processed before a kill: input row index -> output rows."""
        return {rec["row"]: rec["out"] for rec in read_jsonl(self.root / "rows" / f"{self._key(index, name)}.jsonl")}

    def record_row(self, index: int, name: str, row: int, out: list[Row]) -> None:
        append_jsonl(self.root / "rows" / f"{self._key(index, name)}.jsonl", {"row": row, "out": _jsonable(out)})

    # ------------------------------------------------------------------ signature

    def check_signature(self, signature: dict[str, Any]) -> None:
        """Record the pipeline's shape on first use; refuse to resume a folder made by a different pipeline."""
        path = self.root / "pipeline.json"
        if path.exists():
            stored = json.loads(path.read_text(encoding="utf-8"))
            if stored != signature:
                raise ArtifactError(f"{path}: this folder was made by another pipeline "
                                    f"({[s['op'] for s in stored.get('steps', [])]}); use a fresh folder")
            return
        atomic_write_text(path, json.dumps(signature, indent=2, sort_keys=True) + "\n")


def _jsonable(rows: list[Row]) -> list[Row]:
    """Rows as they will read back from JSON (tuples become lists, paths strings), so resumed runs compare equal."""
    return json.loads(json.dumps(rows, default=str))
