"""Every graph by name: `worldsmith.graphs.build(name, checkpointer=None)` returns a compiled LangGraph graph.

Graphs are compiled without a runtime: callers pass one when they invoke them (``context=rt``, a
:class:`worldsmith.graphs.runtime.GraphRuntime`); a graph invoked without one (under ``langgraph dev``) uses the
process-wide runtime of :func:`worldsmith.graphs.runtime.context`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_BUILDERS: dict[str, Callable[..., Any]] = {}


def register(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        _BUILDERS[name] = fn
        return fn
    return deco


def names() -> list[str]:
    _load_all()
    return sorted(_BUILDERS)


def build(name: str, checkpointer: Any = None) -> Any:
    _load_all()
    if name not in _BUILDERS:
        raise KeyError(f"unknown graph {name!r}; available: {', '.join(sorted(_BUILDERS))}")
    return _BUILDERS[name](checkpointer=checkpointer)


def _load_all() -> None:
    if _BUILDERS:
        return
    from worldsmith.graphs import registry  # noqa: F401  (registers the builders)
