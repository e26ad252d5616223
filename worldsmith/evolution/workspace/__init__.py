"""Workspace evolution's storage: immutable copy-on-write node snapshots (store.py over blobs.py), the
exploration graph in SQLite (graph.py) and its picture and findings table (render.py)."""

from worldsmith.evolution.workspace.graph import ExplorationGraph, GraphError
from worldsmith.evolution.workspace.store import (
                                                  GENERATED,
                                                  SOURCES,
                                                  WORKSPACE_DIRNAME,
                                                  WorkspaceStore,
                                                  release,
                                                  workspace_root,
)

__all__ = ["GENERATED", "SOURCES", "WORKSPACE_DIRNAME", "ExplorationGraph", "GraphError", "WorkspaceStore", "release",
           "workspace_root"]
