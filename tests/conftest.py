"""Project-wide fixtures. Sub-folders add their own (tests/llm/conftest.py has the fake OpenAI server)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
import uuid

import pytest

from worldsmith.core.config import load_settings
from worldsmith.graphs.runtime import GraphRuntime
from worldsmith.llm import LLM
from worldsmith.llm.providers.scripted import Script, register_script, unregister_script

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



@pytest.fixture
def sales_csv(tmp_path: Path) -> Path:
    p = tmp_path / "data" / "sales.csv"
    p.parent.mkdir()
    p.write_text("region,amount\nnorth,10\nsouth,20\neast,30\n")
    return p


@pytest.fixture
def scripted(tmp_path: Path):
    """(script, make_runtime): a registered Script and a factory for a GraphRuntime that talks to it."""
    name = f"test-{uuid.uuid4().hex[:8]}"
    script = register_script(name, Script())

    def make_runtime(**overrides) -> GraphRuntime:
        base = {"home": str(tmp_path / "home"), "runs_dir": str(tmp_path / "runs"),
                "llm": {"default": {"provider": "scripted", "model": name}, "cache": False}}
        for key, value in overrides.items():
            base.setdefault(key, {}).update(value) if isinstance(value, dict) else base.__setitem__(key, value)
        settings = load_settings(overrides=base)
        return GraphRuntime.from_settings(settings, llm=LLM.from_settings(settings))

    yield script, make_runtime
    unregister_script(name)


CODE_TURN = "<think>\nLoad the data and compute the mean.\n</think>\n<code>\ndf = pd.read_csv('sales.csv')\nprint(df['amount'].mean())\n</code>"
ANSWER_TURN = "<think>\nThe mean is 20.\n</think>\n<answer>\nThe mean amount is 20.0. @mean_amount[20.0]\n</answer>"
