"""Graph factories for the LangGraph server (`langgraph dev` reads them from langgraph.json).

Settings come from the server's environment (WORLDSMITH_* variables, worldsmith.toml). A served graph gets no
Python context from its client, so graphs fall back to one process-wide runtime; this module makes it the
application's (the router can then run its plans). The server supplies its own checkpointer, so the graphs are
compiled without one, each once per process.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from worldsmith.app.runtime import default_runtime
from worldsmith.graphs import build
from worldsmith.graphs.runtime import set_default_runtime

set_default_runtime(default_runtime)


@lru_cache(maxsize=None)
def _graph(name: str) -> Any:
    return build(name)


def analyst(config: Any = None) -> Any:
    return _graph("analyst")


def evolve(config: Any = None) -> Any:
    return _graph("evolve")


def router(config: Any = None) -> Any:
    return _graph("router")


def world(config: Any = None) -> Any:
    return _graph("world")
