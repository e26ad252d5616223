"""The provider contract: one attempt, no retries, no cache, no accounting (the client owns those)."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable

from worldsmith.llm.config import EndpointConfig
from worldsmith.llm.types import ProviderRequest, RawCompletion

#: (role, field) -> the settings key a user edits, e.g. ("judge", "model") -> "llm.roles.judge.model".
KeyPath = Callable[[str, str], str]


class Provider(ABC):
    """Talks to one endpoint. Raise :class:`TransientError` for retryable failures and the other
    :mod:`worldsmith.llm.errors` classes (with the config key to fix) for everything else."""

    name: str = "?"
    #: True when ``acomplete`` is natively async; otherwise it runs ``complete`` in a worker thread.
    native_async: bool = False
    #: False for providers whose answers must not be cached (the scripted provider: a script is code, not a model).
    cacheable: bool = True

    def __init__(self, cfg: EndpointConfig, *, key_path: KeyPath, models_dir: Path) -> None:
        self.cfg = cfg
        self.key_path = key_path
        self.models_dir = models_dir

    @abstractmethod
    def complete(self, req: ProviderRequest) -> RawCompletion: ...

    async def acomplete(self, req: ProviderRequest) -> RawCompletion:
        return await asyncio.to_thread(self.complete, req)

    def check(self, role: str) -> None:
        """Validate what can be validated without a request (keys, packages, files). Raise on a problem."""

    def cache_identity(self) -> dict[str, Any]:
        """What identifies this endpoint's answers in the response cache key."""
        return {"provider": self.name, "model": self.cfg.model, "base_url": self.cfg.base_url}

    def describe(self) -> str:
        """Short human description of the endpoint, for messages."""
        return f"{self.name}:{self.cfg.model}"

    def close(self) -> None:
        """Release clients and connections (models stay shared in the process)."""
