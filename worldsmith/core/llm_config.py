"""Configuration schema of the LLM layer (``settings.llm``): one endpoint config per role, merged over a default.

It lives in core because the settings are assembled here and core imports no higher layer; ``worldsmith.llm``
re-exports it. Nothing here reads environment variables; the only variable the LLM layer ever reads is the one
named by ``api_key_env`` (read by the openai provider when it is first used).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator


Provider = Literal["embedded", "openai", "scripted", "hf"]
StructuredMode = Literal["auto", "json_schema", "json_object", "none"]

#: Built-in per-role overrides, merged between ``default`` and the user's ``roles`` entry: ``llm.embed()``
#: uses the offline local embedding model unless ``llm.roles.embed`` says otherwise (e.g. an openai model).
BUILTIN_ROLES: dict[str, dict[str, Any]] = {"embed": {"provider": "embedded", "model": "all-minilm-l6-v2"}}

#: Concurrency used when ``concurrency`` is None, per provider.
DEFAULT_CONCURRENCY: dict[str, int] = {"embedded": 1, "openai": 4, "scripted": 4, "hf": 1}


class RoleConfigError(ValueError):
    """A role's override does not merge into a valid endpoint; the message names the ``llm.roles.<role>`` key.

    ``worldsmith.llm.LLMConfigError`` derives from it, so callers of the LLM layer catch both as one."""


class EndpointConfig(BaseModel):
    """Where and how one role talks to a model."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    provider: Provider = Field(
        "embedded",
        description="'embedded' = llama.cpp in this process (offline); 'openai' = any OpenAI-compatible HTTP "
        "endpoint; 'scripted' = deterministic canned answers (tests, demos); 'hf' = a local Hugging Face "
        "checkpoint folder (a trained student) run with transformers.",
    )
    model: str = Field(
        "qwen2.5-coder-1.5b",
        description="Model name. For 'embedded' a registry name (qwen2.5-coder-1.5b, qwen2.5-coder-0.5b, "
        "smollm2-135m); for 'openai' the server's model id; for 'scripted' the name of a registered script.",
    )
    base_url: str | None = Field(
        None,
        description="OpenAI-compatible base URL including /v1 (e.g. http://localhost:8000/v1). "
        "None = the openai SDK's default (api.openai.com). Ignored by other providers.",
    )
    api_key: SecretStr | None = Field(None, description="API key for 'openai'. Prefer api_key_env.")
    api_key_env: str | None = Field(
        None,
        description="Name of the environment variable holding the API key (e.g. OPENAI_API_KEY). If neither "
        "api_key nor api_key_env is set, a localhost/127.0.0.1 base_url gets the placeholder key 'EMPTY' "
        "(vLLM, SGLang, Ollama, llama.cpp server accept it); any other endpoint is a config error.",
    )
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature (unitless); 0 = greedy.")
    top_p: float | None = Field(None, gt=0.0, le=1.0, description="Nucleus sampling mass; None = provider default.")
    max_tokens: int = Field(1024, ge=1, description="Maximum completion length, in tokens.")
    seed: int | None = Field(
        None,
        description="Sampling seed. With temperature>0, sample i of a request uses seed+i (see sample_index).",
    )
    timeout_s: float = Field(120.0, gt=0, description="Per-attempt request timeout, in seconds (HTTP providers).")
    max_retries: int = Field(4, ge=0, description="Retries after the first attempt on 429/5xx/timeouts/connection errors.")
    backoff_base_s: float = Field(
        0.5, ge=0, description="First backoff delay, in seconds; doubles per retry, with jitter."
    )
    backoff_max_s: float = Field(30.0, ge=0, description="Cap on one backoff delay (also caps Retry-After), in seconds.")
    concurrency: int | None = Field(
        None,
        ge=1,
        description="Requests in flight per endpoint (calls beyond it wait). None = 4 for openai/scripted, "
        "1 for embedded (llama.cpp runs one request at a time).",
    )
    n_ctx: int = Field(8192, ge=256, description="Embedded: context window to allocate, in tokens.")
    n_threads: int | None = Field(
        None, ge=1, description="Embedded: CPU threads for llama.cpp; None = every CPU this process may use "
        "(fastest on a machine of its own; on a machine busy with other work set 1: spin-waiting threads "
        "make all-cores many times slower there)."
    )
    structured: StructuredMode = Field(
        "auto",
        description="How structured output is requested. 'auto': openai tries json_schema, falls back to "
        "json_object then prompt-only (remembered per endpoint); embedded uses a schema grammar. 'none' = "
        "prompt-only JSON, validated afterwards.",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra JSON fields sent with each request (openai: extra_body, e.g. vLLM's top_k; "
        "scripted: declarative rules, see providers/scripted.py).",
    )

    def resolved_concurrency(self) -> int:
        """Concurrency limit with the per-provider default applied."""
        return self.concurrency if self.concurrency is not None else DEFAULT_CONCURRENCY[self.provider]


_ENDPOINT_FIELDS = frozenset(EndpointConfig.model_fields)


class LLMConfig(BaseModel):
    """The LLM layer's settings: a default endpoint plus partial per-role overrides."""

    model_config = ConfigDict(extra="forbid")

    default: EndpointConfig = Field(default_factory=EndpointConfig, description="Endpoint used by every role.")
    roles: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Per-role partial overrides merged over `default`, e.g. "
        "{'judge': {'provider': 'openai', 'model': 'gpt-4o-mini', 'api_key_env': 'OPENAI_API_KEY'}}.",
    )
    cache: bool = Field(True, description="Keep an on-disk response cache (reproducible re-runs, cheap resume).")
    cache_dir: Path | None = Field(None, description="Response cache folder; None = <home>/cache/llm.")
    models_dir: Path | None = Field(None, description="Where assembled embedded GGUF files go; None = <home>/models.")

    @model_validator(mode="after")
    def _check_roles(self) -> "LLMConfig":
        for role, override in self.roles.items():
            unknown = sorted(set(override) - _ENDPOINT_FIELDS)
            if unknown:
                key = unknown[0]
                close = difflib.get_close_matches(key, sorted(_ENDPOINT_FIELDS), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(
                    f"llm.roles.{role}.{key}: unknown endpoint setting{hint}; "
                    f"valid keys: {', '.join(sorted(_ENDPOINT_FIELDS))}"
                )
            self.for_role(role)  # validates the merged values now, not at the first call
        return self

    def for_role(self, role: str) -> EndpointConfig:
        """The endpoint config for ``role``: its override (if any) merged over ``default``."""
        override = {**BUILTIN_ROLES.get(role, {}), **self.roles.get(role, {})}
        if not override:
            return self.default
        merged = self.default.model_dump()
        merged.update(override)
        try:
            return EndpointConfig.model_validate(merged)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"])
            raise RoleConfigError(f"llm.roles.{role}.{field}: {err['msg']} (got {err.get('input')!r})") from None

    def key_path(self, role: str, field: str) -> str:
        """The settings key a user edits to change ``field`` for ``role`` (used in error messages)."""
        if field in self.roles.get(role, {}) or field in BUILTIN_ROLES.get(role, {}):
            return f"llm.roles.{role}.{field}"
        return f"llm.default.{field}"

    def resolved_cache_dir(self, home: Path) -> Path:
        return self.cache_dir if self.cache_dir is not None else Path(home) / "cache" / "llm"

    def resolved_models_dir(self, home: Path) -> Path:
        return self.models_dir if self.models_dir is not None else Path(home) / "models"
