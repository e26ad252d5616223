"""Graph factories for the LangGraph server (`langgraph dev` reads them from langgraph.json).

Settings come from the server's environment (WORLDSMITH_* variables, worldsmith.toml); the server supplies
its own checkpointer, so these graphs are compiled without one. Each factory builds its graph once per process.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from worldsmith.graphs import build


@lru_cache(maxsize=None)
def _graph(name: str) -> Any:
    return build(name)


def analyst(config: Any = None) -> Any:
    return _graph("analyst")


def router(config: Any = None) -> Any:
    return _graph("router")


def world(config: Any = None) -> Any:
    return _graph("world")
