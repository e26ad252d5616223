"""Registers each graph builder under its public name: `builder(checkpointer=None) -> compiled graph`."""

from __future__ import annotations

from typing import Any

from worldsmith.graphs import register


@register("analyst")
def _analyst(checkpointer: Any = None) -> Any:
    from worldsmith.graphs.analyst import build_analyst_graph

    return build_analyst_graph(checkpointer=checkpointer)  # the runtime comes as context= at invocation


@register("router")
def _router(checkpointer: Any = None) -> Any:
    from worldsmith.graphs.router import build_router_graph

    return build_router_graph(checkpointer=checkpointer)


@register("world")
def _world(checkpointer: Any = None) -> Any:
    from worldsmith.graphs.world import build_world_graph

    return build_world_graph(checkpointer=checkpointer)


@register("evolve")
def _evolve(checkpointer: Any = None) -> Any:
    from worldsmith.graphs.evolve import build_evolve_graph

    return build_evolve_graph(checkpointer=checkpointer)
