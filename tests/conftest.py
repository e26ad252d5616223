"""Project-wide fixtures. Sub-folders add their own (tests/llm/conftest.py has the fake OpenAI server)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # so `tests.fakes` imports work from any rootdir
DABENCH = (ROOT.parent / "shared" / "benchmarks" / "dabench-dev").resolve()


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's WORLDSMITH_* variables or worldsmith.toml must not change test outcomes."""
    for name in list(os.environ):
        if name.startswith("WORLDSMITH_"):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def dabench_dir() -> Path:
    if not (DABENCH / "questions.jsonl").exists():
        pytest.skip(f"DABench dev share not found at {DABENCH}")
    return DABENCH
