"""The graphs served by `langgraph dev` (langgraph.json) and driven through the LangGraph SDK."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.graphs.conftest import ANSWER_TURN, CODE_TURN

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path: Path):
    cli = Path(sys.executable).parent / "langgraph"
    if not cli.exists() and not shutil.which("langgraph"):
        pytest.skip("langgraph-cli is not installed (pip install 'worldsmith[dev]')")
    port = _free_port()
    env = dict(os.environ,
               WORLDSMITH_LLM__DEFAULT__PROVIDER="scripted", WORLDSMITH_LLM__DEFAULT__MODEL="server-test",
               WORLDSMITH_LLM__DEFAULT__EXTRA_BODY=json.dumps({"rules": [
                   {"pattern": "<interpreter>", "response": ANSWER_TURN, "scope": "last_user"},
                   {"pattern": ".", "response": CODE_TURN}]}),
               WORLDSMITH_LLM__CACHE="false", WORLDSMITH_RUNS_DIR=str(tmp_path / "runs"),
               LANGSMITH_TRACING="false", LANGGRAPH_CLI_NO_ANALYTICS="1")
    log = open(tmp_path / "server.log", "w")
    # --allow-blocking: starting a sandbox makes brief synchronous filesystem calls (uid lease, chown of the
    # workspace) that the dev server's blocking detector would otherwise turn into errors.
    proc = subprocess.Popen([str(cli) if cli.exists() else "langgraph", "dev", "--no-browser", "--no-reload", "--allow-blocking",
                             "--host", "127.0.0.1", "--port", str(port), "--config", str(ROOT / "langgraph.json")],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    import httpx

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"langgraph dev exited: {(tmp_path / 'server.log').read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("langgraph dev did not come up within 90 s")
    yield url
    os.killpg(proc.pid, 15)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
    log.close()


async def test_analyst_through_langgraph_sdk(server: str, tmp_path: Path) -> None:
    from langgraph_sdk import get_client

    csv = tmp_path / "sales.csv"
    csv.write_text("region,amount\nnorth,10\nsouth,20\neast,30\n")
    client = get_client(url=server)
    assistants = await client.assistants.search()
    assert {"analyst", "router", "world"} <= {a["graph_id"] for a in assistants}
    thread = await client.threads.create()
    result = await client.runs.wait(thread["thread_id"], "analyst", input={
        "question": "What is the mean amount? Answer as @mean_amount[value].", "files": [str(csv)]})
    traj = result["trajectory"]
    assert traj["status"] == "answered"
    assert "20.0" in traj["steps"][0]["observation"]
    assert "@mean_amount[20.0]" in traj["final_answer"]
    # the server checkpointed the thread: its state is readable by id
    state = await client.threads.get_state(thread["thread_id"])
    assert len(state["values"]["steps"]) == 2
    # the router runs its plan on the server too: the application's runtime carries the actions
    routed = await client.runs.wait(None, "router", input={"request": f"What is the mean amount in {csv}?"})
    assert routed["intent"]["action"] == "answer_question" and routed["plan"]["runnable"]
    assert routed["result"]["status"] == "answered" and "@mean_amount[20.0]" in routed["result"]["answer"]
