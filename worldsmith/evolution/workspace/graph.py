"""The exploration graph: which workspace was derived from which, how, and what it concluded (SQLite, stdlib).

One file per run (``graph.sqlite`` in WAL mode, so readers such as ``evolve show`` never block a running
evolution). Each call opens its own short connection: the graph is shared by concurrent branches (threads or
processes) and a connection per call needs no locking of ours. Writes run in ``BEGIN IMMEDIATE`` transactions,
so a killed writer leaves the previous state, never half a node.

Rules it enforces (the director's mistakes become clear errors, not a corrupt graph):
- a ``root`` has no parents; ``compose`` has ≥2; every other mode exactly one;
- parents exist and are verified (supported or revised): nothing is built on an unchecked claim;
- ``depends_on`` names the finding of one of the node's ancestors (or itself is absent);
- a final status (supported/revised/unsupported/failed) never changes again.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from worldsmith.core.schemas import Finding, utcnow
from worldsmith.core.workspace_types import (
    FINAL_STATUSES,
    VERIFIED_STATUSES,
    Mode,
    Node,
    NodeStatus,
    finding_id,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nodes (
    id          INTEGER PRIMARY KEY,
    mode        TEXT NOT NULL,
    depends_on  TEXT,
    status      TEXT NOT NULL,
    depth       INTEGER NOT NULL,
    goal        TEXT NOT NULL DEFAULT '',
    conclusion  TEXT NOT NULL DEFAULT '',
    work_mode   TEXT,
    snapshot    TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS edges (
    child     INTEGER NOT NULL REFERENCES nodes(id),
    parent    INTEGER NOT NULL REFERENCES nodes(id),
    position  INTEGER NOT NULL,
    PRIMARY KEY (child, parent)
);
CREATE INDEX IF NOT EXISTS edges_parent ON edges(parent);
"""

_COLUMNS = "id, mode, depends_on, status, depth, goal, conclusion, work_mode, snapshot, created_at, updated_at"
_ALLOWED_NEXT: dict[str, tuple[str, ...]] = {
    "proposed": ("running", *FINAL_STATUSES),
    "running": FINAL_STATUSES,
}


class GraphError(ValueError):
    """An exploration-graph operation that would break one of its rules; the message says which."""


class ExplorationGraph:
    """The exploration graph of one evolution run, stored at ``path`` (created on first use)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)

    # -- connections -----------------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable at checkpoints, never corrupt
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE): committed on success, rolled back on any error or kill."""
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        conn = self._connect()
        try:
            yield conn
        finally:
            conn.close()

    # -- writes ----------------------------------------------------------------------------------------------
    def add_node(self, *, mode: Mode, parents: Sequence[int] = (), goal: str = "", depends_on: str | None = None,
                 work_mode: str | None = None, status: NodeStatus = "proposed", conclusion: str = "",
                 snapshot: str | None = None, conn: sqlite3.Connection | None = None) -> Node:
        """Add a node and its parent edges; returns it with its new id. ``conn`` joins a caller's transaction
        (the store commits a snapshot and its node together)."""
        if conn is None:
            with self.transaction() as own:
                return self.add_node(mode=mode, parents=parents, goal=goal, depends_on=depends_on,
                                     work_mode=work_mode, status=status, conclusion=conclusion, snapshot=snapshot,
                                     conn=own)
        parents = list(parents)
        self._check_parents(conn, mode, parents)
        depth = 0
        if parents:
            depth = 1 + max(self._get(conn, p).depth for p in parents)
        if depends_on is not None:
            self._check_depends_on(conn, depends_on, parents)
        now = utcnow().isoformat()
        cur = conn.execute(
            "INSERT INTO nodes (mode, depends_on, status, depth, goal, conclusion, work_mode, snapshot, created_at,"
            " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (mode, depends_on, status, depth, goal, conclusion, work_mode, snapshot, now, now))
        node_id = int(cur.lastrowid or 0)
        conn.executemany("INSERT INTO edges (child, parent, position) VALUES (?, ?, ?)",
                         [(node_id, p, i) for i, p in enumerate(parents)])
        return self._get(conn, node_id)

    def set_status(self, node_id: int, status: NodeStatus, *, conclusion: str | None = None) -> Node:
        """Move a node along its life (proposed → running → verdict); a final status is never changed."""
        with self.transaction() as conn:
            node = self._get(conn, node_id)
            if status != node.status and status not in _ALLOWED_NEXT.get(node.status, ()):
                raise GraphError(f"node {node_id}: cannot go from {node.status!r} to {status!r}"
                                 f"{' (final statuses never change)' if node.status in FINAL_STATUSES else ''}")
            conn.execute("UPDATE nodes SET status = ?, conclusion = COALESCE(?, conclusion), updated_at = ? "
                         "WHERE id = ?", (status, conclusion, utcnow().isoformat(), node_id))
            return self._get(conn, node_id)

    def set_snapshot(self, conn: sqlite3.Connection, node_id: int, snapshot: str) -> None:
        """Record a node's committed snapshot (inside the store's transaction); a snapshot is set once."""
        node = self._get(conn, node_id)
        if node.snapshot is not None and node.snapshot != snapshot:
            raise GraphError(f"node {node_id} already has a snapshot ({node.snapshot[:12]}…); snapshots are immutable")
        conn.execute("UPDATE nodes SET snapshot = ?, updated_at = ? WHERE id = ?",
                     (snapshot, utcnow().isoformat(), node_id))

    # -- reads -----------------------------------------------------------------------------------------------
    def get(self, node_id: int) -> Node:
        with self._read() as conn:
            return self._get(conn, node_id)

    def nodes(self) -> list[Node]:
        """Every node, by id."""
        with self._read() as conn:
            return self._rows(conn, f"SELECT {_COLUMNS} FROM nodes ORDER BY id")

    def edges(self) -> list[tuple[int, int]]:
        """(parent, child) pairs, by child then parent position."""
        with self._read() as conn:
            return [(p, c) for c, p in conn.execute("SELECT child, parent FROM edges ORDER BY child, position")]

    def children_of(self, node_id: int) -> list[Node]:
        with self._read() as conn:
            return self._rows(conn, f"SELECT {_COLUMNS} FROM nodes WHERE id IN "
                                    "(SELECT child FROM edges WHERE parent = ?) ORDER BY id", (node_id,))

    def eligible_parents(self, *, max_depth: int | None = None, max_children: int | None = None) -> list[Node]:
        """Verified nodes that may still be expanded: depth below ``max_depth`` (a child would be at most
        ``max_depth`` deep) and fewer than ``max_children`` children (any status). Ordered by depth, then id."""
        sql = (f"SELECT {_COLUMNS} FROM nodes n WHERE status IN ({','.join('?' * len(VERIFIED_STATUSES))})")
        args: list[object] = list(VERIFIED_STATUSES)
        if max_depth is not None:
            sql += " AND depth < ?"
            args.append(max_depth)
        if max_children is not None:
            sql += " AND (SELECT COUNT(*) FROM edges e WHERE e.parent = n.id) < ?"
            args.append(max_children)
        with self._read() as conn:
            return self._rows(conn, sql + " ORDER BY depth, id", args)

    def path_to_root(self, node_id: int) -> list[Node]:
        """The node and all its ancestors, root first: ordered by depth, then id (a compose node has several
        roads to the root; every node on any of them is listed once)."""
        with self._read() as conn:
            rows = conn.execute(
                "WITH RECURSIVE anc(id) AS (SELECT ? UNION SELECT e.parent FROM edges e JOIN anc ON e.child = anc.id) "
                f"SELECT {_COLUMNS} FROM nodes WHERE id IN (SELECT id FROM anc) ORDER BY depth, id", (node_id,)).fetchall()
            if not rows:
                raise GraphError(f"no node {node_id} in {self.path}")
            return [self._node(conn, r) for r in rows]

    def verified_findings(self) -> list[Finding]:
        """The findings of supported and revised nodes that stated a conclusion, by node id."""
        return [n.finding() for n in self.nodes() if n.verified and n.conclusion.strip()]

    # -- internals -------------------------------------------------------------------------------------------
    def _check_parents(self, conn: sqlite3.Connection, mode: str, parents: list[int]) -> None:
        if len(set(parents)) != len(parents):
            raise GraphError(f"{mode} node: parents {parents} repeat a node")
        if mode == "root" and parents:
            raise GraphError(f"a root node has no parents (got {parents})")
        if mode == "compose" and len(parents) < 2:
            raise GraphError(f"a compose node merges ≥2 verified nodes (got {parents})")
        if mode not in ("root", "compose") and len(parents) != 1:
            raise GraphError(f"a {mode} node has exactly one parent (got {parents})")
        for p in parents:
            parent = self._get(conn, p)
            if not parent.verified:
                raise GraphError(f"node {p} is {parent.status!r}: only supported or revised nodes can be built on")

    def _check_depends_on(self, conn: sqlite3.Connection, depends_on: str, parents: list[int]) -> None:
        ancestors: set[int] = set()
        for p in parents:
            ancestors.update(n.id for n in self._ancestors(conn, p))
        if depends_on not in {finding_id(a) for a in ancestors}:
            raise GraphError(f"depends_on {depends_on!r} is not the finding of an ancestor "
                             f"(ancestors: {sorted(ancestors)}; finding ids look like {finding_id(0)!r})")

    def _ancestors(self, conn: sqlite3.Connection, node_id: int) -> list[Node]:
        rows = conn.execute(
            "WITH RECURSIVE anc(id) AS (SELECT ? UNION SELECT e.parent FROM edges e JOIN anc ON e.child = anc.id) "
            f"SELECT {_COLUMNS} FROM nodes WHERE id IN (SELECT id FROM anc)", (node_id,)).fetchall()
        return [self._node(conn, r) for r in rows]

    def _get(self, conn: sqlite3.Connection, node_id: int) -> Node:
        row = conn.execute(f"SELECT {_COLUMNS} FROM nodes WHERE id = ?", (node_id,)).fetchone()
        if row is None:
            raise GraphError(f"no node {node_id} in {self.path}")
        return self._node(conn, row)

    def _rows(self, conn: sqlite3.Connection, sql: str, args: Sequence[object] = ()) -> list[Node]:
        return [self._node(conn, r) for r in conn.execute(sql, tuple(args)).fetchall()]

    @staticmethod
    def _node(conn: sqlite3.Connection, row: tuple) -> Node:
        (nid, mode, depends_on, status, depth, goal, conclusion, work_mode, snapshot, created, updated) = row
        parents = [p for (p,) in conn.execute("SELECT parent FROM edges WHERE child = ? ORDER BY position", (nid,))]
        return Node(id=nid, parents=parents, mode=mode, depends_on=depends_on, status=status, depth=depth, goal=goal,
                    conclusion=conclusion, work_mode=work_mode, snapshot=snapshot,
                    created_at=datetime.fromisoformat(created), updated_at=datetime.fromisoformat(updated))
