"""The LLM layer's configuration schema, re-exported from :mod:`worldsmith.core.llm_config` (where the settings
are assembled: core imports nothing from llm)."""

from __future__ import annotations

from worldsmith.core.llm_config import (BUILTIN_ROLES, DEFAULT_CONCURRENCY, EndpointConfig, LLMConfig, Provider,
                                        RoleConfigError, StructuredMode)

__all__ = ["BUILTIN_ROLES", "DEFAULT_CONCURRENCY", "EndpointConfig", "LLMConfig", "Provider", "RoleConfigError",
           "StructuredMode"]
