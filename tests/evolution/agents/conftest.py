"""Fixtures of the evolution-agent tests: a scripted model, a fast sandbox and a small data room."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from worldsmith.core.sandbox_config import SandboxConfig
from worldsmith.llm import LLM, LLMConfig
from worldsmith.llm.providers.scripted import Script, register_script, unregister_script

SALES = "region,amount,units\nnorth,10,1\nsouth,20,2\nnorth,30,3\neast,40,4\nsouth,50,5\n"


@pytest.fixture
def scripted_llm(tmp_path: Path):
    """(script, llm): an LLM whose every role answers from `script` (no cache, so every call reaches it)."""
    name = f"evo-{uuid.uuid4().hex[:8]}"
    script = register_script(name, Script())
    llm = LLM(LLMConfig(default={"provider": "scripted", "model": name}, cache=False), home=tmp_path / "home")
    yield script, llm
    llm.close()
    unregister_script(name)


@pytest.fixture
def sandbox_config() -> SandboxConfig:
    # the process backend starts fastest; isolation is the sandbox tests' subject, not these
    return SandboxConfig(backend="process", preload=[], timeout_s=60, kill_grace_s=1.0)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    (d / "sales.csv").write_text(SALES)
    return d
