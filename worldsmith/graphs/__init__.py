"""Every graph by name: `worldsmith.graphs.build(name, **config)` returns a compiled LangGraph graph.

`config` holds settings overrides (nested dicts, as in worldsmith.toml) plus the reserved keys
`llm` (an LLM instance to use instead of building one), `checkpointer` and `settings`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from worldsmith.core.config import Settings, load_settings

_BUILDERS: dict[str, Callable[..., Any]] = {}


def register(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        _BUILDERS[name] = fn
        return fn
    return deco


def names() -> list[str]:
    _load_all()
    return sorted(_BUILDERS)


def build(name: str, **config: Any) -> Any:
    _load_all()
    if name not in _BUILDERS:
        raise KeyError(f"unknown graph {name!r}; available: {', '.join(sorted(_BUILDERS))}")
    llm = config.pop("llm", None)
    checkpointer = config.pop("checkpointer", None)
    settings: Settings = config.pop("settings", None) or load_settings(overrides=config)
    from worldsmith.graphs.runtime import GraphRuntime

    rt = GraphRuntime.from_settings(settings, llm=llm)
    return _BUILDERS[name](rt, checkpointer=checkpointer)


def _load_all() -> None:
    if _BUILDERS:
        return
    from worldsmith.graphs import registry  # noqa: F401  (registers the builders)
