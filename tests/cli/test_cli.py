"""The command line as a user drives it (typer's runner, scripted model via WORLDSMITH_* variables)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.graphs.conftest import ANSWER_TURN, CODE_TURN
from worldsmith.cli import app

runner = CliRunner()


@pytest.fixture
def scripted_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    def configure(rules: list[dict]) -> None:
        monkeypatch.setenv("WORLDSMITH_LLM__DEFAULT__PROVIDER", "scripted")
        monkeypatch.setenv("WORLDSMITH_LLM__DEFAULT__MODEL", "cli-test")
        monkeypatch.setenv("WORLDSMITH_LLM__DEFAULT__EXTRA_BODY", json.dumps({"rules": rules}))
        monkeypatch.setenv("WORLDSMITH_LLM__CACHE", "false")
        monkeypatch.setenv("WORLDSMITH_RUNS_DIR", str(tmp_path / "runs"))
    return configure


ANALYST_RULES = [{"pattern": "Request:", "response": json.dumps({"action": "answer_question"}), "role": "router"},
                 {"pattern": "<interpreter>", "response": ANSWER_TURN, "scope": "last_user"},
                 {"pattern": ".", "response": CODE_TURN}]


def test_help_version_and_usage_errors() -> None:
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0 and "world" in r.output and "eval" in r.output
    assert runner.invoke(app, ["--version"]).output.startswith("worldsmith ")
    assert runner.invoke(app, ["eval"]).exit_code == 2  # missing --tasks
    assert runner.invoke(app, ["--set", "nonsense", "config", "show"]).exit_code == 2


def test_config_show_masks_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLDSMITH_LLM__DEFAULT__API_KEY", "sk-top-secret")
    r = runner.invoke(app, ["config", "show", "--json"])
    assert r.exit_code == 0, r.output
    assert "sk-top-secret" not in r.output
    assert json.loads(r.output)["llm"]["default"]["api_key"] == "***"


def test_ask_answers_a_question_and_leaves_a_run_directory(scripted_env, sales_csv: Path, tmp_path: Path) -> None:
    scripted_env(ANALYST_RULES)
    r = runner.invoke(app, ["ask", "What is the mean amount?", str(sales_csv), "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.output)["result"]
    assert "@mean_amount[20.0]" in result["answer"]
    run = Path(result["run_dir"])
    assert (run / "trajectory.json").is_file() and "Final answer" in (run / "report.md").read_text()


def test_ask_keeps_the_users_format_sentence_and_answers_under_the_users_name(scripted_env, sales_csv: Path) -> None:
    request = "What is the total of the amount column? Answer as @total[value]."
    scripted_env([{"pattern": "Request:", "role": "router",  # the model's reading loses the format sentence
                   "response": json.dumps({"action": "answer_question",
                                           "question": "What is the total of the amount column?"})},
                  {"pattern": "<interpreter>\n60", "response": "<think>t</think><answer>@total[60]</answer>",
                   "scope": "last_user"},
                  {"pattern": ".", "response": "<think>l</think><code>print(pd.read_csv('sales.csv')['amount'].sum())"
                                               "</code>"}])
    r = runner.invoke(app, ["ask", request, str(sales_csv), "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.output)["result"]
    assert result["answer"] == "@total[60]"
    traj = json.loads(Path(result["trajectory"]).read_text())
    assert request in traj["user_prompt"] and "must contain: @total[value]" in traj["user_prompt"]


def test_ask_says_what_is_missing(scripted_env) -> None:
    scripted_env([{"pattern": ".", "response": "not json"}])
    r = runner.invoke(app, ["ask", "train on last night's tasks"])
    assert r.exit_code == 1 and "not available" in r.output


def test_chat_repl_keeps_state_between_questions_and_resumes(scripted_env, sales_csv: Path, tmp_path: Path) -> None:
    scripted_env([{"pattern": "<interpreter>\n60", "response": "<think>t</think><answer>The total is 60.</answer>",
                   "scope": "last_user"},
                  {"pattern": "<interpreter>\n120", "response": "<think>t</think><answer>Twice is 120.</answer>",
                   "scope": "last_user"},
                  {"pattern": "And twice", "response": "<think>reuse</think><code>print(total * 2)</code>",
                   "scope": "last_user"},
                  {"pattern": ".", "response": "<think>l</think><code>total = pd.read_csv('sales.csv')['amount'].sum()\nprint(total)</code>"}])
    r = runner.invoke(app, ["chat", str(sales_csv)], input="What is the total?\n\n")
    assert r.exit_code == 0, r.output
    assert "The total is 60." in r.output
    thread = r.output.split("--thread ")[1].split(")")[0]
    r2 = runner.invoke(app, ["chat", "--thread", thread], input="And twice that?\n\n")
    assert r2.exit_code == 0, r2.output
    assert "Twice is 120." in r2.output  # `total` came back: the thread resumed from its checkpoint
    assert runner.invoke(app, ["chat", "--thread", "no-such-thread"], input="\n").exit_code == 2


def test_eval_on_two_dabench_questions(scripted_env, dabench_dir: Path) -> None:
    # reads the file, then answers the same number for both questions (right for the first only)
    scripted_env([{"pattern": "<interpreter>", "response": "<think>t</think><answer>@mean_fare[34.65]</answer>",
                   "scope": "last_user"},
                  {"pattern": ".", "response": "<think>l</think><code>import glob\n"
                                               "print(pd.read_csv(sorted(glob.glob('*.csv'))[0]).shape)</code>"}])
    r = runner.invoke(app, ["eval", "--tasks", str(dabench_dir), "--limit", "2", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["overall"]["n_tasks"] == 2 and out["overall"]["accuracy_by_question"] == 0.5
    assert Path(out["report"]).is_file()
    r = runner.invoke(app, ["eval", "--tasks", str(dabench_dir), "--limit", "1"])
    assert r.exit_code == 0, r.output
    assert "eval 1/1 trajectories" in r.output  # not a terminal: progress as log lines, not a bar


def test_eval_counts_answer_guards_in_json_and_the_report(scripted_env, dabench_dir: Path) -> None:
    # a model that guesses without running code: re-asked once for evidence, then recorded unsupported
    scripted_env([{"pattern": ".", "response": "<think>guess</think><answer>@mean_fare[34.65]</answer>"}])
    r = runner.invoke(app, ["eval", "--tasks", str(dabench_dir), "--limit", "2", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)["overall"]
    assert out["n_unsupported"] == 2 and out["accuracy_by_question"] == 0.0  # the right guess no longer scores
    # question 1 asks for @mean_fare: 2 answers (re-asked once, then kept). Question 2 asks for another name: its
    # 5 answers are re-asked for evidence, for the unrequested @mean_fare, twice for the missing name, then kept
    assert out["guards"]["no_evidence"] == {"fired": 7, "reasked": 2, "trajectories": 2}
    assert out["guards"]["names"] == {"fired": 5, "reasked": 1, "trajectories": 1}
    report = Path(json.loads(r.output)["report"]).read_text()
    assert "| no_evidence | 7 | 2 | 2 |" in report and "| names | 5 | 1 | 1 |" in report
    r = runner.invoke(app, ["eval", "--tasks", str(dabench_dir), "--limit", "1"])
    assert "answer guards: no_evidence 2 (re-asked 1); unsupported answers 1" in r.output


def test_world_commands(scripted_env, tmp_path: Path) -> None:
    scripted_env([{"pattern": ".", "response": "{}"}])
    world = tmp_path / "w"
    r = runner.invoke(app, ["world", "new", str(world), "--domain", "education", "--seed", "2", "--rows", "2000"])
    assert r.exit_code == 0, r.output
    assert (world / "WORLD.md").is_file() and (world / "REPORT.md").is_file()
    [run] = (tmp_path / "runs").glob("*-world-*")  # `world new` leaves a run directory like every command
    assert all((run / name).is_file() for name in ("config.json", "events.jsonl", "report.md", "request.json"))
    r = runner.invoke(app, ["world", "audit", str(world), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["edges"]
    r = runner.invoke(app, ["world", "tasks", str(world), "--no-llm", "--max-tasks", "2", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert len(out["tasks"]) == 2
    run = Path(out["run_dir"])  # like every command, `world tasks` leaves a run directory, and can resume it
    assert all((run / name).is_file() for name in ("config.json", "events.jsonl", "report.md", "request.json"))
    r = runner.invoke(app, ["world", "tasks", "--resume", str(run), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["tasks"] == out["tasks"]
    r = runner.invoke(app, ["world", "show", str(world)])
    assert r.exit_code == 0 and (world / "dag.png").stat().st_size > 1000
    assert runner.invoke(app, ["world", "audit", str(tmp_path)]).exit_code == 2
