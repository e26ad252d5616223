"""The provider contract: one attempt, no retries, no cache, no accounting (the client owns those)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable

from worldsmith.llm.config import EndpointConfig
from worldsmith.llm.errors import LLMConfigError
from worldsmith.llm.types import ProviderRequest, RawCompletion, RawEmbedding

#: (role, field) -> the settings key a user edits, e.g. ("judge", "model") -> "llm.roles.judge.model".
KeyPath = Callable[[str, str], str]


class Provider(ABC):
    """Talks to one endpoint, async only (the client's sync API wraps it). Raise :class:`TransientError` for
    retryable failures and the other :mod:`worldsmith.llm.errors` classes (with the config key to fix) for
    everything else. Blocking work (llama.cpp, numpy) runs in a worker thread so the event loop stays free."""

    name: str = "?"
    #: False for providers whose answers must not be cached (the scripted provider: a script is code, not a model).
    cacheable: bool = True

    def __init__(self, cfg: EndpointConfig, *, key_path: KeyPath, models_dir: Path) -> None:
        self.cfg = cfg
        self.key_path = key_path
        self.models_dir = models_dir

    @abstractmethod
    async def acomplete(self, req: ProviderRequest) -> RawCompletion: ...

    async def aembed(self, texts: list[str], role: str) -> RawEmbedding:
        """One embedding vector per text. Providers without embeddings keep this default."""
        raise LLMConfigError(f"{self.key_path(role, 'provider')}: provider {self.name!r} has no embeddings; use "
                             "'embedded' (model all-minilm-l6-v2, offline), 'openai' or 'scripted'")

    async def aload(self, role: str) -> float:
        """Load what the first request would otherwise load lazily; seconds spent (0.0: nothing to load)."""
        return 0.0

    def check(self, role: str) -> None:
        """Validate what can be validated without a request (keys, packages, files). Raise on a problem."""

    def cache_identity(self) -> dict[str, Any]:
        """What identifies this endpoint's answers in the response cache key."""
        return {"provider": self.name, "model": self.cfg.model, "base_url": self.cfg.base_url}

    def describe(self) -> str:
        """Short human description of the endpoint, for messages."""
        return f"{self.name}:{self.cfg.model}"

    async def aclose(self) -> None:
        """Release what belongs to the running event loop (e.g. its HTTP client)."""

    def close(self) -> None:
        """Drop clients and connections (models stay shared in the process)."""
