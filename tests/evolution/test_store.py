"""The workspace store: copy-on-write sharing, immutability, inheritance and compose merges, atomic commits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.evolution.conftest import write_tree
from worldsmith.core.store import ArtifactError, sha256_bytes
from worldsmith.core.workspace_types import MergeConflict, Node
from worldsmith.evolution.workspace import GraphError, WorkspaceStore, release

ROOT_DIR = Path(__file__).resolve().parents[2]


def run_child(store: WorkspaceStore, parents: list[int], tmp: Path, generated: dict[str, str], *, mode: str = "deepen",
              status: str = "supported", conclusion: str = "a finding") -> Node:
    """What the evolution loop does for one node: propose, materialise a work folder, 'run', commit, judge."""
    node = store.propose(parents, mode=mode, goal=f"goal of a {mode} node")  # type: ignore[arg-type]
    work = store.materialize(node.id, tmp / f"work{node.id}")
    write_tree(work, {f"generated/{k}": v for k, v in generated.items()})
    write_tree(work, {node.script: f"print('node {node.id}')\n", "analysis.log": f"log of {node.id}\n",
                      "execution_result.json": f'{{"node": {node.id}}}\n'})
    store.commit(node.id, work)
    return store.graph.set_status(node.id, status, conclusion=conclusion)  # type: ignore[arg-type]


def blob_count(store: WorkspaceStore) -> int:
    return sum(1 for p in store.blobs.root.rglob("*") if p.is_file() and not p.name.endswith(".tmp"))


def test_a_child_shares_unchanged_files_and_stores_only_new_ones(store: WorkspaceStore, data_dir: Path,
                                                                 tmp_path: Path) -> None:
    root = store.create_root(data_dir)
    assert (root.id, root.mode, root.status, root.depth) == (1, "root", "supported", 0)
    assert blob_count(store) == 2  # sales.csv, memos/q3.md
    child = run_child(store, [root.id], tmp_path, {"summary.csv": "region,share\nsouth,0.67\n"})
    # new: summary.csv, the script, the log, execution_result.json — the two inputs are not stored again
    assert blob_count(store) == 2 + 4
    root_files, child_files = store.manifest(root.id).files, store.manifest(child.id).files
    assert sorted(child_files) == ["analysis.log", "analyze_node2.py", "execution_result.json", "generated/summary.csv",
                                   "sources/memos/q3.md", "sources/sales.csv"]
    assert child_files["sources/sales.csv"] == root_files["sources/sales.csv"]
    # a grandchild that changes one small file adds that file and its own three top-level files, nothing else
    grand = run_child(store, [child.id], tmp_path, {"summary.csv": "region,share\nsouth,0.70\n"})
    assert blob_count(store) == 6 + 4
    assert sorted(store.manifest(grand.id).files) == [
        "analysis.log", "analyze_node3.py", "execution_result.json", "generated/summary.csv", "sources/memos/q3.md",
        "sources/sales.csv", "sources/scripts/analyze_node2.py", "sources/summary.csv"]
    # materialised trees hardlink the same blob: one inode for every copy of the unchanged input
    a = store.materialize(root.id, tmp_path / "m1") / "sources/sales.csv"
    b = store.materialize(grand.id, tmp_path / "m3") / "sources/sales.csv"
    blob = store.blobs.path_for(sha256_bytes(b"region,revenue\nnorth,10\nsouth,20\n"))
    assert a.stat().st_ino == b.stat().st_ino == blob.stat().st_ino
    assert b.read_text() == "region,revenue\nnorth,10\nsouth,20\n"
    assert store.read_bytes(grand.id, "sources/summary.csv") == b"region,share\nsouth,0.67\n"


def test_a_proposed_node_materialises_as_a_work_folder(store: WorkspaceStore, data_dir: Path, tmp_path: Path) -> None:
    root = store.create_root(data_dir)
    node = store.propose([root.id], mode="search", goal="memos")
    work = store.materialize(node.id, tmp_path / "w")
    assert sorted(p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file()) == [
        "sources/memos/q3.md", "sources/sales.csv"]
    assert (work / "generated").is_dir() and os.access(work / "generated", os.W_OK)
    with pytest.raises(FileExistsError, match="not empty"):
        store.materialize(node.id, work)
    with pytest.raises(ArtifactError, match="no snapshot yet"):
        store.manifest(node.id)
    release(work)
    assert not work.exists()


def test_the_inputs_view_of_a_committed_node_is_a_fresh_folder_to_rerun_its_script(
        store: WorkspaceStore, data_dir: Path, tmp_path: Path) -> None:
    root = store.create_root(data_dir)
    child = run_child(store, [root.id], tmp_path, {"summary.csv": "s\n"})
    fresh = store.materialize(child.id, tmp_path / "rerun", view="inputs")
    assert sorted(p.relative_to(fresh).as_posix() for p in fresh.rglob("*") if p.is_file()) == [
        "analyze_node2.py", "sources/memos/q3.md", "sources/sales.csv"]  # no generated files, log or result
    assert list((fresh / "generated").iterdir()) == [] and os.access(fresh / "generated", os.W_OK)


def test_writes_into_a_copied_workspace_never_reach_the_snapshot(store: WorkspaceStore, data_dir: Path,
                                                                 tmp_path: Path) -> None:
    root = store.create_root(data_dir)
    copy = store.materialize(root.id, tmp_path / "copy", link=False)
    target = copy / "sources/sales.csv"
    os.chmod(target, 0o644)
    target.write_text("tampered\n")
    assert store.read_bytes(root.id, "sources/sales.csv") == b"region,revenue\nnorth,10\nsouth,20\n"
    store.verify(root.id)  # every blob still hashes to its name


def test_a_write_through_a_hardlink_fails_or_is_refused(store: WorkspaceStore, data_dir: Path, tmp_path: Path) -> None:
    root = store.create_root(data_dir)
    node = store.propose([root.id], mode="deepen", goal="g")
    work = store.materialize(node.id, tmp_path / "w")
    source = work / "sources/sales.csv"
    try:
        source.write_text("north,999\n")  # pandas' to_csv would open the same way
    except PermissionError:
        assert os.geteuid() != 0  # file mode 0444 stops everyone but root
        store.verify(root.id)
        return
    # root ignores file modes (the sandbox's read-only mount is what stops it there): the store notices and
    # refuses to serve or build on the changed blob instead of passing it off as the parent's file
    with pytest.raises(ArtifactError, match="modified after it was stored"):
        store.read_bytes(root.id, "sources/sales.csv")
    with pytest.raises(ArtifactError, match="modified after it was stored"):
        store.commit(node.id, work)
    assert store.graph.get(node.id).snapshot is None


def test_files_added_to_sources_are_refused(store: WorkspaceStore, data_dir: Path, tmp_path: Path) -> None:
    root = store.create_root(data_dir)
    node = store.propose([root.id], mode="deepen", goal="g")
    work = store.materialize(node.id, tmp_path / "w")
    os.chmod(work / "sources", 0o755)  # as a process without the read-only mount could
    (work / "sources/extra.csv").write_text("x\n")
    with pytest.raises(ArtifactError, match=r"1 file\(s\) not inherited from the parents \(extra.csv\)"):
        store.commit(node.id, work)
    (work / "sources/extra.csv").unlink()
    (work / "generated/link.csv").symlink_to("/etc/passwd")
    with pytest.raises(ArtifactError, match="links are never committed"):
        store.commit(node.id, work)


def test_committed_snapshots_are_immutable(store: WorkspaceStore, data_dir: Path, tmp_path: Path) -> None:
    root = store.create_root(data_dir)
    child = run_child(store, [root.id], tmp_path, {"a.csv": "1\n"})
    with pytest.raises(GraphError, match="already committed"):
        store.commit(child.id, tmp_path / f"work{child.id}")
    with pytest.raises(GraphError, match="already committed"):
        store.commit(root.id, data_dir)


def test_compose_merge_deduplicates_and_renames_conflicts(store: WorkspaceStore, data_dir: Path, tmp_path: Path) -> None:
    root = store.create_root(data_dir)
    a = run_child(store, [root.id], tmp_path, {"summary.csv": "from a\n", "shared.csv": "same\n"})
    b = run_child(store, [root.id], tmp_path, {"summary.csv": "from b\n", "shared.csv": "same\n"}, mode="decompose")
    assert (a.id, b.id) == (2, 3)
    files, report = store.merge([a.id, b.id])
    assert sorted(files) == ["memos/q3.md", "sales.csv", "scripts/analyze_node2.py", "scripts/analyze_node3.py",
                             "shared.csv", "summary.csv", "summary.node3.csv"]
    # by hand: b's copies of sales.csv, memos/q3.md and shared.csv equal a's → 3 deduplicated; summary.csv differs
    assert (report.files, report.deduplicated) == (7, 3)
    assert report.conflicts == [MergeConflict(path="summary.csv", kept_from=2, renamed={3: "summary.node3.csv"})]
    # the other order keeps b's version under the plain name: the rule is the parents' order
    _, flipped = store.merge([b.id, a.id])
    assert flipped.conflicts == [MergeConflict(path="summary.csv", kept_from=3, renamed={2: "summary.node2.csv"})]
    compose = store.propose([a.id, b.id], mode="compose", goal="a and b together", depends_on="f2")
    assert compose.depth == 2
    work = store.materialize(compose.id, tmp_path / "compose")
    assert (work / "sources/summary.csv").read_text() == "from a\n"
    assert (work / "sources/summary.node3.csv").read_text() == "from b\n"
    # the deduplicated file is one blob, hardlinked: same inode as a's generated copy in a's snapshot
    a_tree = store.materialize(a.id, tmp_path / "a-tree")
    assert (work / "sources/shared.csv").stat().st_ino == (a_tree / "generated/shared.csv").stat().st_ino


def test_a_generated_file_named_like_a_source_is_renamed_not_lost(store: WorkspaceStore, data_dir: Path,
                                                                   tmp_path: Path) -> None:
    root = store.create_root(data_dir)
    child = run_child(store, [root.id], tmp_path, {"sales.csv": "cleaned\n"})
    files, report = store.merge([child.id])
    assert files["sales.csv"].sha256 == sha256_bytes(b"region,revenue\nnorth,10\nsouth,20\n")  # inputs keep the name
    assert files["sales.node2.csv"].sha256 == sha256_bytes(b"cleaned\n")
    assert report.conflicts == [MergeConflict(path="sales.csv", kept_from=2, renamed={2: "sales.node2.csv"})]


def test_a_failure_inside_commit_leaves_no_snapshot(store: WorkspaceStore, data_dir: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    root = store.create_root(data_dir)
    node = store.propose([root.id], mode="deepen", goal="g")
    work = store.materialize(node.id, tmp_path / "w")
    write_tree(work, {"generated/out.csv": "1\n", node.script: "print(1)\n"})

    def broken(self, conn, node_id, snapshot):  # type: ignore[no-untyped-def]
        conn.execute("UPDATE nodes SET snapshot = ? WHERE id = ?", (snapshot, node_id))
        raise OSError("disk full")

    with monkeypatch.context() as m:
        m.setattr(type(store.graph), "set_snapshot", broken)
        with pytest.raises(OSError, match="disk full"):
            store.commit(node.id, work)
    assert store.graph.get(node.id).snapshot is None  # the half-done update was rolled back
    assert store.commit(node.id, work).snapshot is not None


_KILLER = """
import os, signal, sys
from worldsmith.evolution.workspace import WorkspaceStore, blobs, graph
where, store_root, node_id, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if where == "transaction":  # after the UPDATE, before COMMIT
    real = graph.ExplorationGraph.set_snapshot
    def set_snapshot(self, conn, nid, snap):
        real(self, conn, nid, snap)
        os.kill(os.getpid(), signal.SIGKILL)
    graph.ExplorationGraph.set_snapshot = set_snapshot
else:  # while a blob is half-written
    blobs.os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)
WorkspaceStore(store_root).commit(node_id, work)
"""


@pytest.mark.parametrize("where", ["transaction", "blob"])
def test_a_kill_mid_commit_leaves_no_half_node(where: str, store: WorkspaceStore, data_dir: Path, tmp_path: Path) -> None:
    root = store.create_root(data_dir)
    node = store.propose([root.id], mode="deepen", goal="g")
    work = store.materialize(node.id, tmp_path / "w")
    write_tree(work, {"generated/out.csv": "x\n" * 1000, node.script: "print(1)\n"})
    proc = subprocess.run([sys.executable, "-c", _KILLER, where, str(store.root), str(node.id), str(work)],
                          cwd=ROOT_DIR, env={**os.environ, "PYTHONPATH": str(ROOT_DIR)}, check=False, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr[-2000:]
    again = WorkspaceStore(store.root)
    assert again.graph.get(node.id).snapshot is None and again.graph.get(node.id).status == "proposed"
    swept = again.sweep_temps()
    assert swept == (1 if where == "blob" else 0)  # the half-written blob's temp file
    committed = again.commit(node.id, work)
    again.verify(committed.id)
    assert again.read_bytes(node.id, "generated/out.csv") == b"x\n" * 1000
