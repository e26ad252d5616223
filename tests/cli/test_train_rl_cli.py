"""`worldsmith train rl` end to end on the tiny model: a one-task collection, one step, a run directory with the
report and a checkpoint. Needs TRAIN-SFT's `train` group and model loader (worldsmith.training.models)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("worldsmith.training.models")
pytest.importorskip("worldsmith.commands.train")

from typer.testing import CliRunner  # noqa: E402

from worldsmith.cli import app  # noqa: E402
from worldsmith.core.schemas import Action, AnswerSpec, Provenance, Step, Task, Trajectory  # noqa: E402
from worldsmith.core.store import write_model  # noqa: E402
from worldsmith.core.taskpkg import TaskCollection, workspace_ref  # noqa: E402


def test_train_rl_one_step_on_the_tiny_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "sales.csv").write_text("region,amount\nnorth,10\nsouth,20\n")
    coll = TaskCollection(tmp_path / "coll")
    coll.add(Task(id="t1", kind="closed_form", instruction="Total amount? Answer as @total[value].",
                  workspace=workspace_ref(ws), answers=[AnswerSpec(name="total", value=30)],
                  provenance=Provenance(source="manual")))
    oracle = Trajectory(id="o1", task_id="t1", model="engine", label="oracle", user_prompt="Total amount?",
                        steps=[Step(index=0, thought="sum the amounts", action=Action(kind="answer", content="@total[30]"))],
                        final_answer="@total[30]", status="answered")
    write_model(tmp_path / "oracles" / "o1.json", oracle)
    if not shutil.which("bwrap"):
        monkeypatch.setenv("WORLDSMITH_SANDBOX__BACKEND", "process")
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["train", "rl", "--tasks", str(coll.root), "--data", str(tmp_path / "oracles"),
                                 "--model", "tiny", "--out", str(out),
                                 "--max-steps", "1", "--prompts-per-step", "1", "--generations", "2",
                                 "--max-turns", "1", "--max-new-tokens", "64", "--max-completion-tokens", "96",
                                 "--json"])  # the default reward: DataMind's composition
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output[r.output.index("{"):])
    assert summary["steps"] == 1 and summary["tasks"] == 1 and summary["with_expert"] == 1
    assert summary["final_sft_loss"] > 0  # the oracle trained through the SFT term
    assert (out / "report.md").exists() and (out / "curves.png").exists()
    assert (out / "checkpoint" / "config.json").exists()
    [step] = json.loads((out / "history.json").read_text())
    for key in ("rewards/datamind_reward/mean", "rewards/closed_form_reward/mean", "rewards/well_formed_reward/mean"):
        assert key in step  # DataMind's reward trains; its components are logged at weight 0
    assert step["rewards/well_formed_reward/mean"] == 0.0  # a random model writes no valid turn
    assert step["reward"] == step["rewards/datamind_reward/mean"]


def test_train_rl_refuses_a_missing_collection(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["train", "rl", "--tasks", str(tmp_path / "nope")])
    assert r.exit_code == 2


def test_expert_length_limit_is_the_callers(tmp_path: Path) -> None:
    """An expert longer than --expert-max-tokens is dropped from the SFT term (the byte-level tiny tokenizer makes a
    short oracle a few hundred tokens); a generous limit keeps it."""
    from worldsmith.app.train_rl import _experts
    from worldsmith.training.models import tiny_tokenizer

    oracle = Trajectory(id="o1", task_id="t1", model="engine", label="oracle", user_prompt="Total amount? " * 20,
                        steps=[Step(index=0, thought="sum", action=Action(kind="answer", content="@total[30]"))],
                        final_answer="@total[30]", status="answered")
    write_model(tmp_path / "oracles" / "o1.json", oracle)
    tok = tiny_tokenizer()
    with pytest.raises(ValueError, match="too long"):
        _experts([tmp_path / "oracles"], tok, 64, 512)
    assert set(_experts([tmp_path / "oracles"], tok, 100_000, 512)) == {"t1"}
    # its one turn is longer than a rollout's turn may be (here 40 tokens, one per byte): nothing left to train
    with pytest.raises(ValueError, match="every turn longer than 20 tokens"):
        _experts([tmp_path / "oracles"], tok, 100_000, 20)
