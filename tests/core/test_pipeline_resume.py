"""A pipeline killed with kill -9 in the middle of a step resumes with every row exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.core.pipeline_kit import doubling_pipeline
from worldsmith.core.storage import StepStorage
from worldsmith.core.store import read_jsonl

ROOT = Path(__file__).resolve().parents[2]


def _wait_for(cond, timeout: float = 60.0) -> None:
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, "timed out waiting for the pipeline"
        time.sleep(0.01)


def test_kill_9_mid_step_then_resume_keeps_every_row_exactly_once(tmp_path: Path) -> None:
    storage_dir, n = tmp_path / "run", 40
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tests.core.pipeline_kit", str(storage_dir), str(n), "0.05"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    ledger = storage_dir / "rows" / "01-test_double.jsonl"
    _wait_for(lambda: len(read_jsonl(ledger)) >= 6)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {r["row"] for r in read_jsonl(ledger)}
    storage = StepStorage(storage_dir)
    assert not storage.is_done(1, "test_double") and len(before) < n  # really killed mid-step

    rows = doubling_pipeline(log=tmp_path / "calls.log").resume(storage)

    assert rows == [{"n": i, "twice": 2 * i, "plus_one": 2 * i + 1} for i in range(n)]
    calls = [int(x) for x in (tmp_path / "calls.log").read_text().split()]
    assert sorted(set(calls)) == list(range(n))
    assert all(calls.count(i) == 1 for i in before)  # rows recorded before the kill were not computed again
    assert not (storage_dir / "rows" / "01-test_double.jsonl").exists()  # the row ledger is folded into the step
    assert [name for _, name in StepStorage(storage_dir).finished()] == ["input", "test_double", "test_add_one"]
