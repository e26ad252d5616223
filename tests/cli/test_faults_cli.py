"""Operator-facing fault handling: eval's exit codes and status, stopping at once on a rejected key, resuming with
--retry-errors, and `llm ping`'s JSON error object and separate load time. Real analyst graph and sandbox, against
the fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fakes.fake_openai import Action, FakeOpenAI, fake_openai  # noqa: F401  (fixture)
from tests.fakes.tiny_dabench import analyst_responder, write_tiny_dabench
from worldsmith.cli import app

runner = CliRunner()


@pytest.fixture
def fake_env(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeOpenAI:
    """Every role talks to the fake server; no retries (so a 500 fails its item) unless a test sets them."""
    fake_openai.responder = analyst_responder()
    for key, value in {"PROVIDER": "openai", "MODEL": "fake-model", "BASE_URL": fake_openai.base_url,
                       "MAX_RETRIES": "0", "BACKOFF_BASE_S": "0.01", "TIMEOUT_S": "5"}.items():
        monkeypatch.setenv(f"WORLDSMITH_LLM__DEFAULT__{key}", value)
    monkeypatch.setenv("WORLDSMITH_LLM__CACHE", "false")
    monkeypatch.setenv("WORLDSMITH_RUNS_DIR", str(tmp_path / "runs"))
    return fake_openai


def _events(run_dir: str) -> list[dict]:
    return [json.loads(line) for line in (Path(run_dir) / "events.jsonl").read_text().splitlines()]


def test_eval_of_10_tasks_against_a_rejected_key_stops_at_once(fake_env: FakeOpenAI, tmp_path: Path) -> None:
    bench = write_tiny_dabench(tmp_path / "bench", n=10)
    fake_env.schedule = lambda n: Action.unauthorized()
    t0 = time.monotonic()
    r = runner.invoke(app, ["eval", "--tasks", str(bench)])
    assert r.exit_code == 1, r.output
    assert fake_env.request_count <= 2  # not one failing request per task
    assert time.monotonic() - t0 < 30
    assert "HTTP 401" in r.output and "placeholder 'EMPTY'" in r.output and "--resume" in r.output
    assert "Traceback" not in r.output
    run = next((tmp_path / "runs").iterdir())
    events = _events(str(run))
    stopped = [e for e in events if e["event"] == "eval_stopped"]
    assert len(stopped) == 1 and stopped[0]["kind"] == "auth" and stopped[0]["done"] == 0
    assert [e["status"] for e in events if e["event"] == "run_finished"] == ["failed"]
    assert not (run / "trajectories").exists()  # nothing recorded as solved: a resume solves every task

    fake_env.reset()
    fake_env.schedule = lambda n: Action.unauthorized()
    r = runner.invoke(app, ["eval", "--tasks", str(bench), "--json"])
    assert r.exit_code == 1 and fake_env.request_count <= 2
    out = json.loads(r.stdout)
    assert (out["status"], out["stopped"], out["kind"]) == ("failed", True, "auth") and "HTTP 401" in out["error"]


def test_eval_against_an_unreachable_endpoint_stops_at_once(fake_env: FakeOpenAI, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("WORLDSMITH_LLM__DEFAULT__BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("WORLDSMITH_LLM__DEFAULT__MAX_RETRIES", "1")
    bench = write_tiny_dabench(tmp_path / "bench", n=10)
    t0 = time.monotonic()
    r = runner.invoke(app, ["eval", "--tasks", str(bench), "--json"])
    assert r.exit_code == 1 and time.monotonic() - t0 < 30
    out = json.loads(r.stdout)
    assert out["kind"] == "unreachable" and "cannot connect" in out["error"] and f"127.0.0.1:{port}" in out["error"]
    run = next((tmp_path / "runs").iterdir())
    assert [e["kind"] for e in _events(str(run)) if e["event"] == "eval_stopped"] == ["unreachable"]
    faults = [e["roles"] for e in _events(str(run)) if e["event"] == "llm_faults"]
    assert faults == [{"agent": {"retried": {"connection": 1}, "failed": {"connection": 1}}}]


def test_exit_codes_and_status_ok_partial_failed(fake_env: FakeOpenAI, tmp_path: Path) -> None:
    bench = write_tiny_dabench(tmp_path / "bench", n=3)
    # tasks run one at a time, two requests each: request 2 is the first turn of the second task
    fake_env.schedule = lambda n: Action.server_error(500) if n == 2 else None
    r = runner.invoke(app, ["eval", "--tasks", str(bench), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["status"] == "partial" and out["counts"] == {"trajectories": 3, "failed": 1, "completed": 2}
    assert out["overall"]["accuracy_by_question"] == pytest.approx(2 / 3)

    fake_env.reset()
    fake_env.schedule = lambda n: Action.server_error(500)
    r = runner.invoke(app, ["eval", "--tasks", str(bench)])
    assert r.exit_code == 1, r.output
    assert "failed: 3 of 3 trajectories failed" in r.output
    r = runner.invoke(app, ["eval", "--tasks", str(bench), "--json"])
    assert r.exit_code == 1 and json.loads(r.output)["status"] == "failed"

    fake_env.reset()
    fake_env.schedule = None
    r = runner.invoke(app, ["eval", "--tasks", str(bench), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["status"] == "ok"


def test_a_partial_summary_line_says_how_many_failed(fake_env: FakeOpenAI, tmp_path: Path) -> None:
    bench = write_tiny_dabench(tmp_path / "bench", n=2)
    fake_env.schedule = lambda n: Action.server_error(500) if n == 0 else None
    r = runner.invoke(app, ["eval", "--tasks", str(bench)])
    assert r.exit_code == 0, r.output
    assert "partial: 1 of 2 trajectories failed" in r.output


def test_resume_with_retry_errors_re_solves_only_the_failed_items(fake_env: FakeOpenAI, tmp_path: Path) -> None:
    bench = write_tiny_dabench(tmp_path / "bench", n=3)
    fake_env.schedule = lambda n: Action.invalid_json() if n == 2 else None  # the second task's first turn
    first = json.loads(runner.invoke(app, ["eval", "--tasks", str(bench), "--json"]).output)
    assert first["status"] == "partial" and first["llm_faults"]["agent"]["failed"] == {"invalid_body": 1}
    run = first["run_dir"]

    fake_env.reset()
    fake_env.schedule = None
    kept = json.loads(runner.invoke(app, ["eval", "--tasks", str(bench), "--resume", run, "--json"]).output)
    assert fake_env.request_count == 0 and kept["status"] == "partial"  # default: failures are kept

    r = runner.invoke(app, ["eval", "--tasks", str(bench), "--resume", run, "--retry-errors", "--json"])
    assert r.exit_code == 0, r.output
    again = json.loads(r.output)
    assert fake_env.request_count == 2  # one task, code turn + answer turn
    assert "where k == 1?" in fake_env.requests[0]["messages"][-1]["content"]  # the one that had failed
    assert again["status"] == "ok" and again["overall"]["accuracy_by_question"] == 1.0


def test_the_retry_errors_setting_is_the_default_for_resume(fake_env: FakeOpenAI, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    bench = write_tiny_dabench(tmp_path / "bench", n=2)
    fake_env.schedule = lambda n: Action.server_error(500) if n == 0 else None
    run = json.loads(runner.invoke(app, ["eval", "--tasks", str(bench), "--json"]).output)["run_dir"]
    fake_env.reset()
    fake_env.schedule = None
    monkeypatch.setenv("WORLDSMITH_EVAL__RETRY_ERRORS", "true")
    out = json.loads(runner.invoke(app, ["eval", "--tasks", str(bench), "--resume", run, "--json"]).output)
    assert out["status"] == "ok" and fake_env.request_count == 2
    fake_env.reset()
    r = runner.invoke(app, ["eval", "--tasks", str(bench), "--resume", run, "--keep-errors", "--json"])
    assert r.exit_code == 0 and fake_env.request_count == 0


def test_retried_faults_are_in_the_events_and_the_report(fake_env: FakeOpenAI, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLDSMITH_LLM__DEFAULT__MAX_RETRIES", "3")
    bench = write_tiny_dabench(tmp_path / "bench", n=2)
    fake_env.enqueue(Action.rate_limit(0.01), Action.invalid_json(), Action.empty())
    r = runner.invoke(app, ["eval", "--tasks", str(bench), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    expected = {"retried": {"invalid_body": 1, "rate_limit": 1}, "empty_completions": 1}
    assert out["status"] == "ok" and out["llm_faults"] == {"agent": expected}
    faults = [e for e in _events(out["run_dir"]) if e["event"] == "llm_faults"]
    assert [f["roles"] for f in faults] == [{"agent": expected}]
    report = Path(out["report"]).read_text()
    assert "## LLM faults" in report and "| agent | invalid_body 1, rate_limit 1 | 0 | 1 |" in report
    traj = json.loads(next((Path(out["run_dir"]) / "trajectories").glob("*/0.json")).read_text())
    assert traj["steps"][0]["void"] and traj["steps"][0]["void_reason"] == "empty completion"


def test_ping_json_prints_an_error_object_on_failure(fake_env: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLDSMITH_LLM__DEFAULT__API_KEY", "sk-wrong")
    fake_env.enqueue(Action.unauthorized())
    r = runner.invoke(app, ["llm", "ping", "--json"])
    assert r.exit_code == 1
    out = json.loads(r.stdout)
    assert out["ok"] is False and out["role"] == "agent" and out["kind"] == "auth"
    assert "HTTP 401" in out["error"] and "WORLDSMITH_LLM__DEFAULT__API_KEY" in out["error"]
    assert "sk-wrong" not in r.output

    fake_env.enqueue(*[Action.invalid_json("<html>oops</html>")] * 3)
    monkeypatch.setenv("WORLDSMITH_LLM__DEFAULT__MAX_RETRIES", "2")
    r = runner.invoke(app, ["llm", "ping", "--json", "--role", "judge"])
    assert r.exit_code == 1
    out = json.loads(r.stdout)
    assert (out["ok"], out["role"], out["kind"]) == (False, "judge", "invalid_body")
    assert "<html>oops</html>" in out["error"] and "role 'judge'" in out["error"]


def test_ping_reports_load_time_apart_from_latency(fake_env: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    from worldsmith.llm.providers.openai_compat import OpenAIProvider

    async def slow_load(self, role: str) -> float:  # stands for a lazily loaded local model
        await asyncio.sleep(0.5)
        return 0.5

    monkeypatch.setattr(OpenAIProvider, "aload", slow_load)
    fake_env.enqueue(Action.reply('{"greeting": "hi", "answer": 5}'))
    r = runner.invoke(app, ["llm", "ping", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["ok"] is True and out["load_s"] == 0.5
    assert out["latency_s"] < 0.4  # the request alone, not the load
    assert out["tokens_per_s"] == pytest.approx(out["completion_tokens"] / out["latency_s"], rel=0.05)
    fake_env.enqueue(Action.reply('{"greeting": "hi", "answer": 5}'))
    r = runner.invoke(app, ["llm", "ping"])
    assert r.exit_code == 0 and "load 0.50 s" in r.output and "latency" in r.output


def test_ping_keeps_a_long_model_name_on_one_line(fake_env: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    """A student GGUF is named by its path, often wider than the terminal: it must stay copyable, not be folded."""
    name = "/work/runs/student-qwen05-lora-genv2/exports/" + "sft-checkpoint-step-0024-" * 4 + "q8_0.gguf"
    monkeypatch.setenv("WORLDSMITH_LLM__DEFAULT__MODEL", name)
    fake_env.models.add(name)
    fake_env.enqueue(Action.reply('{"greeting": "hi", "answer": 5}'))
    r = runner.invoke(app, ["llm", "ping"], terminal_width=60)
    assert r.exit_code == 0, r.output
    assert f"openai:{name} …" in r.output  # the request line, whole
    assert len([line for line in r.output.splitlines() if name in line]) == 2  # and the answer line
