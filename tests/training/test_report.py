"""Training report helpers: which metrics become curves, the PNG, the summary table."""

from __future__ import annotations

from pathlib import Path

from worldsmith.training.report import (
    curve_keys,
    last_value,
    plot_curves,
    series,
    table,
)

HISTORY = [{"loss": 2.0, "learning_rate": 1e-3, "step": 1, "epoch": 0.5},
           {"loss": 1.5, "grad_norm": float("nan"), "step": 2, "epoch": 1.0},
           {"eval_loss": 1.7, "step": 2},
           {"train_runtime": 3.0, "train_loss": 1.75, "step": 2, "flag": True}]


def test_curves_are_the_numeric_metrics_in_order_of_appearance() -> None:
    assert curve_keys(HISTORY) == ["loss", "learning_rate", "grad_norm", "eval_loss", "train_loss"]
    assert series(HISTORY, "loss") == ([1.0, 2.0], [2.0, 1.5])
    assert series(HISTORY, "grad_norm") == ([], [])  # non-finite values are not plotted
    assert last_value(HISTORY, "eval_loss") == 1.7 and last_value(HISTORY, "gamma") is None


def test_plot_writes_a_png_or_nothing(tmp_path: Path) -> None:
    png = plot_curves(HISTORY, tmp_path / "curves.png", keys=["loss", "eval_loss", "gamma"])
    assert png == tmp_path / "curves.png" and png.read_bytes()[:4] == b"\x89PNG"
    assert plot_curves(HISTORY, tmp_path / "none.png", keys=["gamma"]) is None
    assert not (tmp_path / "none.png").exists()


def test_table_formats_floats_briefly() -> None:
    assert table({"loss": 1.234567, "steps": 3}) == "| | |\n|---|---|\n| loss | 1.235 |\n| steps | 3 |"
