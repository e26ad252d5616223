"""The world graph end to end with a scripted teacher: world → audit → tasks → packages with verified solutions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from worldsmith.core.taskpkg import TaskCollection
from worldsmith.graphs.world import build_world_graph
from worldsmith.core.grading import grade

REQUEST = ("I'm preparing next quarter's pricing review and need a clear picture of what moves our numbers. "
           "Please dig into the account data and tell me what you find, with the evidence.")


async def test_world_graph_writes_verified_tasks(scripted, tmp_path: Path) -> None:
    script, make_rt = scripted
    script.on("stakeholder", json.dumps({"request": REQUEST}), role="teacher")
    rt = make_rt()
    out = tmp_path / "world"
    state = {"domain": "customer_pricing", "seed": 3, "rows": 2000, "out_dir": str(out), "make_tasks": True,
             "use_llm": True, "max_tasks": 4, "tasks_dir": str(tmp_path / "tasks"), "contract_source": "template"}
    events, final = [], {}
    async for mode, chunk in build_world_graph().astream(state, context=rt, stream_mode=["custom", "values"]):
        (events.append(chunk) if mode == "custom" and chunk["type"] == "world" else final.update(chunk) if mode == "values" else None)
    await rt.sessions.close_all()
    assert [e["step"] for e in events][:5] == ["persona", "skeleton", "contract", "engine", "audit"]
    prov = final["provenance"]
    assert prov["skeleton"].startswith("template:") and prov["contract"].startswith("template:")
    assert prov["world"] == "engine"
    coll = TaskCollection(tmp_path / "tasks")
    tasks = coll.tasks()
    assert 1 <= len(tasks) <= 4 and final["tasks"] == [t.id for t in tasks]
    for task in tasks:
        pkg = tmp_path / "tasks" / "tasks" / task.id
        assert (pkg / "solution" / "solve.py").is_file()
        assert task.provenance.world_id == "customer_pricing_saas-s3"
        # a closed-form task's fallback is the template about its one quantity (`template:request:quantity`)
        assert any(p.startswith(("llm:", "template:request")) for p in task.provenance.produced_by)
        assert not (pkg / "environment" / ".truth").exists() and not (pkg / "environment" / "WORLD.md").exists()
        oracle = json.loads((tmp_path / "tasks" / "oracle" / f"{task.id}.json").read_text())
        assert oracle["label"] == "oracle"
        if task.kind == "closed_form":
            # the scripted request names no target: the validator refuses it, the template stands in, and the
            # reason is recorded (before, any request mentioning 'the' passed the target check)
            if any(p.startswith("llm:") for p in task.provenance.produced_by):
                assert task.instruction.startswith(REQUEST)
            else:
                assert task.metadata["request_rejected"] and not task.instruction.startswith(REQUEST)
                assert "template:request:quantity" in task.provenance.produced_by
                # the stand-in asks for exactly the graded quantity, by its measure
                measure = task.answers[0].spec.measure.variable.replace("_", " ")
                assert measure in task.instruction.split("\n\n")[0]
            assert f"@{task.answers[0].name}[" in task.instruction
            # the oracle works as the analyst does: short cells a turn (each loaded system printed, every cell
            # ran), its last cell printing the graded value, then the answer
            steps = oracle["steps"]
            assert len(steps) >= 4 and [s["action"]["kind"] for s in steps][-1] == "answer"
            codes = [s["action"]["content"] for s in steps[:-1]]
            assert all("Traceback" not in s["observation"] for s in steps[:-1])
            assert sum(".shape)" in c for c in codes) >= 1 and f"@{task.answers[0].name}[" in steps[-2]["observation"]
            assert max(len(c) for c in codes) < 2500  # the one script it replaces is ~10,000 characters
            # the shipped reference solution, run from the package's environment, passes the shipped grader
            run = subprocess.run([sys.executable, str(pkg / "solution" / "solve.py")], cwd=pkg / "environment",
                                 capture_output=True, text=True, timeout=120)
            assert run.returncode == 0, run.stderr
            expected = json.loads((pkg / "tests" / "expected.json").read_text())
            assert grade(expected, run.stdout)["passed"], run.stdout[-500:]
        else:
            sections = {c.section for c in task.rubric.criteria}
            assert {"computation", "insight"} <= sections
            assert any(c.polarity == "-" for c in task.rubric.criteria) or len(task.rubric.criteria) >= 2
