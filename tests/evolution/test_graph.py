"""The exploration graph's rules and queries, on a graph built by hand:

    1 root ── 2 deepen (supported) ── 4 deepen (revised) ── 6 compose (proposed) [parents 4, 5]
          └─ 3 search (unsupported)                          ╱
          └─ 5 decompose (supported) ───────────────────────╯
"""

from __future__ import annotations

from pathlib import Path

import pytest

from worldsmith.evolution.workspace import ExplorationGraph, GraphError


@pytest.fixture
def graph(tmp_path: Path) -> ExplorationGraph:
    g = ExplorationGraph(tmp_path / "graph.sqlite")
    g.add_node(mode="root", goal="initial workspace", status="supported")  # 1
    g.add_node(mode="deepen", parents=[1], goal="revenue by region", depends_on="f1")  # 2
    g.set_status(2, "running")
    g.set_status(2, "supported", conclusion="south revenue 20 vs north 10")
    g.add_node(mode="search", parents=[1], goal="promotion memos")  # 3
    g.set_status(3, "unsupported", conclusion="memos mention no promotion")
    g.add_node(mode="deepen", parents=[2], goal="why south", depends_on="f2")  # 4
    g.set_status(4, "revised", conclusion="south +100% during the promotion")
    g.add_node(mode="decompose", parents=[1], goal="north only")  # 5
    g.set_status(5, "supported", conclusion="north flat at 10")
    g.add_node(mode="compose", parents=[4, 5], goal="promotion effect vs north", depends_on="f4")  # 6
    return g


def test_depths_parents_and_children(graph: ExplorationGraph) -> None:
    assert [(n.id, n.depth) for n in graph.nodes()] == [(1, 0), (2, 1), (3, 1), (4, 2), (5, 1), (6, 3)]
    assert graph.get(6).parents == [4, 5]  # in the order given
    assert [n.id for n in graph.children_of(1)] == [2, 3, 5]
    assert [n.id for n in graph.children_of(4)] == [6]
    assert graph.children_of(6) == []
    assert graph.edges() == [(1, 2), (1, 3), (2, 4), (1, 5), (4, 6), (5, 6)]


def test_path_to_root_lists_every_ancestor_root_first(graph: ExplorationGraph) -> None:
    assert [n.id for n in graph.path_to_root(4)] == [1, 2, 4]
    assert [n.id for n in graph.path_to_root(6)] == [1, 2, 5, 4, 6]  # by depth, then id
    assert [n.id for n in graph.path_to_root(1)] == [1]
    with pytest.raises(GraphError, match="no node 99"):
        graph.path_to_root(99)


def test_eligible_parents_are_verified_and_within_limits(graph: ExplorationGraph) -> None:
    assert [n.id for n in graph.eligible_parents()] == [1, 2, 5, 4]  # 3 unsupported, 6 proposed
    assert [n.id for n in graph.eligible_parents(max_depth=2)] == [1, 2, 5]  # a child of 4 would be at depth 3
    assert [n.id for n in graph.eligible_parents(max_children=2)] == [2, 5, 4]  # 1 has 3 children, the rest one
    assert graph.eligible_parents(max_children=1) == []


def test_verified_findings(graph: ExplorationGraph) -> None:
    found = graph.verified_findings()
    assert [(f.id, f.node_id, f.status) for f in found] == [("f2", "2", "supported"), ("f4", "4", "revised"),
                                                           ("f5", "5", "supported")]
    assert found[1].depends_on == ["f2"] and found[1].script == "analyze_node4.py"
    assert found[0].statement == "south revenue 20 vs north 10"


def test_rules_refuse_bad_nodes(graph: ExplorationGraph) -> None:
    with pytest.raises(GraphError, match="compose node merges ≥2"):
        graph.add_node(mode="compose", parents=[2])
    with pytest.raises(GraphError, match="exactly one parent"):
        graph.add_node(mode="deepen", parents=[2, 5])
    with pytest.raises(GraphError, match="node 3 is 'unsupported'"):
        graph.add_node(mode="deepen", parents=[3])
    with pytest.raises(GraphError, match="node 6 is 'proposed'"):
        graph.add_node(mode="deepen", parents=[6])
    with pytest.raises(GraphError, match="root node has no parents"):
        graph.add_node(mode="root", parents=[1])
    with pytest.raises(GraphError, match="'f5' is not the finding of an ancestor"):
        graph.add_node(mode="deepen", parents=[4], depends_on="f5")
    with pytest.raises(GraphError, match="no node 42"):
        graph.add_node(mode="deepen", parents=[42])
    assert len(graph.nodes()) == 6  # nothing half-added


def test_final_status_never_changes(graph: ExplorationGraph) -> None:
    with pytest.raises(GraphError, match="cannot go from 'supported' to 'unsupported'"):
        graph.set_status(2, "unsupported")
    with pytest.raises(GraphError, match="cannot go from 'running' to 'proposed'"):
        graph.set_status(6, "running")
        graph.set_status(6, "proposed")
    assert graph.get(2).conclusion == "south revenue 20 vs north 10"


def test_graph_persists_and_is_shared_between_handles(graph: ExplorationGraph) -> None:
    other = ExplorationGraph(graph.path)
    other.set_status(6, "failed")
    assert graph.get(6).status == "failed"
    assert graph.get(6).updated_at >= graph.get(6).created_at
