"""Contracts of workspace evolution: exploration-graph nodes, snapshot manifests, merge reports, findings.

The workspace store (`evolution/workspace/`) persists these; the agents (director, proposer, executor,
validator) and the evolution graph read and write them. Node ids are small integers allocated by the
exploration graph (they name the node's script, ``analyze_node<id>.py``); a node's finding is
:class:`worldsmith.core.schemas.Finding` with ``node_id == str(node.id)`` and ``id == finding_id(node.id)``.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import PurePosixPath
from typing import Literal

from pydantic import Field, field_validator

from worldsmith.core.schemas import Finding, Model, utcnow

__all__ = [
    "FINAL_STATUSES", "VERIFIED_STATUSES", "FileEntry", "Finding", "Manifest", "MergeConflict", "MergeReport", "Mode",
    "Node", "NodeStatus", "Verdict", "finding_id", "script_name",
]

#: How a node was derived: ``root`` is the initial workspace; ``deepen`` builds on one verified finding;
#: ``search`` adds retrieved material; ``decompose`` isolates one part of a compound objective;
#: ``compose`` merges two or more verified workspaces and analyses them jointly.
Mode = Literal["root", "deepen", "search", "decompose", "compose"]

#: A node's life: proposed (goal chosen) → running (executor at work) → the validator's verdict
#: (supported / revised / unsupported) or failed (the run itself broke: crash, timeout, no result).
NodeStatus = Literal["proposed", "running", "supported", "revised", "unsupported", "failed"]

#: Statuses whose conclusion may be built on (a revised finding carries the validator's corrected numbers).
VERIFIED_STATUSES: tuple[NodeStatus, ...] = ("supported", "revised")
#: Statuses after which a node never changes again.
FINAL_STATUSES: tuple[NodeStatus, ...] = ("supported", "revised", "unsupported", "failed")


def script_name(node_id: int) -> str:
    """The file name of the script that reproduces a node's numbers."""
    return f"analyze_node{node_id}.py"


def finding_id(node_id: int) -> str:
    """The id of the finding a node's conclusion states (one finding per node)."""
    return f"f{node_id}"


class FileEntry(Model):
    """One file of a snapshot: its content hash (the blob's name) and size in bytes."""

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0, description="bytes")


class Manifest(Model):
    """What a node's snapshot holds: workspace-relative POSIX path → blob. Paths start with ``sources/``
    (inherited inputs), ``generated/`` (files the node's run wrote) or are the node's own top-level files
    (its script, log and ``execution_result.json``). Stored by its own hash, so it names no node."""

    files: dict[str, FileEntry] = Field(default_factory=dict)

    @field_validator("files")
    @classmethod
    def _relative_paths(cls, v: dict[str, FileEntry]) -> dict[str, FileEntry]:
        for path in v:
            pure = PurePosixPath(path)
            if pure.is_absolute() or ".." in pure.parts or not pure.parts or path != pure.as_posix():
                raise ValueError(f"manifest path {path!r} must be a normalised relative POSIX path")
        return v

    @property
    def total_bytes(self) -> int:
        return sum(e.size for e in self.files.values())


class MergeConflict(Model):
    """Two parents (or a node's sources and its generated files) hold different content under one path.
    ``kept_from`` keeps the path; every other version is renamed (``renamed``: node id → new path)."""

    path: str
    kept_from: int
    renamed: dict[int, str] = Field(default_factory=dict)


class MergeReport(Model):
    """How the inherited view of ≥1 parents was assembled: files shared by hash, identical duplicates
    dropped, and name conflicts resolved deterministically (parent order, then node id)."""

    parents: list[int]
    files: int = Field(0, description="files in the merged view")
    deduplicated: int = Field(0, description="same path and same content in more than one parent: kept once")
    conflicts: list[MergeConflict] = Field(default_factory=list)


class Node(Model):
    """One workspace of the exploration graph (a row of its SQLite table, plus its parents)."""

    id: int = Field(ge=0)
    parents: list[int] = Field(default_factory=list, description="in the order given when the node was added")
    mode: Mode
    depends_on: str | None = Field(None, description="id of the verified finding this node builds on")
    status: NodeStatus = "proposed"
    depth: int = Field(0, ge=0, description="0 for a root; else 1 + the deepest parent")
    goal: str = ""
    conclusion: str = Field("", description="the finding's statement, numbers inline (empty until executed)")
    work_mode: str | None = Field(None, description="the director's domain work mode, free text")
    snapshot: str | None = Field(None, description="sha256 of the committed manifest; None until commit")
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

    @property
    def verified(self) -> bool:
        return self.status in VERIFIED_STATUSES

    @property
    def script(self) -> str:
        return script_name(self.id)

    def finding(self) -> Finding:
        """The node's conclusion as a :class:`Finding` (status ``pending`` until the validator has spoken)."""
        status = self.status if self.status in ("supported", "revised", "unsupported") else "pending"
        return Finding(id=finding_id(self.id), node_id=str(self.id), statement=self.conclusion or "(no conclusion)",
                       script=self.script, status=status,  # type: ignore[arg-type]
                       depends_on=[self.depends_on] if self.depends_on else [], created_at=self.created_at)


#: What the validator may conclude about a node's claim.
Verdict = Literal["supported", "revised", "unsupported"]
