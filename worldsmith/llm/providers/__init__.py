"""Providers behind the one LLM interface. Import SDKs lazily: selecting 'scripted' must not load llama.cpp."""

from __future__ import annotations

from pathlib import Path

from worldsmith.llm.config import EndpointConfig
from worldsmith.llm.providers.base import KeyPath, Provider


def make_provider(cfg: EndpointConfig, *, key_path: KeyPath, models_dir: Path) -> Provider:
    """Build the provider named by ``cfg.provider``."""
    if cfg.provider == "embedded":
        from worldsmith.llm.providers.embedded import EmbeddedProvider as cls
    elif cfg.provider == "openai":
        from worldsmith.llm.providers.openai_compat import OpenAIProvider as cls  # type: ignore[assignment]
    elif cfg.provider == "hf":
        from worldsmith.llm.providers.hf import HFProvider as cls  # type: ignore[assignment]
    elif cfg.provider == "scripted":
        from worldsmith.llm.providers.scripted import ScriptedProvider as cls  # type: ignore[assignment]
    else:  # unreachable: EndpointConfig validates the literal
        raise ValueError(f"unknown provider {cfg.provider!r}")
    return cls(cfg, key_path=key_path, models_dir=models_dir)


__all__ = ["Provider", "make_provider", "KeyPath"]
