from __future__ import annotations

from pathlib import Path

import pytest

from worldsmith.core.config import ConfigError, load_settings, parse_overrides


def _toml(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "worldsmith.toml"
    p.write_text(text)
    return p


def test_defaults_use_embedded_default_model(tmp_path: Path) -> None:
    s = load_settings(overrides={})
    ep = s.llm.for_role("agent")
    assert ep.provider == "embedded"
    assert ep.model == "qwen2.5-coder-1.5b"
    assert s.llm.for_role("teacher").model == "qwen2.5-coder-1.5b"


def test_precedence_flags_over_env_over_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _toml(tmp_path, '[analyst]\nmax_turns = 4\nmax_tokens_per_turn = 700\ncell_timeout_s = 9\n')
    s = load_settings(cfg)
    assert (s.analyst.max_turns, s.analyst.max_tokens_per_turn, s.analyst.cell_timeout_s) == (4, 700, 9)
    monkeypatch.setenv("WORLDSMITH_ANALYST__MAX_TURNS", "6")
    monkeypatch.setenv("WORLDSMITH_ANALYST__MAX_TOKENS_PER_TURN", "800")
    s = load_settings(cfg)
    assert (s.analyst.max_turns, s.analyst.max_tokens_per_turn, s.analyst.cell_timeout_s) == (6, 800, 9)
    s = load_settings(cfg, parse_overrides(["analyst.max_turns=8"]))
    assert (s.analyst.max_turns, s.analyst.max_tokens_per_turn, s.analyst.cell_timeout_s) == (8, 800, 9)


def test_role_override_merges_over_default(tmp_path: Path) -> None:
    cfg = _toml(tmp_path, '[llm.default]\ntemperature = 0.2\n[llm.roles.judge]\nprovider = "openai"\n'
                          'model = "gpt-4o-mini"\nbase_url = "http://127.0.0.1:9/v1"\n')
    s = load_settings(cfg)
    judge = s.llm.for_role("judge")
    assert (judge.provider, judge.model, judge.temperature) == ("openai", "gpt-4o-mini", 0.2)
    assert s.llm.for_role("agent").provider == "embedded"


def test_unknown_keys_are_errors_from_every_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="analyst.max_turnz"):
        load_settings(_toml(tmp_path, "[analyst]\nmax_turnz = 3\n"))
    with pytest.raises(ConfigError, match="unknown"):
        load_settings(overrides=parse_overrides(["nonsense.key=1"]))
    monkeypatch.setenv("WORLDSMITH_ANALYTS__MAX_TURNS", "3")
    with pytest.raises(ConfigError, match="WORLDSMITH_ANALYTS__MAX_TURNS"):
        load_settings()


def test_a_removed_setting_in_an_old_config_says_to_delete_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # analyst.verify_answer was never read by anything (issue 12) and is gone
    with pytest.raises(ConfigError, match=r"analyst.verify_answer: unknown key, removed .*delete it"):
        load_settings(_toml(tmp_path, "[analyst]\nverify_answer = true\n"))
    monkeypatch.setenv("WORLDSMITH_ANALYST__VERIFY_ANSWER", "false")
    with pytest.raises(ConfigError, match=r"analyst.verify_answer: unknown key, removed"):
        load_settings()


def test_the_eval_retry_errors_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().eval.retry_errors is False
    monkeypatch.setenv("WORLDSMITH_EVAL__RETRY_ERRORS", "true")
    assert load_settings().eval.retry_errors is True


def test_bad_values_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="analyst.max_turns"):
        load_settings(overrides={"analyst": {"max_turns": 0}})
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_settings(_toml(tmp_path, "[analyst\n"))
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "missing.toml")


def test_secrets_are_masked(tmp_path: Path) -> None:
    cfg = _toml(tmp_path, '[llm.default]\nprovider = "openai"\nbase_url = "http://x/v1"\napi_key = "sk-very-secret"\n')
    s = load_settings(cfg)
    shown = repr(s.masked())
    assert "sk-very-secret" not in shown
    assert "***" in shown
    assert s.llm.for_role("agent").api_key.get_secret_value() == "sk-very-secret"


def test_parse_overrides_json_values() -> None:
    assert parse_overrides(["a.b=3", "a.c=true", "d=text"]) == {"a": {"b": 3, "c": True}, "d": "text"}
    with pytest.raises(ConfigError):
        parse_overrides(["novalue"])
