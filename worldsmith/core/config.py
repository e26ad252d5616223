"""One configuration: defaults < `worldsmith.toml` < `WORLDSMITH_*` environment < CLI flags.

Nested keys use `__` in the environment (`WORLDSMITH_LLM__DEFAULT__MODEL=...`) and dots on the CLI
(`--set llm.default.model=...`). Unknown keys are an error wherever they come from.
"""

from __future__ import annotations

import contextvars
import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, TomlConfigSettingsSource

from worldsmith.core.llm_config import LLMConfig
from worldsmith.core.rubric_grading import JUDGE_ENV
from worldsmith.core.sandbox_config import SandboxConfig

ENV_PREFIX = "WORLDSMITH_"
CONFIG_FILE_ENV = "WORLDSMITH_CONFIG"
DEFAULT_CONFIG_FILE = "worldsmith.toml"
_toml_path: contextvars.ContextVar[Path | None] = contextvars.ContextVar("worldsmith_toml", default=None)


class ConfigError(ValueError):
    """The configuration is invalid; the message names the key and the source to fix."""


def _default_home() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "worldsmith"


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class AnalystConfig(Section):
    max_turns: int = Field(10, ge=1, le=100, description="assistant turns before the analyst must stop (turns)")
    max_observation_chars: int = Field(4000, ge=200, description="interpreter output shown to the model per turn (characters)")
    profile_chars: int = Field(2500, ge=500, description="budget for the workspace profile in the first prompt (characters; up to two "
                                     "tables, each further table adds half of it, up to 1.6 times)")
    cell_timeout_s: float = Field(60.0, gt=0, description="wall-clock limit per code cell (seconds)")
    max_tokens_per_turn: int = Field(384, ge=64, description="completion budget per assistant turn (tokens). On the "
                                     "DABench dev run of 2026-11-30 the longest turn that ended by itself took 329 "
                                     "tokens (median 104); the 4 of 244 turns that hit the old 512 were runaways, "
                                     "and on CPU each costs most of a minute")
    setup_copy_room: bool = Field(True, description="when the session ran a setup before the first cell (linked tables "
                                  "joined, units made good), each turn's budget grows by the setup's length in tokens "
                                  "(~3 characters each): the 1.5B model copies the setup into its cells (47 of 81 "
                                  "cells at f4ca853), and every cell cut at the plain budget there was such a copy")
    format_retries: int = Field(2, ge=0, le=5, description="re-asks when an answer lacks the requested @name[value] tags")
    repeat_resamples: int = Field(0, ge=0, le=5, description="a code cell identical to one that already failed in this "
                                  "question (or that reads a file with the reader the feedback named wrong) is not run "
                                  "again: the turn is sampled anew at repeat_temperature, up to this many times, the "
                                  "dropped completions recorded. 0 (default): run the repeat, with a note. On the 43 "
                                  "generated questions, 2 re-sampled 64 turns and solved no more (9/43 either way) "
                                  "for ~20 s more a question")
    restore_setup: bool = Field(True, description="after a cell that reads the files the session's setup loaded "
                                "(the join the task turn shows as run) into the names it made and leaves `df` "
                                "otherwise, or that cuts the setup's `df` to one group and filters for another, run "
                                "the setup again and say so (agents/setup_guard.py)")
    repeat_temperature: float = Field(0.7, gt=0, le=2, description="sampling temperature of those re-samples")
    postprocess: bool = Field(True, description="after the format feedback is used up, cut the answer line's placeholder "
                              "words from an answer's values and round its numbers to the requested decimals for "
                              "grading (recorded beside the model's own answer); when only the rounding is off, "
                              "round at once instead of re-asking; set False when "
                              "sampling training data, so the grader sees the raw answer")


class EvalConfig(Section):
    samples: int = Field(1, ge=1, description="trajectories per task (pass@1 is the mean over samples)")
    concurrency: int = Field(1, ge=1, description="tasks solved at once (the embedded model serialises anyway)")
    temperature_when_sampling: float = Field(0.7, ge=0, description="temperature used when samples > 1")
    greedy_first: bool = Field(True, description="with samples > 1, the first sample decodes greedily and only the "
                               "others at temperature_when_sampling, so the vote (ties go to the first sample) starts "
                               "from the greedy answer instead of replacing it with three weaker draws")
    retry_errors: bool = Field(False, description="on --resume, solve again the items that failed on an LLM or sandbox "
                               "error instead of keeping the failure (wrong answers are kept either way)")


class WorldConfig(Section):
    rows: int = Field(20_000, ge=100, description="canonical rows of the main entity table")
    seed: int = Field(0, description="default seed for world generation")
    contract_retries: int = Field(2, ge=0, le=5, description="contract-writer retries after validation errors")
    concurrency: int = Field(2, ge=1, le=64, description="rows a world pipeline step works on at once (LLM requests, sandbox runs)")


class Settings(BaseSettings):
    """Effective configuration of a worldsmith process."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid",
                                      validate_assignment=True, nested_model_default_partial_update=True)

    home: Path = Field(default_factory=_default_home, description="cache root: assembled models, LLM response cache")
    runs_dir: Path = Field(Path("runs"), description="where run directories (log, config, report) are created")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    llm: LLMConfig = Field(default_factory=LLMConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    analyst: AnalystConfig = Field(default_factory=AnalystConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    world: WorldConfig = Field(default_factory=WorldConfig)

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = _toml_path.get()
        if path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)

    def masked(self) -> dict[str, Any]:
        """The configuration as plain data with every secret replaced by '***' (or null when unset)."""
        return _mask(self.model_dump(mode="python"))


def _mask(obj: Any) -> Any:
    if isinstance(obj, SecretStr):
        return "***" if obj.get_secret_value() else ""
    if isinstance(obj, dict):
        return {k: ("***" if _secret_key(k) and v not in (None, "") and not isinstance(v, dict) else _mask(v))
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_mask(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _secret_key(key: str) -> bool:
    k = key.lower()
    return k.endswith(("api_key", "token", "secret", "password")) and not k.endswith("_env")


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """`["llm.default.model=x", "analyst.max_turns=5"]` → nested dict. Values parse as JSON when they can."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"--set {pair!r}: expected KEY=VALUE, e.g. --set analyst.max_turns=5")
        key, raw = pair.split("=", 1)
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise ConfigError(f"--set {pair!r}: empty key")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {pair!r}: {p} is set both as a value and as a section")
        node[parts[-1]] = value
    return out


def _check_env_keys() -> None:
    """pydantic-settings ignores unknown WORLDSMITH_* variables; we refuse them so a typo is never silent."""
    top = set(Settings.model_fields)
    for name in os.environ:
        if not name.startswith(ENV_PREFIX) or name == CONFIG_FILE_ENV or name in JUDGE_ENV:
            continue  # WORLDSMITH_JUDGE_*: the task verifiers' judge endpoint (core/rubric_grading.py), not a setting
        head = name[len(ENV_PREFIX):].split("__", 1)[0].lower()
        if head not in top:
            raise ConfigError(f"environment variable {name}: unknown setting {head!r} (known: {', '.join(sorted(top))})")


def load_settings(config_file: str | os.PathLike[str] | None = None, overrides: dict[str, Any] | None = None) -> Settings:
    """Build the effective settings. `config_file` (or $WORLDSMITH_CONFIG, or ./worldsmith.toml if present)."""
    path: Path | None
    if config_file is not None:
        path = Path(config_file)
    elif os.environ.get(CONFIG_FILE_ENV):
        path = Path(os.environ[CONFIG_FILE_ENV])
    else:
        path = Path(DEFAULT_CONFIG_FILE) if Path(DEFAULT_CONFIG_FILE).is_file() else None
    if path is not None:
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        try:
            tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path}: invalid TOML ({exc})") from exc
    _check_env_keys()
    token = _toml_path.set(path)
    try:
        return Settings(**(overrides or {}))
    except ValidationError as exc:
        raise ConfigError(_explain(exc, path)) from exc
    finally:
        _toml_path.reset(token)


#: Settings that existed once and were removed: an old config file that sets one is told what to do.
REMOVED_KEYS = {
    "analyst.verify_answer": "removed (nothing ever read it; the answer-format check is analyst.format_retries): "
                             "delete it",
}


def _explain(exc: ValidationError, path: Path | None) -> str:
    where = f" (sources: CLI flags, {ENV_PREFIX}* environment" + (f", {path})" if path else ")")
    lines = []
    for e in exc.errors():
        key = ".".join(str(p) for p in e["loc"])
        msg = "unknown key" if e["type"] == "extra_forbidden" else e["msg"]
        if e["type"] == "extra_forbidden" and key in REMOVED_KEYS:
            msg = f"unknown key, {REMOVED_KEYS[key]}"
        lines.append(f"{key}: {msg}")
    return "invalid configuration" + where + ": " + "; ".join(lines)
