"""A killed training run resumes in its own directory: SFT ends with the weights and losses of the run that was
never stopped, SFT+RL redoes the killed step without a second copy of its rollouts, a save cut short is never
resumed from, and the CLI refuses what a resume cannot honour (changed data, extra options, a finished run)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from typer.testing import CliRunner  # noqa: E402

from tests.training.test_data import oracle  # noqa: E402
from tests.training.test_rl_run import scripted_first_turn, scripted_reward, tiny_rl_rows  # noqa: E402
from tests.training.tiny_lm import tiny_model, tiny_tokenizer  # noqa: E402
from worldsmith.core.config import load_settings  # noqa: E402
from worldsmith.core.runs import RunDir  # noqa: E402
from worldsmith.core.store import write_model  # noqa: E402
from worldsmith.tools.sandbox import SandboxConfig  # noqa: E402
from worldsmith.training.checkpoints import CLOCK_FILE, latest_checkpoint  # noqa: E402


class Killed(Exception):
    """Stands in for the kill: raised from the progress hook at the start of a step's bookkeeping."""


def kill_at(step: int):  # noqa: ANN201
    def progress(done: int, total: int) -> None:
        if done == step:
            raise Killed(f"killed at step {done}")
    return progress


def _trajectories(root: Path, n: int = 6) -> Path:
    for i in range(n):
        write_model(root / f"o{i}.json", oracle(i, group=f"world-{i % 3}"))
    return root


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_a_killed_sft_run_resumes_to_the_weights_of_an_unbroken_run(tmp_path: Path) -> None:
    from worldsmith.app.train import SFTRequest, resume_sft, sft_from_paths

    settings = load_settings(overrides={"runs_dir": str(tmp_path / "runs"), "home": str(tmp_path / "home")})
    data = _trajectories(tmp_path / "trajs")
    base = dict(data=[data], model="tiny", max_steps=6, lr=1e-3, validation_fraction=0.0)

    whole = sft_from_paths(settings, SFTRequest(**base, out=tmp_path / "whole"))

    out = tmp_path / "broken"
    with pytest.raises(Killed):
        sft_from_paths(settings, SFTRequest(**base, out=out, save_every_steps=2), progress=kill_at(5))
    assert latest_checkpoint(out / "trainer").name == "checkpoint-4"  # steps 2 and 4 saved, the older one rotated
    assert [p.name for p in (out / "trainer").glob("checkpoint-*")] == ["checkpoint-4"]
    clock = json.loads((out / "trainer" / "checkpoint-4" / CLOCK_FILE).read_text())
    assert clock["step"] == 4 and clock["train_seconds"] > 0  # the first leg's 4 steps
    half = out / "trainer" / "checkpoint-5"  # a save the kill cut short: no trainer_state.json
    shutil.copytree(out / "trainer" / "checkpoint-4", half)
    (half / "trainer_state.json").unlink()

    resumed = resume_sft(settings, out)
    assert resumed["steps"] == 6 and resumed["resumed_from_step"] == 4
    # the run's seconds hold both legs (the first up to its checkpoint), not the last leg only
    assert resumed["seconds"] >= clock["train_seconds"] + resumed["seconds_this_leg"] - 0.01
    assert resumed["seconds_this_leg"] > 0 and whole["seconds"] == whole["seconds_this_leg"]
    assert not (out / "trainer").exists()  # resume points go once the final model is saved
    got, want = _weights(Path(resumed["checkpoint"])), _weights(Path(whole["checkpoint"]))
    assert got.keys() == want.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-5, atol=1e-6, msg=name)
    losses = [[h["loss"] for h in json.loads((run / "history.json").read_text()) if "loss" in h]
              for run in (out, tmp_path / "whole")]
    assert len(losses[0]) == 6 and losses[0] == pytest.approx(losses[1], rel=1e-5)
    kinds = [e["event"] for e in RunDir(out).events()]
    assert kinds.count("run_resumed") == 1 and kinds[-1] == "run_finished"

    with pytest.raises(ValueError, match="this run finished"):
        resume_sft(settings, out)


def test_a_resume_refuses_data_that_changed(tmp_path: Path) -> None:
    from worldsmith.app.train import SFTRequest, resume_sft, sft_from_paths

    settings = load_settings(overrides={"runs_dir": str(tmp_path / "runs"), "home": str(tmp_path / "home")})
    data = _trajectories(tmp_path / "trajs", n=4)
    out = tmp_path / "run"
    with pytest.raises(Killed):
        sft_from_paths(settings, SFTRequest(data=[data], model="tiny", max_steps=4, validation_fraction=0.0, out=out,
                                            save_every_steps=1), progress=kill_at(2))
    write_model(data / "o9.json", oracle(9, group="world-9"))
    with pytest.raises(ValueError, match="differs from the run's"):
        resume_sft(settings, out)


def test_a_killed_rl_run_redoes_its_step_and_keeps_one_record_per_rollout(tmp_path: Path, sales_csv: Path) -> None:
    from datasets import Dataset

    from worldsmith.training.rl_run import RLRunConfig, train_rl

    tok = tiny_tokenizer()
    rows = tiny_rl_rows(tok, sales_csv)
    backend = "local" if shutil.which("bwrap") else "process"
    sandbox = SandboxConfig(backend=backend, preload=[], timeout_s=20)
    cfg = RLRunConfig(max_steps=3, prompts_per_step=2, num_generations=2, lr=1e-2, max_completion_tokens=400,
                      max_new_tokens=12, max_turns=2, mask_void=False, save_every_steps=2)

    def run_once(run: RunDir, **kw):  # noqa: ANN003, ANN202 - a fresh model object, as a new process would load
        model = tiny_model(tok)
        return train_rl(Dataset.from_list(rows), model, tok, cfg, run, [scripted_reward], sandbox=sandbox,
                        generator=scripted_first_turn(model, tok, rows), **kw)

    whole = RunDir.create("train-rl", tmp_path, config={}, name="whole")
    run_once(whole)
    broken = RunDir.create("train-rl", tmp_path, config={}, name="broken")
    with pytest.raises(Killed):
        run_once(broken, progress=kill_at(3))
    steps_logged = [json.loads(line)["step"] for line in (broken.path / "rollouts.jsonl").read_text().splitlines()]
    assert steps_logged == [1] * 4 + [2] * 4 + [3] * 4  # step 3 rolled out and was killed before its checkpoint

    kept = latest_checkpoint(broken.path / "trainer")
    first_leg = json.loads((kept / CLOCK_FILE).read_text())["train_seconds"]
    summary = run_once(RunDir.open(broken.path), resume_from=kept)
    assert summary["steps"] == 3 and summary["resumed_from_step"] == 2
    assert first_leg > 0 and summary["seconds"] >= first_leg + summary["seconds_this_leg"] - 0.1
    assert "resumed after step 2" in (broken.path / "report.md").read_text()
    samples = [json.loads(line) for line in (broken.path / "rollouts.jsonl").read_text().splitlines()]
    assert [r["step"] for r in samples] == [1] * 4 + [2] * 4 + [3] * 4  # step 3 once: the redone one
    history = json.loads((broken.path / "history.json").read_text())
    # cosine 0.9 → 0.05 over 3 steps, by hand: 0.05 + 0.85·(1 + cos(πk/2))/2
    assert [h["sft/gamma"] for h in history] == pytest.approx(
        [0.05 + 0.85 * (1 + math.cos(math.pi * k / 2)) / 2 for k in range(3)])
    # the restored RNG samples the same rollouts as the run that was never stopped
    reference = [json.loads(line) for line in (whole.path / "rollouts.jsonl").read_text().splitlines()]
    assert [r["rewards"] for r in samples] == [r["rewards"] for r in reference]
    assert [h["reward"] for h in history] == pytest.approx(
        [h["reward"] for h in json.loads((whole.path / "history.json").read_text())])


def test_the_cli_resumes_with_the_run_options_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from worldsmith.cli import app

    monkeypatch.setenv("WORLDSMITH_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("WORLDSMITH_HOME", str(tmp_path / "home"))
    data = _trajectories(tmp_path / "trajs", n=4)
    cli = CliRunner()

    r = cli.invoke(app, ["train", "sft", "--model", "tiny"])
    assert r.exit_code == 2 and "give --data (or --resume RUN" in r.output
    r = cli.invoke(app, ["train", "rl"])
    assert r.exit_code == 2 and "give --tasks (or --resume RUN" in r.output
    r = cli.invoke(app, ["train", "sft", "--resume", str(tmp_path / "nowhere")])
    assert r.exit_code == 2 and "no such run directory" in r.output

    from worldsmith.app.train import SFTRequest, sft_from_paths

    out = tmp_path / "run"
    settings = load_settings(overrides={"runs_dir": str(tmp_path / "runs"), "home": str(tmp_path / "home")})
    with pytest.raises(Killed):
        sft_from_paths(settings, SFTRequest(data=[data], model="tiny", max_steps=3, validation_fraction=0.0, out=out,
                                            save_every_steps=1), progress=kill_at(3))
    r = cli.invoke(app, ["train", "sft", "--resume", str(out)])
    assert r.exit_code == 0, r.output
    assert "SFT tiny: 3 steps (resumed from step 2)" in r.output
    r = cli.invoke(app, ["train", "sft", "--resume", str(out), "--max-steps", "5"])
    assert r.exit_code == 2 and "drop --max-steps" in r.output
    r = cli.invoke(app, ["train", "rl", "--resume", str(out), "--lr", "1e-5"])
    assert r.exit_code == 2 and "drop --lr" in r.output
    r = cli.invoke(app, ["train", "sft", "--resume", str(out)])
    assert r.exit_code == 1 and "this run finished" in r.output
    r = cli.invoke(app, ["train", "sft", "--resume", str(data)])  # a folder, but no run
    assert r.exit_code == 1 and "not a training run directory" in r.output


def test_a_sigkilled_cli_run_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    """The real thing: the process dies by SIGKILL (no exception handler, no 'failed' event) and `--resume`
    finishes the run's steps in the same directory."""
    import os
    import signal
    import subprocess
    import sys
    import time

    data = _trajectories(tmp_path / "trajs", n=4)
    out = tmp_path / "run"
    env = {**os.environ, "WORLDSMITH_RUNS_DIR": str(tmp_path / "runs"), "WORLDSMITH_HOME": str(tmp_path / "home"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    cmd = [sys.executable, "-m", "worldsmith.cli", "train", "sft"]
    proc = subprocess.Popen([*cmd, "--data", str(data), "--model", "tiny", "--max-steps", "30", "--validation", "0",
                             "--save-every-steps", "3", "--out", str(out), "--json"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while latest_checkpoint(out / "trainer", remove_incomplete=False) is None:
        assert proc.poll() is None, "the run ended before its first checkpoint"
        assert time.monotonic() < deadline, "no checkpoint within 120 s"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    kept = latest_checkpoint(out / "trainer", remove_incomplete=False)
    assert kept is not None and not (out / "checkpoint").exists()

    done = subprocess.run([*cmd, "--resume", str(out), "--json"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["steps"] == 30 and summary["resumed_from_step"] == int(kept.name.split("-")[1]) >= 3
    assert (out / "checkpoint" / "model.safetensors").is_file()
    history = json.loads((out / "history.json").read_text())
    assert [h["step"] for h in history if "loss" in h] == list(range(1, 31))  # no step lost or logged twice


def test_train_rl_resumes_through_its_service_with_the_run_options(tmp_path: Path) -> None:
    from worldsmith.app.train_rl import RLRequest, resume_rl, rl_from_paths
    from worldsmith.core.schemas import AnswerSpec, Provenance, Task, Tolerance
    from worldsmith.core.taskpkg import TaskCollection, workspace_ref

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "sales.csv").write_text("region,amount\nnorth,10\nsouth,20\n")
    coll = TaskCollection(tmp_path / "coll")
    for i in range(2):
        coll.add(Task(id=f"t{i}", kind="closed_form", instruction=f"What is the total amount? ({i}) @total[value]",
                      workspace=workspace_ref(ws), provenance=Provenance(source="manual"), category="aggregation",
                      answers=[AnswerSpec(name="total", value=30.0, tolerance=Tolerance(abs=0.01))]))
    backend = "local" if shutil.which("bwrap") else "process"
    settings = load_settings(overrides={"runs_dir": str(tmp_path / "runs"), "home": str(tmp_path / "home"),
                                        "sandbox": {"backend": backend, "preload": [], "timeout_s": 20}})
    out = tmp_path / "rl"
    req = RLRequest(tasks=[coll.root], model="tiny", out=out, max_steps=3, prompts_per_step=1, num_generations=2,
                    max_turns=1, max_new_tokens=8, max_completion_tokens=64, save_every_steps=1)
    with pytest.raises(Killed):
        rl_from_paths(settings, req, progress=kill_at(2))
    saved = json.loads((out / "config.json").read_text())
    assert saved["request"]["tasks"] == [str(coll.root.resolve())] and saved["data_fingerprint"]

    summary = resume_rl(settings, out)
    assert summary["steps"] == 3 and summary["resumed_from_step"] == 1 and summary["tasks"] == 2
    assert [json.loads(line)["step"] for line in (out / "rollouts.jsonl").read_text().splitlines()] == \
        [1, 1, 2, 2, 3, 3]
    assert (out / "checkpoint" / "config.json").is_file() and not (out / "trainer").exists()


def test_a_run_killed_after_its_final_save_is_finished_not_restarted(tmp_path: Path) -> None:
    from worldsmith.training.checkpoints import refuse_finished

    refuse_finished(tmp_path, [{"event": "run_started"}])  # a killed run: nothing says it ended
    (tmp_path / "checkpoint").mkdir()
    refuse_finished(tmp_path, [])  # a final model folder alone may be a save cut short
    (tmp_path / "summary.json").write_text("{}")  # written after the final model: the training ended
    with pytest.raises(ValueError, match="this run finished"):
        refuse_finished(tmp_path, [{"event": "run_started"}])
    with pytest.raises(ValueError, match="this run finished"):
        refuse_finished(tmp_path / "other", [{"event": "run_finished", "status": "ok"}])


def test_a_checkpoint_without_a_readable_clock_counts_no_earlier_seconds(tmp_path: Path) -> None:
    from worldsmith.training.checkpoints import checkpoint_seconds

    assert checkpoint_seconds(None) == 0.0  # a run from the start
    ck = tmp_path / "checkpoint-3"
    ck.mkdir()
    assert checkpoint_seconds(ck) == 0.0  # saved before clocks were kept, or killed between the save and the clock
    (ck / CLOCK_FILE).write_text('{"step": 3, "train_seconds": 12.5}')
    assert checkpoint_seconds(ck) == 12.5
    (ck / CLOCK_FILE).write_text('{"step": 3, "train_')
    assert checkpoint_seconds(ck) == 0.0
