"""World task writing killed with kill -9 while verifying reference solutions resumes to the same tasks, once each."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.worldtasks.tasks_script import main
from worldsmith.core.storage import StepStorage
from worldsmith.core.store import read_jsonl
from worldsmith.core.taskpkg import TaskCollection

ROOT = Path(__file__).resolve().parents[2]


def test_task_writing_resumes_after_kill_9(world: Path, tmp_path: Path) -> None:
    whole, _ = asyncio.run(main(world, tmp_path / "t1", tmp_path / "p1", tmp_path / "runs"))
    assert whole

    storage = tmp_path / "p2"
    proc = subprocess.Popen([sys.executable, "-m", "tests.worldtasks.tasks_script", str(world), str(tmp_path / "t2"),
                             str(storage), str(tmp_path / "runs")], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    ledger = storage / "rows" / "03-verify_solutions.jsonl"
    t0 = time.monotonic()
    while not read_jsonl(ledger):
        assert proc.poll() is None, "the task writer finished before it could be killed"
        assert time.monotonic() - t0 < 120
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not StepStorage(storage).is_done(3, "verify_solutions")  # killed inside the verification step

    resumed, _ = asyncio.run(main(world, tmp_path / "t2", storage, tmp_path / "runs"))

    assert resumed == whole
    ids = [e.id for e in TaskCollection(tmp_path / "t2").entries()]
    assert sorted(ids) == sorted(whole) and len(ids) == len(set(ids))
    assert sorted(p.name for p in (tmp_path / "t2" / "tasks").iterdir()) == sorted(whole)
