"""LLMConfig / EndpointConfig: defaults, role overrides, loud errors for unknown or invalid keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from worldsmith.llm import LLMConfig, EndpointConfig


def test_defaults_are_the_offline_embedded_model() -> None:
    cfg = LLMConfig()
    ep = cfg.for_role("agent")
    assert (ep.provider, ep.model, ep.temperature, ep.max_tokens) == ("embedded", "qwen2.5-coder-1.5b", 0.0, 1024)
    assert ep.resolved_concurrency() == 1
    assert EndpointConfig(provider="openai").resolved_concurrency() == 4
    assert EndpointConfig(provider="openai", concurrency=32).resolved_concurrency() == 32


def test_role_override_is_merged_over_default() -> None:
    cfg = LLMConfig(
        default=EndpointConfig(temperature=0.3, max_tokens=77),
        roles={"judge": {"provider": "openai", "model": "gpt-4o-mini", "api_key_env": "OPENAI_API_KEY"}},
    )
    judge = cfg.for_role("judge")
    assert (judge.provider, judge.model, judge.api_key_env) == ("openai", "gpt-4o-mini", "OPENAI_API_KEY")
    assert (judge.temperature, judge.max_tokens) == (0.3, 77)  # inherited
    assert cfg.for_role("agent") == cfg.default  # roles without an override get the default
    assert cfg.key_path("judge", "model") == "llm.roles.judge.model"
    assert cfg.key_path("judge", "timeout_s") == "llm.default.timeout_s"
    assert cfg.key_path("agent", "model") == "llm.default.model"


def test_unknown_key_in_role_override_names_the_key_and_suggests() -> None:
    with pytest.raises(ValidationError) as info:
        LLMConfig(roles={"judge": {"modle": "x"}})
    msg = str(info.value)
    assert "llm.roles.judge.modle" in msg
    assert "did you mean 'model'" in msg


def test_invalid_value_in_role_override_names_the_key() -> None:
    with pytest.raises(ValidationError) as info:
        LLMConfig(roles={"teacher": {"temperature": 5}})
    assert "llm.roles.teacher.temperature" in str(info.value)


def test_unknown_endpoint_field_is_rejected() -> None:
    with pytest.raises(ValidationError):
        EndpointConfig(modle="x")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        EndpointConfig(provider="anthropic")  # type: ignore[arg-type]


def test_every_endpoint_field_is_documented() -> None:
    for name, field in EndpointConfig.model_fields.items():
        assert field.description, f"EndpointConfig.{name} has no description"
    for name, field in LLMConfig.model_fields.items():
        assert field.description, f"LLMConfig.{name} has no description"


def test_dirs_default_under_home(tmp_path: Path) -> None:
    cfg = LLMConfig()
    assert cfg.resolved_cache_dir(tmp_path) == tmp_path / "cache" / "llm"
    assert cfg.resolved_models_dir(tmp_path) == tmp_path / "models"
    cfg2 = LLMConfig(cache_dir=tmp_path / "c", models_dir=tmp_path / "m")
    assert cfg2.resolved_cache_dir(tmp_path / "x") == tmp_path / "c"
    assert cfg2.resolved_models_dir(tmp_path / "x") == tmp_path / "m"


def test_api_key_is_secret() -> None:
    ep = EndpointConfig(provider="openai", api_key="sk-123")
    assert "sk-123" not in repr(ep) and "sk-123" not in ep.model_dump_json()
