"""The workspace store: immutable, copy-on-write snapshots of the exploration graph's nodes.

Layout under a run's ``workspace/`` folder::

    objects/ab/cdef…      read-only blobs named by sha256 (blobs.py)
    manifests/<sha>.json  one Manifest per committed snapshot (path → blob), named by its own hash
    graph.sqlite          the exploration graph (graph.py); a node's ``snapshot`` column names its manifest

A node's tree, as :meth:`WorkspaceStore.materialize` lays it out for a sandbox::

    sources/…             inherited: the parents' sources, generated files and scripts (read-only)
    generated/…           what this node's run wrote
    analyze_node<i>.py, the analysis log, execution_result.json   the node's own top-level files

Inheritance (one rule for deepen/search/decompose and for compose's merge): each parent exports its
``sources/X`` and ``generated/X`` as ``X`` and its script as ``scripts/analyze_node<p>.py``. Parents are
taken in the order given, each one's sources before its generated files. The first claimant of a path keeps
it; the same content claimed again is deduplicated; different content under a taken path is renamed
``stem.node<p>.ext`` and reported in a :class:`MergeReport`.

Atomicity: blobs and the manifest are written (temp + rename) before one SQLite transaction records the
snapshot, so a kill at any point leaves either no snapshot or a complete one (orphan blobs are harmless).
Everything here is blocking file and SQLite work: async callers use ``asyncio.to_thread``.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Literal

from worldsmith.core.store import (
    ArtifactError,
    read_model,
    remove_stale_temps,
    sha256_json,
    write_model,
)
from worldsmith.core.workspace_types import (
    FileEntry,
    Manifest,
    MergeConflict,
    MergeReport,
    Mode,
    Node,
    NodeStatus,
    script_name,
)
from worldsmith.evolution.workspace.blobs import BlobStore
from worldsmith.evolution.workspace.graph import ExplorationGraph, GraphError

SOURCES, GENERATED = "sources", "generated"
#: The folder inside a run directory that holds its workspace store.
WORKSPACE_DIRNAME = "workspace"
_SKIP_NAMES = {"__pycache__", ".ipynb_checkpoints"}
View = Literal["snapshot", "inputs"]


def workspace_root(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / WORKSPACE_DIRNAME


class WorkspaceStore:
    """Snapshots + exploration graph of one evolution run, rooted at ``root`` (created on first use)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.blobs = BlobStore(self.root / "objects")
        self.manifests = self.root / "manifests"
        self.manifests.mkdir(parents=True, exist_ok=True)
        self.graph = ExplorationGraph(self.root / "graph.sqlite")

    def sweep_temps(self) -> int:
        """Remove what killed writers left (half-copied blobs, half-written manifests); call it on resume,
        when no other process writes to this store."""
        return len(remove_stale_temps(self.blobs.root)) + len(remove_stale_temps(self.manifests))

    # -- creating nodes --------------------------------------------------------------------------------------
    def create_root(self, data_dir: str | os.PathLike[str], *, goal: str = "initial workspace") -> Node:
        """Snapshot a data folder as the root node: its files become ``sources/``; the root counts as verified
        (it is the given ground) and states no finding."""
        files = {f"{SOURCES}/{rel}": self.blobs.put_file(path) for rel, path in _scan(Path(data_dir))}
        if not files:
            raise ArtifactError(f"{data_dir}: no files to start a workspace from")
        snapshot = self._write_manifest(Manifest(files=files))
        with self.graph.transaction() as conn:
            return self.graph.add_node(mode="root", goal=goal, status="supported", snapshot=snapshot, conn=conn)

    def propose(self, parents: Sequence[int], *, mode: Mode, goal: str, depends_on: str | None = None,
                work_mode: str | None = None) -> Node:
        """Add a proposed node (no snapshot yet); :meth:`materialize` then gives its executor a work folder."""
        return self.graph.add_node(mode=mode, parents=parents, goal=goal, depends_on=depends_on, work_mode=work_mode)

    def commit(self, node_id: int, workdir: str | os.PathLike[str]) -> Node:
        """Snapshot what a run left in ``workdir`` as node ``node_id``'s immutable tree: its inherited sources
        (from the parents, whatever the work folder's copy says), ``generated/`` and its top-level files."""
        node = self.graph.get(node_id)
        if node.snapshot is not None:
            raise GraphError(f"node {node_id} is already committed; snapshots are immutable")
        snapshot = self._snapshot(node.parents, Path(workdir))
        with self.graph.transaction() as conn:
            self.graph.set_snapshot(conn, node_id, snapshot)
        return self.graph.get(node_id)

    def commit_child(self, parents: Sequence[int], workdir: str | os.PathLike[str], *, mode: Mode, goal: str,
                     depends_on: str | None = None, work_mode: str | None = None,
                     status: NodeStatus = "running", conclusion: str = "") -> Node:
        """Add a node and its snapshot in one transaction (for runs made outside :meth:`propose`)."""
        snapshot = self._snapshot(list(parents), Path(workdir))
        with self.graph.transaction() as conn:
            return self.graph.add_node(mode=mode, parents=parents, goal=goal, depends_on=depends_on,
                                       work_mode=work_mode, status=status, conclusion=conclusion,
                                       snapshot=snapshot, conn=conn)

    # -- reading nodes ---------------------------------------------------------------------------------------
    def manifest(self, node_id: int) -> Manifest:
        node = self.graph.get(node_id)
        if node.snapshot is None:
            raise ArtifactError(f"node {node_id} ({node.status}) has no snapshot yet: commit its work folder first")
        return read_model(self.manifests / f"{node.snapshot}.json", Manifest)

    def read_bytes(self, node_id: int, path: str) -> bytes:
        entry = self.manifest(node_id).files.get(path)
        if entry is None:
            raise ArtifactError(f"node {node_id}: no file {path!r} in its snapshot")
        return self.blobs.check(entry).read_bytes()

    def verify(self, node_id: int) -> None:
        """Re-hash every blob of a node's snapshot; raises on the first one that does not match."""
        for entry in self.manifest(node_id).files.values():
            self.blobs.verify(entry)

    def merge(self, parents: Sequence[int]) -> tuple[dict[str, FileEntry], MergeReport]:
        """The inherited view of ``parents`` (paths relative to ``sources/``) and how it was assembled."""
        merged: dict[str, tuple[int, FileEntry]] = {}
        report = MergeReport(parents=list(parents))
        conflicts: dict[str, MergeConflict] = {}
        for p in parents:
            for path, entry in self._exports(p):
                if path not in merged:
                    merged[path] = (p, entry)
                elif merged[path][1].sha256 == entry.sha256:
                    report.deduplicated += 1
                else:
                    new = _free_name(path, p, merged)
                    merged[new] = (p, entry)
                    conflict = conflicts.setdefault(path, MergeConflict(path=path, kept_from=merged[path][0]))
                    conflict.renamed[p] = new
        report.files = len(merged)
        report.conflicts = [conflicts[k] for k in sorted(conflicts)]
        return {path: entry for path, (_, entry) in sorted(merged.items())}, report

    def materialize(self, node_id: int, dest: str | os.PathLike[str], *, view: View = "snapshot",
                    link: bool = True) -> Path:
        """Lay out a node's tree in ``dest`` (new or empty) for a sandbox to mount.

        ``view="snapshot"``: a committed node's whole tree, read-only. An uncommitted node (proposed or running)
        has no snapshot yet and always gets the ``inputs`` view. ``view="inputs"``: a work folder — the node's
        inherited ``sources/`` (read-only), its script when it has one (so a validator can re-run it in a
        fresh folder) and an empty, writable ``generated/``.
        ``link`` hardlinks the blobs (no copy; mount ``sources/`` read-only, as the sandbox does with inputs);
        ``link=False`` copies them."""
        dest = Path(dest)
        if dest.exists() and any(dest.iterdir()):
            raise FileExistsError(f"{dest}: not empty; materialize into a new folder")
        node = self.graph.get(node_id)
        if node.snapshot is None:
            view = "inputs"
            inherited, _ = self.merge(node.parents)
            files = {f"{SOURCES}/{p}": e for p, e in inherited.items()}
        else:
            files = self.manifest(node_id).files
            if view == "inputs":
                files = {p: e for p, e in files.items() if p.startswith(f"{SOURCES}/") or p == node.script}
        dest.mkdir(parents=True, exist_ok=True)
        for path, entry in files.items():
            target = dest / path
            self.blobs.place(entry, target, link=link)
            if not link:
                os.chmod(target, 0o444)
        (dest / SOURCES).mkdir(exist_ok=True)
        if view == "inputs":
            (dest / GENERATED).mkdir(exist_ok=True)
        _seal(dest / SOURCES if view == "inputs" else dest)
        return dest

    # -- internals -------------------------------------------------------------------------------------------
    def _exports(self, node_id: int) -> list[tuple[str, FileEntry]]:
        files = self.manifest(node_id).files
        out = [(p[len(SOURCES) + 1:], e) for p, e in sorted(files.items()) if p.startswith(f"{SOURCES}/")]
        out += [(p[len(GENERATED) + 1:], e) for p, e in sorted(files.items()) if p.startswith(f"{GENERATED}/")]
        script = script_name(node_id)
        if script in files:
            out.append((f"scripts/{script}", files[script]))
        return out

    def _snapshot(self, parents: list[int], workdir: Path) -> str:
        if not workdir.is_dir():
            raise ArtifactError(f"{workdir}: no such work folder to commit")
        inherited, _ = self.merge(parents) if parents else ({}, None)
        for entry in inherited.values():
            self.blobs.check(entry)  # a source written through a hardlink must not pass as the parent's file
        stray = sorted(rel for rel, _ in _scan(workdir / SOURCES) if rel not in inherited) \
            if (workdir / SOURCES).is_dir() else []
        if stray:
            raise ArtifactError(f"{workdir}/{SOURCES}: {len(stray)} file(s) not inherited from the parents "
                                f"({', '.join(stray[:3])}); a run writes its outputs under {GENERATED}/")
        files = {f"{SOURCES}/{p}": e for p, e in inherited.items()}
        for entry in sorted(os.scandir(workdir), key=lambda e: e.name):
            if entry.name in (SOURCES, GENERATED) or entry.name in _SKIP_NAMES or _is_temp(entry.name):
                continue
            if entry.is_symlink() or not (entry.is_file(follow_symlinks=False) or entry.is_dir(follow_symlinks=False)):
                raise ArtifactError(f"{entry.path}: not a regular file (links are never committed)")
            if entry.is_dir(follow_symlinks=False):
                raise ArtifactError(f"{entry.path}: unexpected folder; a run writes its outputs under {GENERATED}/")
            files[entry.name] = self.blobs.put_file(entry.path)
        if (workdir / GENERATED).is_dir():
            for rel, path in _scan(workdir / GENERATED):
                files[f"{GENERATED}/{rel}"] = self.blobs.put_file(path)
        return self._write_manifest(Manifest(files=files))

    def _write_manifest(self, manifest: Manifest) -> str:
        digest = sha256_json(manifest.model_dump(mode="json"))
        target = self.manifests / f"{digest}.json"
        if not target.is_file():
            write_model(target, manifest)
        return digest


def _is_temp(name: str) -> bool:
    return name.startswith(".") and (name.endswith(".tmp") or ".tmp-" in name)


def _scan(root: Path) -> list[tuple[str, Path]]:
    """Regular files under ``root`` as (relative POSIX path, path), sorted; a link or special file is an error
    (a sandboxed run may plant a link to a host file)."""
    if not root.is_dir():
        raise ArtifactError(f"{root}: no such folder")
    out = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_NAMES and not _is_temp(d))
        for d in dirs:
            if os.path.islink(os.path.join(folder, d)):
                raise ArtifactError(f"{os.path.join(folder, d)}: a link; links are never committed")
        for name in names:
            if _is_temp(name):
                continue
            path = Path(folder) / name
            mode = path.lstat().st_mode
            if not stat.S_ISREG(mode):
                raise ArtifactError(f"{path}: not a regular file (links are never committed)")
            out.append((path.relative_to(root).as_posix(), path))
    return sorted(out)


def _free_name(path: str, node_id: int, taken: dict[str, object]) -> str:
    """``dir/stem.node<id>.ext`` (``-2``, ``-3``… if that is taken too); the extension stays last so tools
    still recognise the file."""
    pure = PurePosixPath(path)
    stem, dot, suffix = pure.name.partition(".")
    candidate, n = str(pure.with_name(f"{stem}.node{node_id}{dot}{suffix}")), 2
    while candidate in taken:
        candidate = str(pure.with_name(f"{stem}.node{node_id}-{n}{dot}{suffix}"))
        n += 1
    return candidate


def _seal(folder: Path) -> None:
    """Make a folder tree unwritable by mode (no new, renamed or deleted entries for non-root users)."""
    for sub, dirs, _ in os.walk(folder, topdown=False):
        os.chmod(sub, 0o555)


def release(folder: str | os.PathLike[str]) -> None:
    """Delete a materialised folder (restores the write bits that :meth:`WorkspaceStore.materialize` removed)."""
    folder = Path(folder)
    if not folder.exists():
        return
    for sub, _, _ in os.walk(folder):
        os.chmod(sub, 0o755)
    shutil.rmtree(folder)
