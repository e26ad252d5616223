"""The runtime every front end hands to the graphs: the LLM, the sandboxes and the router's actions."""

from __future__ import annotations

from typing import Any

from worldsmith.core.config import Settings
from worldsmith.graphs.runtime import GraphRuntime


def make_runtime(settings: Settings, llm: Any | None = None) -> GraphRuntime:
    """A GraphRuntime whose router runs plans with this layer's services (see :mod:`worldsmith.app.actions`)."""
    from worldsmith.app.actions import dispatch

    return GraphRuntime.from_settings(settings, llm=llm, actions=dispatch)


def default_runtime() -> GraphRuntime:
    """The runtime for the effective settings of this process (WORLDSMITH_* variables, worldsmith.toml)."""
    from worldsmith.core.config import load_settings

    return make_runtime(load_settings())
