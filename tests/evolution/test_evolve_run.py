"""The evolution graph with the scripted model: every mode, the review loop's outcomes, the budget, the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.evolution.evolve_kit import Player, make_data, scripted_runtime
from worldsmith.app.evolve import open_graph, run_evolution
from worldsmith.core.evolution_schemas import EvolveBudget, EvolveConfig, NodeRun
from worldsmith.core.store import read_model

pytest.importorskip("chromadb")


def config(steps: int, **kw) -> EvolveConfig:
    return EvolveConfig(budget=EvolveBudget(steps=steps, max_depth=kw.pop("max_depth", 3),
                                            max_nodes=kw.pop("max_nodes", 12)), **kw)


async def test_deepen_search_decompose_and_compose(tmp_path: Path) -> None:
    player = Player([
        ("expand", [("deepen", "What is the total amount over all sales?"),
                    ("search", "Does the memo explain the south region's sales?")]),
        ("expand", [("decompose", "How do totals and averages compare across regions?")]),
        ("compose", "Do the region totals and the memo's promotion tell one story?"),
    ])
    script, rt = scripted_runtime(tmp_path, player)
    seen: list[dict] = []
    run, summary = await run_evolution(rt, make_data(tmp_path / "data"), config=config(3), out=tmp_path / "run",
                                       on_event=seen.append)
    graph = open_graph(run.path)
    nodes = graph.nodes()
    # progress while a node is still running: every agent's start and end, with the node it works on
    agents = [(e["agent"], e["phase"], e.get("node")) for e in seen if e["type"] == "agent"]
    assert agents[:2] == [("profiler", "start", None), ("profiler", "done", None)]
    order = [(e.get("agent"), e.get("phase"), e.get("node")) if e["type"] == "agent" else (e["type"], None, e.get("node"))
             for e in seen]
    assert order.index(("executor", "start", 2)) < order.index(("executor", "done", 2)) \
        < order.index(("validator", "start", 2)) < order.index(("validator", "done", 2)) < order.index(("node", None, 2))
    assert {a for a, _, _ in agents} == {"profiler", "director", "proposer", "decomposer", "executor", "validator"}
    done = [e for e in seen if e["type"] == "agent" and e["phase"] == "done"]
    assert all(e["s"] >= 0 and e["tokens"] > 0 for e in done if e["agent"] != "validator")
    assert sum(1 for e in run.events() if e.get("type") == "agent") == len(agents)  # the run log keeps them
    # every review round's analysis log is on record beside the node (rejected rounds' files are not kept)
    assert "# Analysis log" in (run.path / "nodes" / "2.round1.analysis_log.md").read_text()
    assert [(n.id, n.mode, n.parents, n.status) for n in nodes] == [
        (1, "root", [], "supported"),
        (2, "deepen", [1], "supported"), (3, "search", [1], "supported"),
        (4, "decompose", [3], "supported"), (5, "decompose", [3], "supported"),  # one isolated child per part
        (6, "compose", [4, 5], "supported"),
    ]
    assert nodes[4].depth == 2 and nodes[5].depth == 3 and nodes[1].depends_on == "f1"
    # search: the memo came back from memory and reached the executor's prompt
    search = read_model(run.path / "nodes" / "3.json", NodeRun)
    assert search.retrieved and search.retrieved[0] == "memo_q3.md"
    executor_prompts = [r.text for r in script.requests if "You are a data analyst" in r.messages[0]["content"]]
    assert any("[document memo_q3.md]" in t and "promotion in September" in t for t in executor_prompts)
    # a committed node keeps its script, log, result and generated file; its children inherit the file
    ws = graph  # noqa: F841
    from worldsmith.evolution.workspace import WorkspaceStore, workspace_root

    store = WorkspaceStore(workspace_root(run.path))
    files2 = set(store.manifest(2).files)
    assert {"analyze_node2.py", "analysis_log.md", "execution_result.json", "sources/sales.csv"} <= files2
    assert any(p.startswith("generated/by_region_") for p in files2)
    inherited = set(store.manifest(4).files)
    assert "sources/scripts/analyze_node3.py" in inherited
    assert any(p.startswith("sources/by_region_") for p in inherited)
    # the compose node merged both decompose children (their common sources once)
    merged = set(store.manifest(6).files)
    assert {"sources/scripts/analyze_node4.py", "sources/scripts/analyze_node5.py", "sources/sales.csv"} <= merged
    assert summary.nodes == 5 and summary.verified == 5 and summary.stop.startswith("steps")
    report = (run.path / "report.md").read_text()
    assert "![exploration graph](exploration_graph.png)" in report and "| f6 | 6 | 3 | compose |" in report
    assert "## Budget used" in report and "| director rounds | 3 | 3 |" in report
    assert (run.path / "exploration_graph.png").stat().st_size > 1000
    assert json.loads((run.path / "summary.json").read_text())["by_mode"] == {
        "deepen": 1, "search": 1, "decompose": 2, "compose": 1}


async def test_review_loop_outcomes_and_what_is_kept(tmp_path: Path) -> None:
    player = Player([("expand", [("deepen", "RETRY what is the total amount?"),
                                 ("deepen", "REJECT is the mean amount above the median?"),
                                 ("deepen", "REVISE how much was sold overall?")])])
    _, rt = scripted_runtime(tmp_path, player)
    cfg = config(1, directions=3)
    run, summary = await run_evolution(rt, make_data(tmp_path / "data"), config=cfg, out=tmp_path / "run")
    nodes = {n.id: n for n in open_graph(run.path).nodes()}
    assert [nodes[i].status for i in (2, 3, 4)] == ["supported", "unsupported", "revised"]
    retry = read_model(run.path / "nodes" / "2.json", NodeRun)
    assert [(r.round, r.kept) for r in retry.review.rounds] == [(1, False), (2, True)]
    rejected = read_model(run.path / "nodes" / "3.json", NodeRun)
    assert [r.kept for r in rejected.review.rounds] == [False, False] and not rejected.review.accepted
    assert nodes[3].snapshot is None and nodes[3].conclusion == ""  # the rejected update was discarded
    # ... but the record of why stays with the run: both rounds' analysis logs, outside the workspace
    logs = sorted(p.name for p in (run.path / "nodes").glob("3.round*.analysis_log.md"))
    assert logs == ["3.round1.analysis_log.md", "3.round2.analysis_log.md"]
    assert nodes[4].conclusion == "The total amount is 150.0 (mean 30.0, median 30.0)."
    assert summary.status_counts == {"supported": 1, "revised": 1, "unsupported": 1}
    assert summary.verified == 2 and summary.tokens > 0


QUESTIONS = ["Which region has the largest total amount?", "How many units does each sale carry on average?",
             "Is there a sale whose amount is an outlier?", "Do units and amount move together?",
             "What share of revenue comes from the east?", "How concentrated are sales by customer region?"]


async def test_budget_stops_at_max_nodes_and_keeps_max_depth(tmp_path: Path) -> None:
    player = Player([("expand", [("deepen", q)]) for q in QUESTIONS])
    _, rt = scripted_runtime(tmp_path, player)
    run, summary = await run_evolution(rt, make_data(tmp_path / "data"), config=config(6, max_depth=2, max_nodes=4),
                                       out=tmp_path / "run")
    nodes = open_graph(run.path).nodes()
    assert max(n.depth for n in nodes) == 2 and summary.nodes == 4
    assert summary.stop == "nodes: 4 of 4 made" and summary.steps == 4


async def test_resume_after_a_kill_mid_round_makes_no_duplicate_nodes(tmp_path: Path) -> None:
    import asyncio

    from worldsmith.evolution.workspace.graph import ExplorationGraph

    player = Player([("expand", [("deepen", QUESTIONS[0]), ("deepen", QUESTIONS[1])]),
                     ("expand", [("deepen", QUESTIONS[2])])])
    _script, rt = scripted_runtime(tmp_path, player, delay_s=0.05)
    run_dir = tmp_path / "run"
    task = asyncio.create_task(run_evolution(rt, make_data(tmp_path / "data"), config=config(2, concurrency=1),
                                             out=run_dir))
    db = run_dir / "workspace" / "graph.sqlite"
    for _ in range(1200):  # kill while node 3 (the round's second node) is running
        await asyncio.sleep(0.05)
        if db.is_file() and any(n.id == 3 and n.status == "running" for n in ExplorationGraph(db).nodes()):
            break
    else:
        pytest.fail("node 3 never started")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    before = {n.id: n.status for n in ExplorationGraph(db).nodes()}
    assert before == {1: "supported", 2: "supported", 3: "running"}
    directed = player.round

    run, summary = await run_evolution(rt, resume=run_dir)
    nodes = ExplorationGraph(db).nodes()
    assert [(n.id, n.parents, n.status) for n in nodes] == [(1, [], "supported"), (2, [1], "supported"),
                                                            (3, [1], "supported"), (4, [3], "supported")]
    assert len({n.goal for n in nodes}) == len(nodes)  # no node was proposed twice
    assert player.round == directed + 1  # the killed round was not planned again: only round 2 was
    events = [e["event"] for e in run.events()]
    assert events.count("run_resumed") == 1 and events[-1] == "run_finished"
    assert summary.nodes == 3 and summary.verified == 3


async def test_ask_routes_a_folder_and_a_task_count_to_evolution(tmp_path: Path) -> None:
    from worldsmith.agents.router import heuristic_intent
    from worldsmith.app.actions import dispatch
    from worldsmith.graphs.router import make_plan

    data = make_data(tmp_path / "data")
    intent = heuristic_intent(f"make 2 tasks by exploring {data}")
    assert (intent.action, intent.count, intent.files) == ("make_tasks", 2, [str(data)])
    plan = make_plan(intent, None)
    assert plan["runnable"] and plan["command"] == f"worldsmith evolve {data} --steps 2 --max-nodes 2 --tasks 2"
    player = Player([("expand", [("deepen", QUESTIONS[0]), ("deepen", QUESTIONS[1])])])
    _, rt = scripted_runtime(tmp_path, player)
    result = await dispatch(intent, plan, rt)
    assert result["status"] == "ok" and result["verified_findings"] == 2 and len(result["tasks"]) == 2
    assert Path(result["report"]).is_file() and Path(result["tasks_dir"], "index.jsonl").is_file()


WORLD_SCRIPT = ("import pandas as pd\ndf = pd.read_csv('orders_2023.csv')\n"
                "print(f\"RESULT corr = {{df.discount_pct.corr(df.amount):.3f}}\")\n")


def world_conclusion(report_prompt: str) -> str:
    import re

    corr = re.search(r"RESULT corr = (\S+)", report_prompt).group(1)
    return f"Order amount falls as discount_pct rises (correlation {corr})."


async def test_a_world_folder_evolves_its_data_room_and_is_scored_against_its_truth(tmp_path: Path) -> None:
    from worldsmith.evolution.worlds import build_world, load_template

    world = tmp_path / "world"
    build_world(load_template("commercial_growth", rows=1000), seed=3, out_dir=world, produced_by="test")
    player = Player([("expand", [("deepen", "Does the discount lower the order amount?")])], script=WORLD_SCRIPT,
                    conclude=world_conclusion)
    _, rt = scripted_runtime(tmp_path, player)
    run, summary = await run_evolution(rt, world, config=config(1), out=tmp_path / "run")
    from worldsmith.evolution.workspace import WorkspaceStore, workspace_root

    root = WorkspaceStore(workspace_root(run.path)).manifest(1).files
    assert "sources/orders_2023.csv" in root and not any("contract" in p or ".truth" in p for p in root)
    t = summary.truth
    assert summary.verified == 1 and (t.correct, t.wrong, t.precision) == (1, 0, 1.0)
    assert t.rediscovered == ["discount_pct->amount"] and t.planted > 1
    report = (run.path / "report.md").read_text()
    assert "## Against the world's canonical truth" in report and "Precision 100%" in report


_KILLED_RUN = """
import asyncio, sys
from pathlib import Path
from tests.evolution.evolve_kit import Player, make_data, scripted_runtime
from tests.evolution.test_evolve_run import QUESTIONS, config
from worldsmith.app.evolve import run_evolution

tmp = Path(sys.argv[1])
player = Player([("expand", [("deepen", QUESTIONS[0]), ("deepen", QUESTIONS[1])]), ("expand", [("deepen", QUESTIONS[2])])])
_, rt = scripted_runtime(tmp / "child", player, delay_s=0.05)
asyncio.run(run_evolution(rt, make_data(tmp / "data"), config=config(2, concurrency=1), out=tmp / "run"))
"""


async def test_resume_after_sigkill_of_the_process(tmp_path: Path) -> None:
    """A hard kill (no cleanup at all) mid-round: the checkpoint and the store are enough to finish the run."""
    import asyncio
    import os
    import signal
    import subprocess
    import sys

    from worldsmith.evolution.workspace.graph import ExplorationGraph

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_RUN, str(tmp_path)], cwd=root, env=env,  # noqa: ASYNC220 (starts, never waits)
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = tmp_path / "run" / "workspace" / "graph.sqlite"
    try:
        for _ in range(2400):
            await asyncio.sleep(0.05)
            if db.is_file() and any(n.id == 3 and n.status == "running" for n in ExplorationGraph(db).nodes()):
                break
        else:
            pytest.fail("node 3 never started")
    finally:
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.wait)
    assert {n.id: n.status for n in ExplorationGraph(db).nodes()} == {1: "supported", 2: "supported", 3: "running"}

    player = Player([("expand", [("deepen", QUESTIONS[2])])])  # the killed process had planned round 1 already
    _, rt = scripted_runtime(tmp_path / "parent", player)
    _, summary = await run_evolution(rt, resume=tmp_path / "run")
    nodes = ExplorationGraph(db).nodes()
    assert [(n.id, n.parents, n.status) for n in nodes] == [(1, [], "supported"), (2, [1], "supported"),
                                                            (3, [1], "supported"), (4, [3], "supported")]
    assert len({n.goal for n in nodes}) == 4 and player.round == 1 and summary.verified == 3
