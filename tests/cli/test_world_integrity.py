"""`world new|audit|tasks` as an operator meets them on a world that was re-run, altered or replaced: the real
figures, refusals that name the file and a fix, and fixes that name flags the command really has."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worldsmith.cli import app
from worldsmith.evolution.worlds import verify_manifest

runner = CliRunner()


def text(output: str) -> str:
    """Console output with the terminal's line wrapping undone."""
    return " ".join(output.split())
NEW = ["world", "new", "--domain", "education", "--seed", "1", "--rows", "500"]


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Run directories under tmp_path; a scripted model that no template world build ever calls."""
    monkeypatch.setenv("WORLDSMITH_LLM__DEFAULT__PROVIDER", "scripted")
    monkeypatch.setenv("WORLDSMITH_LLM__DEFAULT__MODEL", "cli-test")
    monkeypatch.setenv("WORLDSMITH_LLM__CACHE", "false")
    monkeypatch.setenv("WORLDSMITH_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path / "runs"


@cache
def flags_of(command: tuple[str, ...]) -> frozenset[str]:
    """The options a command lists in its --help (first column of the Options panel)."""
    out = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "120"}).output
    found = set()
    for line in out.splitlines():
        m = re.match(r"^│ (--[a-z][a-z-]*)(?:\s+(--[a-z][a-z-]*))?", line)
        if m:
            found.update(f for f in m.groups() if f)
    assert "--help" in found, out
    return frozenset(found)


def assert_real_flags(message: str, command: tuple[str, ...]) -> None:
    """Every flag a message names exists: on the `worldsmith ...` command it quotes, else on the command that spoke."""
    for quoted, rest in re.findall(r"`worldsmith (world \w+)([^`]*)`", message):
        for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest):
            assert flag in flags_of(tuple(quoted.split())), f"{flag} is not an option of `worldsmith {quoted}`"
    for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]*", re.sub(r"`[^`]*`", "", message)):
        assert flag in flags_of(command), f"{flag} is not an option of `worldsmith {' '.join(command)}`"


def test_rerunning_world_new_reports_the_world_as_it_is(runs: Path, tmp_path: Path) -> None:
    world = tmp_path / "w"
    first = runner.invoke(app, [*NEW, str(world)])
    assert first.exit_code == 0, first.output
    report = (world / "REPORT.md").read_bytes()
    audit = json.loads((world / "AUDIT.json").read_text())
    recoverable = [p["id"] for p in audit["phenomena"] if p["status"] == "pass"]
    assert len(recoverable) == 5 and f"recoverable phenomena: {len(recoverable)};" in text(first.output)

    again = runner.invoke(app, [*NEW, str(world)])
    assert again.exit_code == 0, again.output
    assert f"recoverable phenomena: {len(recoverable)};" in text(again.output) and "not rebuilt" in text(again.output)
    assert (world / "REPORT.md").read_bytes() == report  # the world's report is left as the build wrote it
    # in creation order: two runs started within one second have names that sort by their random suffix
    made = sorted(runs.glob("*-world-*"), key=lambda run: (run / "config.json").stat().st_mtime_ns)
    assert len(made) == 2  # each `world new` leaves its own run directory
    for run in made:
        assert all((run / n).is_file() for n in ("config.json", "events.jsonl", "report.md", "request.json"))
    rerun = (made[1] / "report.md").read_text()
    assert "edges 9/9 pass, invariants 3/3 pass, phenomena 5/5 pass" in rerun
    assert f"Recoverable phenomena: {', '.join(recoverable)}" in rerun and "Not rebuilt" in rerun
    result = json.loads((made[1] / "world_result.json").read_text())
    assert result["skipped"] and result["audit_summary"]["phenomenon"] == {"pass": 5, "fail": 0, "skip": 0}


def test_an_altered_world_is_refused_with_the_file_and_a_real_fix(runs: Path, tmp_path: Path) -> None:
    world = tmp_path / "w"
    assert runner.invoke(app, [*NEW, str(world)]).exit_code == 0
    data = world / "data" / "sis.csv"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # a truncated copy
    audit_before = (world / "AUDIT.json").read_bytes()

    r = runner.invoke(app, ["world", "audit", str(world)])
    assert r.exit_code == 1 and "data/sis.csv modified" in text(r.output) and "--overwrite" in r.output, r.output
    assert_real_flags(text(r.output), ("world", "audit"))
    assert (world / "AUDIT.json").read_bytes() == audit_before

    r = runner.invoke(app, ["world", "tasks", str(world), "--no-llm", "--max-tasks", "2"])
    assert r.exit_code == 1 and "data/sis.csv modified" in text(r.output), r.output
    assert_real_flags(text(r.output), ("world", "tasks"))
    assert not (world / "tasks").exists() and not list(runs.glob("*-world-tasks-*"))

    r = runner.invoke(app, [*NEW, str(world)])
    assert r.exit_code == 1 and "data/sis.csv modified" in text(r.output) and "--overwrite" in r.output, r.output
    assert_real_flags(text(r.output), ("world", "new"))

    r = runner.invoke(app, ["world", "new", "--domain", "education", "--seed", "2", "--rows", "500", str(world)])
    assert r.exit_code == 1 and "different complete world" in text(r.output) and "--overwrite" in r.output, r.output
    assert_real_flags(text(r.output), ("world", "new"))

    r = runner.invoke(app, [*NEW, str(world), "--overwrite"])
    assert r.exit_code == 0, r.output
    assert verify_manifest(world) == [] and "not rebuilt" not in text(r.output)
    r = runner.invoke(app, ["world", "audit", str(world), "--json"])
    assert r.exit_code == 0, r.output


def test_the_flag_checker_catches_a_flag_that_does_not_exist() -> None:
    assert_real_flags("rebuild with `worldsmith world new OUT --overwrite`", ("world", "audit"))
    for message, command in (("pass --force to continue", ("world", "audit")),
                             ("use `worldsmith world tasks W --overwrite`", ("world", "new"))):
        try:
            assert_real_flags(message, command)
        except AssertionError:
            continue
        raise AssertionError(f"{message!r} names a flag {command} does not have, and was not caught")
