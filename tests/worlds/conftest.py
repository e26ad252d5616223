"""Shared fixtures for the world-engine tests: small worlds built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from worldsmith.evolution.worlds import build_world, load_template


@pytest.fixture(scope="session")
def commercial_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The commercial template at small size, built and audited once."""
    out = tmp_path_factory.mktemp("worlds") / "commercial"
    build_world(load_template("commercial_growth", rows=4000), seed=3, out_dir=out, produced_by="template:commercial")
    return out


@pytest.fixture(scope="session")
def panel_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A panel world (lags, xlsx partitions, sum constraint): finance template."""
    out = tmp_path_factory.mktemp("worlds") / "finance"
    build_world(load_template("finance"), seed=5, out_dir=out)
    return out
