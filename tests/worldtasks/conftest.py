from __future__ import annotations

from pathlib import Path

import pytest

from worldsmith.evolution.worlds.templates import load_template
from worldsmith.evolution.worlds.world import build_world


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An audited customer-pricing world (3,000 accounts, seed 7), shared read-only by the task tests."""
    out = tmp_path_factory.mktemp("w") / "pricing"
    build_world(load_template("customer_pricing", rows=3000), 7, out)
    return out
