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


async def test_world_building_resumes_after_kill_9(scripted, tmp_path: Path) -> None:
    from worldsmith.app.world import build_world_run, resume_world_run
    from worldsmith.core.runs import RunDir
    from worldsmith.core.store import hash_tree

    runs, out = tmp_path / "runs", tmp_path / "w"
    proc = subprocess.Popen([sys.executable, "-m", "worldsmith.cli", "--set", f"runs_dir={runs}", "world", "new",
                             str(out), "--domain", "education", "--seed", "2", "--rows", "20000", "--json"],
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL)
    t0 = time.monotonic()
    while not list(runs.glob("*/world/steps/03-write_contract.jsonl")):
        assert proc.poll() is None, "the world build finished before it could be killed"
        assert time.monotonic() - t0 < 120
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    [run_dir] = runs.iterdir()
    assert not StepStorage(run_dir / "world").is_done(4, "build_world")  # killed before the engine finished

    _, make_rt = scripted
    _, final = await resume_world_run(make_rt(), run_dir)
    _, again = await build_world_run(make_rt(), {"domain": "education", "seed": 2, "rows": 20000,
                                                 "out_dir": str(tmp_path / "w2")})

    assert final["world"]["world_id"] == again["world"]["world_id"] and final["provenance"] == again["provenance"]
    assert hash_tree(out / "data")[0] == hash_tree(tmp_path / "w2" / "data")[0]  # same bytes as an unbroken build
    assert [n for _, n in StepStorage(run_dir / "world").finished()] == [
        "input", "pick_persona", "skeleton_from_template", "write_contract", "build_world"]
    events = [e["event"] for e in RunDir(run_dir).events()]
    assert events.count("run_resumed") == 1 and events[-1] == "run_finished"
