"""Graphs by name: `worldsmith.graphs.build(name, checkpointer=None)`, and the runtime a served graph falls back to."""

from __future__ import annotations

import pytest

from worldsmith.graphs import build, names
from worldsmith.graphs.runtime import context, set_default_runtime


@pytest.fixture
def default_runtime_factory():
    """Install a fallback-runtime factory for one test, then restore the plain one."""
    yield set_default_runtime
    set_default_runtime(None)


def test_every_graph_builds_by_name(scripted, default_runtime_factory) -> None:
    _, make_rt = scripted
    rt = make_rt()
    default_runtime_factory(lambda: rt)
    assert names() == ["analyst", "evolve", "router", "world"]
    for name in names():
        graph = build(name)
        assert graph.name == name and hasattr(graph, "ainvoke")
    with pytest.raises(KeyError, match="unknown graph 'nope'; available: analyst, evolve, router, world"):
        build("nope")


def test_the_router_compiles_without_a_runtime(default_runtime_factory) -> None:
    def refuse():
        raise AssertionError("building the router graph must not build a runtime")

    default_runtime_factory(refuse)
    assert build("router").name == "router"


def test_context_prefers_the_invocations_runtime_then_the_installed_fallback(scripted, default_runtime_factory) -> None:
    _, make_rt = scripted
    given, fallback = make_rt(), make_rt()
    default_runtime_factory(lambda: fallback)

    class Served:  # what a node sees under `langgraph dev`: a dict, not a GraphRuntime
        context = {"user": "x"}

    class Invoked:
        context = given

    assert context(Invoked()) is given
    assert context(Served()) is fallback and context(None) is fallback  # built once, then shared
