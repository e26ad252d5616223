"""`worldsmith evolve DATA_DIR`, `--resume RUN` and `evolve tasks RUN` through the CLI with the scripted model."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.evolution.evolve_kit import Player, make_data
from worldsmith.cli import app
from worldsmith.llm.providers.scripted import Script, register_script, unregister_script

pytest.importorskip("chromadb")
runner = CliRunner()


def _cli_args(name: str, tmp_path: Path) -> list[str]:
    sets = [f"llm.default={{\"provider\": \"scripted\", \"model\": \"{name}\"}}", "llm.cache=false",
            f"llm.roles={{\"embed\": {{\"provider\": \"scripted\", \"model\": \"{name}\"}}}}",
            "sandbox.backend=process", "sandbox.preload=[]", f"runs_dir={tmp_path / 'runs'}", f"home={tmp_path / 'home'}"]
    return [a for s in sets for a in ("--set", s)]


@pytest.fixture
def scripted_cli(tmp_path: Path):
    name = f"evolve-cli-{uuid.uuid4().hex[:6]}"
    register_script(name, Script().fallback(Player([("expand", [("deepen", "What is the average sale amount?")])])))
    yield _cli_args(name, tmp_path)
    unregister_script(name)


def test_evolve_then_tasks_then_resume_of_a_finished_run(scripted_cli, tmp_path: Path) -> None:
    data, run = make_data(tmp_path / "data"), tmp_path / "run"
    r = runner.invoke(app, [*scripted_cli, "evolve", str(data), "--steps", "1", "--out", str(run), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["run_dir"] == str(run) and out["summary"]["verified"] == 1
    assert (run / "report.md").is_file() and (run / "config.json").is_file() and (run / "events.jsonl").is_file()
    r = runner.invoke(app, [*scripted_cli, "evolve", "tasks", str(run), "--n", "1", "--samples", "0", "--json"])
    assert r.exit_code == 0, r.output
    assert [o["status"] for o in json.loads(r.stdout)["outcomes"]] == ["written"]
    r = runner.invoke(app, [*scripted_cli, "evolve", "--resume", str(run), "--json"])  # nothing left to do
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["summary"]["nodes"] == 1


def test_usage_errors(scripted_cli, tmp_path: Path) -> None:
    assert runner.invoke(app, [*scripted_cli, "evolve", "run"]).exit_code == 2  # neither DATA_DIR nor --resume
    both = runner.invoke(app, [*scripted_cli, "evolve", str(tmp_path), "--resume", str(tmp_path)])
    assert both.exit_code == 2 and "exactly one" in both.output


def test_the_sample_workspace_is_a_world_data_room_scored_against_its_truth(tmp_path: Path) -> None:
    from tests.evolution.test_evolve_run import WORLD_SCRIPT, world_conclusion

    name = f"evolve-cli-{uuid.uuid4().hex[:6]}"
    register_script(name, Script().fallback(Player([("expand", [("deepen", "Does the discount lower the amount?")])],
                                                   script=WORLD_SCRIPT, conclude=world_conclusion)))
    try:
        r = runner.invoke(app, [*_cli_args(name, tmp_path), "evolve", "--sample", "commercial_growth", "--steps", "1",
                                "--out", str(tmp_path / "run"), "--json"])
    finally:
        unregister_script(name)
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)["summary"]
    assert summary["verified"] == 1 and summary["truth"]["precision"] == 1.0
    assert (tmp_path / "runs" / "sample-worlds" / "commercial_growth-s0" / "contract.json").is_file()


def test_evolve_tasks_that_write_no_task_exit_non_zero_with_json_too(scripted_cli, tmp_path: Path,
                                                                      monkeypatch) -> None:
    import io

    from rich.console import Console

    import worldsmith.commands.evolve as evolve_cmd

    data, run = make_data(tmp_path / "data"), tmp_path / "run"
    assert runner.invoke(app, [*scripted_cli, "evolve", str(data), "--steps", "1", "--out", str(run)]).exit_code == 0
    mute = f"evolve-mute-{uuid.uuid4().hex[:6]}"
    register_script(mute, Script().fallback("I am not sure."))  # no solver, no rubric: every task is dropped
    shown = io.StringIO()
    monkeypatch.setattr(evolve_cmd, "console", Console(file=shown, force_terminal=True, color_system="standard"))
    try:
        for extra in ([], ["--json"]):
            r = runner.invoke(app, [*_cli_args(mute, tmp_path), "evolve", "tasks", str(run), "--n", "1",
                                    "--samples", "0", *extra])
            assert r.exit_code == 1, r.output
    finally:
        unregister_script(mute)
    assert "\x1b[31m0 tasks" in shown.getvalue()  # a failure, in red, not a success in green
    assert [o["status"] for o in json.loads(r.stdout)["outcomes"]] == ["dropped"]
