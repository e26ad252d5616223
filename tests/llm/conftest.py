"""Fixtures of the LLM-layer tests. The fake OpenAI server lives in tests/fakes so other folders can reuse it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.fake_openai import FakeOpenAI, fake_openai  # noqa: F401  (re-exported fixture)
from worldsmith.llm import LLM, LLMConfig


@pytest.fixture
def make_llm(tmp_path: Path):
    """Build an LLM whose home is the test's tmp dir; closes it afterwards."""
    made: list[LLM] = []

    def build(default=None, **config) -> LLM:  # type: ignore[no-untyped-def]
        cfg = LLMConfig(default=default, **config) if default is not None else LLMConfig(**config)
        llm = LLM(cfg, home=tmp_path / "home")
        made.append(llm)
        return llm

    yield build
    for llm in made:
        llm.close()
