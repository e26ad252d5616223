"""Snapshot cost of the workspace store: disk and time to commit workspace nodes over a ~100 MB workspace.

Workload: a root workspace of FILES random files (SIZE_MB in all), then REPEATS children, each deriving from the
previous one and changing one small file (the common case: an analysis writes a small table). For each child:
propose → materialise its work folder (hardlinks) → write the file, script, log and result → commit.
Baseline measured in the same run: a full copy of the workspace folder with each file fsynced (what a durable
node costs without copy-on-write; the store fsyncs every blob, manifest and graph commit too). A child's cost is
a handful of small fsyncs whatever the workspace's size; a copy's grows with it. Prints medians and the ratio
against the baseline.

    python benchmarks/snapshot_cost.py [--size-mb 100] [--files 10] [--repeats 5] [--keep DIR]

``snapshot_cost()`` returns the same figures as a dict for benchmarks/evolve.py.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from worldsmith.evolution.workspace import WorkspaceStore, release


def disk_bytes(*roots: Path) -> int:
    """Allocated bytes under ``roots``, each inode counted once (hardlinks are shared, not copied)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in names:
                st = os.lstat(os.path.join(folder, name))
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
    return total


def durable_copy(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest)
    for folder, _, names in os.walk(dest):
        for name in names:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def make_workspace(folder: Path, size_mb: int, files: int) -> Path:
    folder.mkdir(parents=True)
    per_file = size_mb * (1 << 20) // files
    for i in range(files):
        (folder / f"table_{i:02d}.bin").write_bytes(os.urandom(per_file))
    (folder / "summary.csv").write_text("metric,value\nrows,0\n")
    return folder


def snapshot_cost(size_mb: int = 100, files: int = 10, repeats: int = 5, base: Path | None = None) -> dict[str, Any]:
    """Measure the store against full copies; returns medians (seconds, bytes) and ratios."""
    base = Path(tempfile.mkdtemp(prefix="snapshot-cost-", dir=base))
    try:
        data = make_workspace(base / "data", size_mb, files)
        copy_s, copy_bytes = [], []
        for i in range(min(repeats, 3)):  # the baseline: one full copy per node
            t0 = time.perf_counter()
            durable_copy(data, base / f"copy{i}")
            copy_s.append(time.perf_counter() - t0)
            copy_bytes.append(disk_bytes(base / f"copy{i}"))
            shutil.rmtree(base / f"copy{i}")
        store = WorkspaceStore(base / "run" / "workspace")
        t0 = time.perf_counter()
        parent = store.create_root(data)
        root_s = time.perf_counter() - t0
        root_bytes = disk_bytes(store.root)
        child_s, child_bytes, materialize_s = [], [], []
        for i in range(repeats):
            before = disk_bytes(store.root)
            t0 = time.perf_counter()
            node = store.propose([parent.id], mode="deepen", goal=f"step {i}")
            t1 = time.perf_counter()
            work = store.materialize(node.id, base / f"work{node.id}")
            materialize_s.append(time.perf_counter() - t1)
            (work / "generated").mkdir(exist_ok=True)
            (work / "generated" / "summary.csv").write_text(f"metric,value\nrows,{i + 1}\n")
            (work / node.script).write_text(f"print({i})\n")
            (work / "analysis.log").write_text(f"step {i}\n")
            (work / "execution_result.json").write_text(f'{{"step": {i}}}\n')
            store.commit(node.id, work)
            parent = store.graph.set_status(node.id, "supported", conclusion=f"rows = {i + 1}")
            child_s.append(time.perf_counter() - t0)
            child_bytes.append(disk_bytes(store.root) - before)
            release(work)
        return {
            "size_mb": size_mb, "files": files, "repeats": repeats,
            "copy_s": statistics.median(copy_s), "copy_bytes": statistics.median(copy_bytes),
            "root_commit_s": root_s, "root_bytes": root_bytes,
            "child_commit_s": statistics.median(child_s), "child_bytes": statistics.median(child_bytes),
            "materialize_s": statistics.median(materialize_s),
            "time_ratio": statistics.median(child_s) / statistics.median(copy_s),
            "disk_ratio": statistics.median(child_bytes) / statistics.median(copy_bytes),
        }
    finally:
        release(base)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--base", type=Path, default=None, help="folder for the temporary workspaces (same file system "
                    "as a run directory; default: the system temp folder)")
    args = ap.parse_args()
    r = snapshot_cost(args.size_mb, args.files, args.repeats, args.base)
    mb = 1 << 20
    print(f"workload: {r['size_mb']} MB workspace in {r['files']} files + summary.csv; {r['repeats']} chained "
          "children, each changing one small file (median of the children)")
    print(f"  baseline durable full copy  : {r['copy_s'] * 1000:9.1f} ms  {r['copy_bytes'] / mb:9.2f} MB")
    print(f"  root snapshot (once)        : {r['root_commit_s'] * 1000:9.1f} ms  {r['root_bytes'] / mb:9.2f} MB")
    print(f"  child: propose+materialise+commit : {r['child_commit_s'] * 1000:9.1f} ms  "
          f"{r['child_bytes'] / 1024:9.1f} KB  (materialise alone {r['materialize_s'] * 1000:.1f} ms)")
    print(f"  child vs full copy          : time ×{r['time_ratio']:.4f}, disk ×{r['disk_ratio']:.5f}")


if __name__ == "__main__":
    main()
