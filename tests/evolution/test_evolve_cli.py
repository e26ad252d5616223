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


@pytest.fixture
def scripted_cli(tmp_path: Path):
    name = f"evolve-cli-{uuid.uuid4().hex[:6]}"
    register_script(name, Script().fallback(Player([("expand", [("deepen", "What is the average sale amount?")])])))
    sets = [f"llm.default={{\"provider\": \"scripted\", \"model\": \"{name}\"}}", "llm.cache=false",
            f"llm.roles={{\"embed\": {{\"provider\": \"scripted\", \"model\": \"{name}\"}}}}",
            "sandbox.backend=process", "sandbox.preload=[]", f"runs_dir={tmp_path / 'runs'}", f"home={tmp_path / 'home'}"]
    yield [a for s in sets for a in ("--set", s)]
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
    assert both.exit_code == 2 and "not both" in both.output
