"""Task packages' verifiers run anywhere: a clean interpreter without worldsmith (nor site-packages), from any cwd,
with or without a judge endpoint; `worldsmith task grade` gives the same verdicts (issue 10, item 4)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fakes.fake_openai import Action, fake_openai  # noqa: F401  (fixture)
from worldsmith.core import rubric_grading
from worldsmith.core.schemas import (
    AnswerSpec,
    Criterion,
    DeliverableSpec,
    Provenance,
    Rubric,
    Task,
    Tolerance,
)
from worldsmith.core.taskpkg import workspace_ref, write_task_package

REPORT = ("# Findings\n\nThe north region total amount is 10 EUR.\nThe south region total amount is 25 EUR.\n\n"
          "We recommend a follow-up audit of the south invoices.\n")
JUDGE_REPLY = json.dumps({"verdicts": [{"id": "recommends_audit", "met": True, "evidence": "We recommend a follow-up"}]})


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "sales.csv").write_text("region,amount\nnorth,10\nsouth,20\n")
    (ws / "data_dictionary.md").write_text("The north region total amount is 99 in the 2019 archive.\n")
    return ws


def _closed(ws: Path) -> Task:
    return Task(id="cf1", kind="closed_form", instruction="What is the total amount? Answer as @total[value].",
                workspace=workspace_ref(ws), answers=[AnswerSpec(name="total", value=30.0, tolerance=Tolerance(abs=0.01))],
                provenance=Provenance(source="manual"))


def _report(ws: Path) -> Task:
    crit = [
        Criterion(id="north_total", section="computation", observable="north region total amount",
                  satisfy="reports the north region total amount of 10", expected_value=10.0,
                  tolerance=Tolerance(abs=0.5), source="gt"),
        Criterion(id="south_total", section="computation", observable="south region total amount",
                  satisfy="reports the south region total amount of 20", expected_value=20.0,
                  tolerance=Tolerance(abs=0.5), source="gt"),
        Criterion(id="recommends_audit", section="insight", observable="a recommended next step",
                  satisfy="recommends auditing the south invoices"),
    ]
    return Task(id="rp1", kind="report", instruction="Summarise the regional totals in answer.md and recommend a step.",
                workspace=workspace_ref(ws), rubric=Rubric(criteria=crit),
                deliverable=DeliverableSpec(format="markdown", filename="answer.md"), provenance=Provenance(source="manual"))


@pytest.fixture()
def clean_python(tmp_path: Path) -> Path:
    """A bin/ folder whose `python3` is an isolated interpreter without site-packages: no worldsmith, no pydantic."""
    bin_dir = tmp_path / "cleanbin"
    bin_dir.mkdir()
    shim = bin_dir / "python3"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    shim.chmod(0o755)
    r = subprocess.run([str(shim), "-c", "import worldsmith"], capture_output=True, text=True)
    assert r.returncode != 0, "the clean interpreter must not see worldsmith"
    return bin_dir


def _env(clean_bin: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORLDSMITH_JUDGE")}
    env["PATH"] = f"{clean_bin}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **extra}


def _run_test_sh(pkg: Path, answer: Path, reward: Path, clean_bin: Path, cwd: Path, **extra: str):
    return subprocess.run(["bash", str(pkg / "tests" / "test.sh"), str(answer), str(reward)], cwd=cwd,
                          env=_env(clean_bin, **extra), capture_output=True, text=True, timeout=60)


def test_closed_form_verifier_runs_clean_from_any_cwd(tmp_path: Path, clean_python: Path) -> None:
    pkg = write_task_package(_closed(_workspace(tmp_path)), tmp_path / "pkgs" / "cf1",
                             solution_code="print('The total is @total[30]')\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    answer, reward = tmp_path / "out" / "answer.md", tmp_path / "logs" / "verifier" / "reward.txt"
    answer.parent.mkdir()
    answer.write_text("I get @total[29.995].")
    r = _run_test_sh(pkg, answer, reward, clean_python, elsewhere)
    assert r.returncode == 0, r.stdout + r.stderr
    assert float(reward.read_text()) == 1.0
    assert json.loads((reward.parent / "grade.json").read_text())["items"][0]["correct"] is True
    answer.write_text("I get @total[31].")
    r = _run_test_sh(pkg, answer, reward, clean_python, elsewhere)
    assert r.returncode == 1 and float(reward.read_text()) == 0.0


def test_closed_form_verifier_without_answer_writes_zero_and_says_where_it_looked(tmp_path: Path,
                                                                                  clean_python: Path) -> None:
    pkg = write_task_package(_closed(_workspace(tmp_path)), tmp_path / "pkgs" / "cf1")
    reward = tmp_path / "logs" / "reward.txt"
    r = _run_test_sh(pkg, tmp_path / "missing.md", reward, clean_python, tmp_path)
    assert r.returncode == 1 and float(reward.read_text()) == 0.0
    assert "missing.md" in r.stderr


def test_oracle_then_verifier_with_the_same_paths_from_another_cwd(tmp_path: Path, clean_python: Path) -> None:
    """solve.sh WORKSPACE writes WORKSPACE/answer.md; test.sh's default answer path under a WORKSPACE agrees."""
    pkg = write_task_package(_closed(_workspace(tmp_path)), tmp_path / "pkgs" / "cf1",
                             solution_code="import csv\nrows = list(csv.DictReader(open('sales.csv')))\n"
                             "print(f\"@total[{sum(float(r['amount']) for r in rows)}]\")\n")
    workspace = tmp_path / "run" / "workspace"
    shutil.copytree(pkg / "environment", workspace, ignore=shutil.ignore_patterns("Dockerfile"))
    r = subprocess.run(["bash", str(pkg / "solution" / "solve.sh"), str(workspace)], cwd=tmp_path,
                       env=_env(clean_python), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert (workspace / "answer.md").read_text().strip() == "@total[30.0]"
    reward = tmp_path / "run" / "reward.txt"
    r = subprocess.run(["bash", str(pkg / "tests" / "test.sh")], cwd=tmp_path, capture_output=True, text=True,
                       env=_env(clean_python, ANSWER_FILE=str(workspace / "answer.md"), REWARD_FILE=str(reward)))
    assert r.returncode == 0, r.stdout + r.stderr
    assert float(reward.read_text()) == 1.0


def test_report_verifier_without_judge_writes_the_deterministic_partial_reward(tmp_path: Path,
                                                                              clean_python: Path) -> None:
    pkg = write_task_package(_report(_workspace(tmp_path)), tmp_path / "pkgs" / "rp1")
    assert (pkg / "tests" / "grade_report.py").read_bytes() == Path(rubric_grading.__file__).read_bytes()
    workspace = tmp_path / "workspace"
    shutil.copytree(pkg / "environment", workspace, ignore=shutil.ignore_patterns("Dockerfile"))
    (workspace / "answer.md").write_text(REPORT)
    reward = tmp_path / "logs" / "reward.txt"
    r = _run_test_sh(pkg, workspace / "answer.md", reward, clean_python, tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr  # 0.5 < the 0.6 pass mark
    # north (10) met, south (25 vs 20 ± 0.5) not met; the judge item is left out: 1 of 2 graded weights
    assert float(reward.read_text()) == pytest.approx(0.5)
    out = json.loads((reward.parent / "grade.json").read_text())
    assert out["ungraded"] == ["recommends_audit"]
    met = {i["id"]: i["met"] for i in out["items"]}
    assert met == {"north_total": True, "south_total": False, "recommends_audit": None}
    # the task's own data dictionary (which says 99) is not read as the solver's deliverable
    assert "99" not in json.dumps(out["items"])


def test_an_xlsx_report_is_graded_on_its_cells_by_the_clean_verifier(tmp_path: Path, clean_python: Path) -> None:
    # synthesis asks every third report as answer.xlsx (sheets "summary" and "notes"); it was read as zip bytes
    openpyxl = pytest.importorskip("openpyxl")
    task = _report(_workspace(tmp_path)).model_copy(update={
        "deliverable": DeliverableSpec(format="xlsx", filename="answer.xlsx")})
    pkg = write_task_package(task, tmp_path / "pkgs" / "rp1")
    workspace = tmp_path / "workspace"
    shutil.copytree(pkg / "environment", workspace, ignore=shutil.ignore_patterns("Dockerfile"))
    wb = openpyxl.Workbook()
    summary = wb.active
    summary.title = "summary"
    summary.append(["name", "value", "definition"])
    summary.append(["north region total amount", 10, "sum of amount where region is north"])
    summary.append(["south region total amount", 20.2, "sum of amount where region is south"])
    wb.create_sheet("notes").append(["South sells twice the north."])
    wb.save(workspace / "answer.xlsx")
    reward = tmp_path / "logs" / "reward.txt"
    r = _run_test_sh(pkg, workspace / "answer.xlsx", reward, clean_python, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    met = {i["id"]: i["met"] for i in json.loads((reward.parent / "grade.json").read_text())["items"]}
    assert met == {"north_total": True, "south_total": True, "recommends_audit": None}  # 20.2 within 20 ± 0.5
    summary["B3"] = 25  # the south total wrong: that item fails, read from the cell
    wb.save(workspace / "answer.xlsx")
    r = _run_test_sh(pkg, workspace / "answer.xlsx", reward, clean_python, tmp_path)
    met = {i["id"]: i["met"] for i in json.loads((reward.parent / "grade.json").read_text())["items"]}
    assert met["south_total"] is False and met["north_total"] is True
    # what the instruction says is graded is what the verifier reads: the workspace's files too, for a report
    assert "together with the other text files and workbooks" in (pkg / "instruction.md").read_text()
    (tmp_path / "c").mkdir()
    closed = write_task_package(_closed(_workspace(tmp_path / "c")), tmp_path / "pkgs" / "cf1")
    assert "answer.md`: only that file is graded." in (closed / "instruction.md").read_text()
    (workspace / "answer.xlsx").write_bytes(b"not a zip")  # a broken workbook grades as nothing readable
    r = _run_test_sh(pkg, workspace / "answer.xlsx", reward, clean_python, tmp_path)
    assert r.returncode == 1 and float(reward.read_text()) == 0.0


def test_report_verifier_grades_judge_items_through_an_openai_compatible_endpoint(
        tmp_path: Path, clean_python: Path, fake_openai) -> None:
    pkg = write_task_package(_report(_workspace(tmp_path)), tmp_path / "pkgs" / "rp1")
    answer = tmp_path / "workspace" / "answer.md"
    answer.parent.mkdir()
    answer.write_text(REPORT)
    fake_openai.enqueue(Action.reply(JUDGE_REPLY))
    reward = tmp_path / "logs" / "reward.txt"
    r = _run_test_sh(pkg, answer, reward, clean_python, tmp_path, WORLDSMITH_JUDGE_BASE_URL=fake_openai.base_url,
                     WORLDSMITH_JUDGE_MODEL="fake-model", WORLDSMITH_JUDGE_API_KEY="sk-test")
    assert r.returncode == 0, r.stdout + r.stderr
    assert float(reward.read_text()) == pytest.approx(2 / 3)  # north + audit of 3 equal weights
    out = json.loads((reward.parent / "grade.json").read_text())
    assert out["ungraded"] == [] and {i["id"]: i["method"] for i in out["items"]}["recommends_audit"] == "judge"
    sent = fake_openai.requests[0]
    assert sent["model"] == "fake-model"
    prompt = sent["messages"][-1]["content"]
    assert "recommends_audit" in prompt and "north_total" not in prompt  # only the items left for the judge
    assert "Summarise the regional totals" in prompt  # the task's instruction reaches the judge


def test_report_verifier_keeps_the_partial_reward_when_the_judge_fails(tmp_path: Path, clean_python: Path,
                                                                      fake_openai) -> None:
    pkg = write_task_package(_report(_workspace(tmp_path)), tmp_path / "pkgs" / "rp1")
    answer = tmp_path / "solver" / "answer.md"
    answer.parent.mkdir()
    answer.write_text(REPORT)
    fake_openai.enqueue(Action.server_error(500))
    reward = tmp_path / "logs" / "reward.txt"
    _run_test_sh(pkg, answer, reward, clean_python, tmp_path, WORLDSMITH_JUDGE_BASE_URL=fake_openai.base_url)
    out = json.loads((reward.parent / "grade.json").read_text())
    assert float(reward.read_text()) == pytest.approx(0.5)
    assert out["ungraded"] == ["recommends_audit"] and "HTTP 500" in out["note"]


def test_worldsmith_task_grade_matches_the_package_verifier(tmp_path: Path, monkeypatch) -> None:
    from worldsmith.cli import app

    for k in rubric_grading.JUDGE_ENV:
        monkeypatch.delenv(k, raising=False)
    ws = _workspace(tmp_path)
    report_pkg = write_task_package(_report(ws), tmp_path / "pkgs" / "rp1")
    closed_pkg = write_task_package(_closed(ws), tmp_path / "pkgs" / "cf1")
    out_dir = tmp_path / "solver"
    out_dir.mkdir()
    (out_dir / "answer.md").write_text(REPORT)
    runner = CliRunner()
    r = runner.invoke(app, ["task", "grade", str(report_pkg), "--response", str(out_dir / "answer.md"), "--json",
                            "--reward", str(tmp_path / "reward.txt")])
    assert r.exit_code == 1, r.output
    data = json.loads(r.output)
    assert data["score"] == pytest.approx(0.5) and data["ungraded"] == ["recommends_audit"]
    assert float((tmp_path / "reward.txt").read_text()) == pytest.approx(0.5)
    (out_dir / "cf.md").write_text("@total[30]")
    r = runner.invoke(app, ["task", "grade", str(closed_pkg), "--response", str(out_dir / "cf.md")])
    assert r.exit_code == 0, r.output
    assert "score 1.000" in r.output
    r = runner.invoke(app, ["task", "grade", str(tmp_path), "--response", str(out_dir / "cf.md")])
    assert r.exit_code == 2 and "not a task package" in r.output


def test_worldsmith_task_grade_uses_the_judge_endpoint_from_the_environment(tmp_path: Path, monkeypatch,
                                                                            fake_openai) -> None:
    """The same variables the container's verifier reads; they are not mistaken for unknown settings."""
    from worldsmith.cli import app

    monkeypatch.setenv("WORLDSMITH_JUDGE_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("WORLDSMITH_JUDGE_MODEL", "fake-model")
    pkg = write_task_package(_report(_workspace(tmp_path)), tmp_path / "pkgs" / "rp1")
    answer = tmp_path / "solver" / "answer.md"
    answer.parent.mkdir()
    answer.write_text(REPORT)
    fake_openai.enqueue(Action.reply(JUDGE_REPLY))
    r = CliRunner().invoke(app, ["task", "grade", str(pkg), "--response", str(answer), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["score"] == pytest.approx(2 / 3) and data["ungraded"] == []
    assert fake_openai.request_count == 1


def test_worldsmith_task_grade_prefers_the_configured_judge_role(tmp_path: Path, scripted) -> None:
    from worldsmith.cli import app
    from worldsmith.llm.providers.scripted import _SCRIPTS

    script, _ = scripted
    name = next(n for n, s in _SCRIPTS.items() if s is script)  # the model name the fixture registered it under
    script.on("recommends_audit", JUDGE_REPLY, role="judge")
    pkg = write_task_package(_report(_workspace(tmp_path)), tmp_path / "pkgs" / "rp1")
    answer = tmp_path / "solver" / "answer.md"
    answer.parent.mkdir()
    answer.write_text(REPORT)
    r = CliRunner().invoke(app, ["--set", f"home={tmp_path / 'home'}", "--set", "llm.cache=false",
                                 "--set", f'llm.roles.judge={{"provider": "scripted", "model": "{name}"}}',
                                 "task", "grade", str(pkg), "--response", str(answer), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["score"] == pytest.approx(2 / 3)
    assert [q.role for q in script.requests] == ["judge"]


def test_report_verifier_bad_usage_and_bad_rubric_exit_2(tmp_path: Path, clean_python: Path) -> None:
    pkg = write_task_package(_report(_workspace(tmp_path)), tmp_path / "pkgs" / "rp1")
    py = str(clean_python / "python3")
    r = subprocess.run([py, str(pkg / "tests" / "grade_report.py")], capture_output=True, text=True)
    assert r.returncode == 2 and "usage: grade_report.py" in r.stderr
    (tmp_path / "bad.json").write_text("{not json")
    r = subprocess.run([py, str(pkg / "tests" / "grade_report.py"), str(tmp_path / "bad.json"), "x.md"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "bad.json is not valid JSON" in r.stderr


def test_a_workspace_file_named_like_the_environments_own_files_is_refused(tmp_path: Path) -> None:
    from worldsmith.core.store import ArtifactError

    ws = _workspace(tmp_path)
    (ws / "Dockerfile").write_text("FROM scratch\n")
    with pytest.raises(ArtifactError, match="Dockerfile"):
        write_task_package(_closed(ws), tmp_path / "pkgs" / "cf1")
    assert not (tmp_path / "pkgs" / "cf1").exists()


def test_a_computation_item_is_answered_by_its_closed_form_tag_and_its_own_name_wins() -> None:
    item = {"id": "comp_churn_gap", "observable": "the churn gap", "satisfy": "reports 0.07",
            "expected_value": 0.07, "tolerance": {"abs": 0.01}}
    assert rubric_grading.check_numeric(item, "@churn_gap[0.072]").met is True
    assert rubric_grading.check_numeric(item, "@churn_gap[0.2]").met is False
    assert rubric_grading.check_numeric(item, "@comp_churn_gap[0.3] @churn_gap[0.07]").met is False  # exact name first
    assert rubric_grading.check_numeric(item, "@gap2[0.07]").method != "tag"  # an unrelated tag is not an answer
