"""Run directories: every command that does work leaves `runs/<stamp>-<kind>/` with

- `config.json`  the effective configuration (secrets masked),
- `events.jsonl` one JSON event per line (start, progress, errors, end), appended and fsynced,
- `report.md`    a human-readable report written at the end (and rewritten as results arrive).

Re-opening an existing run directory (`RunDir.open`) continues its event log, which is how a killed
run resumes: pipelines consult their StepLedger (`steps.jsonl`) inside the same folder.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from worldsmith.core.store import StepLedger, append_jsonl, atomic_write_text, read_jsonl, remove_stale_temps


BatchStatus = Literal["ok", "partial", "failed"]


def batch_status(failed: int, total: int) -> BatchStatus:
    """A batch's outcome from its item counts: 'failed' when every item failed (the command exits 1),
    'partial' when some did, 'ok' when none did. An item that ran and was graded wrong has not failed."""
    if total > 0 and failed >= total:
        return "failed"
    return "partial" if failed > 0 else "ok"


class RunDir:
    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self.ledger = StepLedger(path / "steps.jsonl")
        self._t0 = time.monotonic()

    @classmethod
    def create(cls, kind: str, base: str | os.PathLike[str], config: dict[str, Any] | None = None,
               name: str | None = None) -> RunDir:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        path = Path(base) / (name or f"{stamp}-{kind}-{secrets.token_hex(2)}")
        path.mkdir(parents=True, exist_ok=True)
        run = cls(path)
        if config is not None:
            atomic_write_text(path / "config.json", json.dumps(config, indent=2, default=str) + "\n")
        run.event("run_started", kind=kind, pid=os.getpid())
        return run

    @classmethod
    def create_at(cls, kind: str, runs_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None,
                  config: dict[str, Any] | None = None) -> RunDir:
        """A new run directory: `out` when the user named one (refused if it already holds a run), else a stamped
        folder under `runs_dir`."""
        if out is None:
            return cls.create(kind, runs_dir, config=config)
        out = Path(out)
        if (out / "events.jsonl").exists():
            raise FileExistsError(f"{out}: already a run directory; give a new --out folder")
        return cls.create(kind, out.parent, config=config, name=out.name)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> RunDir:
        path = Path(path)
        if not (path / "events.jsonl").exists():
            raise FileNotFoundError(f"{path}: not a run directory (no events.jsonl)")
        run = cls(path)
        stale = remove_stale_temps(path)  # a killed run's half-written files; their work is redone on resume
        run.event("run_resumed", pid=os.getpid(), stale_temps_removed=len(stale))
        return run

    def event(self, kind: str, /, **data: Any) -> None:  # positional-only: data may carry its own "kind"
        rec = {"ts": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), "event": kind, **data}
        append_jsonl(self.path / "events.jsonl", rec, lock=self._lock)

    def events(self) -> list[dict[str, Any]]:
        return read_jsonl(self.path / "events.jsonl")

    def write_report(self, markdown: str) -> Path:
        return atomic_write_text(self.path / "report.md", markdown.rstrip() + "\n")

    def write_json(self, name: str, obj: Any) -> Path:
        return atomic_write_text(self.path / name, json.dumps(obj, indent=2, default=str) + "\n")

    def finish(self, status: str = "ok", **summary: Any) -> None:
        self.event("run_finished", status=status, elapsed_s=round(time.monotonic() - self._t0, 3), **summary)
