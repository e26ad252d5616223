"""Registers each graph builder under its public name: `builder(checkpointer=None) -> compiled graph`."""

from __future__ import annotations

from typing import Any

from worldsmith.graphs import register
from worldsmith.graphs.runtime import context


@register("analyst")
def _analyst(checkpointer: Any = None) -> Any:
    from worldsmith.graphs.analyst import build_analyst_graph

    # The analyst builder still closes over a runtime (its nodes move to module level with the trajectory
    # record work); until then it gets the process-wide one.
    return build_analyst_graph(context(None), checkpointer=checkpointer)


@register("router")
def _router(checkpointer: Any = None) -> Any:
    from worldsmith.graphs.router import build_router_graph

    return build_router_graph(checkpointer=checkpointer)


@register("world")
def _world(checkpointer: Any = None) -> Any:
    from worldsmith.graphs.world import build_world_graph

    # as for the analyst: the world graph's builder takes a runtime until it becomes a pipeline
    return build_world_graph(context(None), checkpointer=checkpointer)
