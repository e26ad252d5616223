"""Content-addressed, read-only file blobs: the storage under every workspace snapshot.

Why blobs + manifests rather than hardlinked node trees: a node is then a small JSON manifest (path → hash),
so an unchanged 100 MB file costs nothing per child, identical files met in different parents deduplicate
for free when composing, and integrity is checkable from the name alone. Materialising a node hardlinks the
blobs into a folder (same file system), which is as cheap as a hardlinked tree.

A blob is written once (temp file + fsync + rename) and never again: mode 0444 and mtime set to the epoch,
so any later write through a hardlink (a materialised workspace used outside a read-only mount, or by root,
who ignores file modes) shows in a plain ``stat`` and :meth:`BlobStore.check` refuses the blob.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from worldsmith.core.store import ArtifactError
from worldsmith.core.workspace_types import FileEntry

_CHUNK = 1 << 20
_BLOB_MODE = 0o444


class BlobStore:
    """Blobs under ``root/ab/cdef…`` named by sha256."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path_for(self, digest: str) -> Path:
        return self.root / digest[:2] / digest[2:]

    def has(self, digest: str) -> bool:
        return self.path_for(digest).is_file()

    def put_file(self, src: str | os.PathLike[str]) -> FileEntry:
        """Store a copy of ``src`` (streamed: hashed while copied, never held in memory); identical content is
        stored once. The caller's file is not linked, so its later changes never reach the blob."""
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".blob.", suffix=".tmp")
        h, size = hashlib.sha256(), 0
        try:
            with open(src, "rb") as fin, os.fdopen(fd, "wb") as fout:
                while chunk := fin.read(_CHUNK):
                    h.update(chunk)
                    size += len(chunk)
                    fout.write(chunk)
                fout.flush()
                os.fsync(fout.fileno())
            digest = h.hexdigest()
            target = self.path_for(digest)
            if target.is_file():
                os.unlink(tmp)
            else:
                os.chmod(tmp, _BLOB_MODE)
                os.utime(tmp, ns=(0, 0))
                target.parent.mkdir(exist_ok=True)
                os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return FileEntry(sha256=digest, size=size)

    def check(self, entry: FileEntry) -> Path:
        """The blob's path after a cheap integrity check (exists, size, untouched mtime); raises otherwise."""
        path = self.path_for(entry.sha256)
        try:
            st = path.stat()
        except FileNotFoundError:
            raise ArtifactError(f"{path}: blob {entry.sha256[:12]}… is missing from the workspace store") from None
        if st.st_size != entry.size or st.st_mtime_ns != 0:
            raise ArtifactError(f"{path}: blob {entry.sha256[:12]}… was modified after it was stored (size "
                                f"{st.st_size}, expected {entry.size}; mtime {st.st_mtime_ns}) — probably written "
                                "through a hardlink in a materialised workspace; mount sources read-only")
        return path

    def verify(self, entry: FileEntry) -> None:
        """Full check: re-hash the blob."""
        path = self.check(entry)
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            while chunk := fh.read(_CHUNK):
                h.update(chunk)
        if h.hexdigest() != entry.sha256:
            raise ArtifactError(f"{path}: blob content does not match its hash {entry.sha256[:12]}…")

    def place(self, entry: FileEntry, dest: Path, *, link: bool) -> None:
        """Put the blob at ``dest``: a hardlink (shared inode, read-only) or, with ``link=False`` or across
        file systems, a private writable copy."""
        src = self.check(entry)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if link:
            try:
                os.link(src, dest)
                return
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                    raise
        shutil.copyfile(src, dest)
        os.chmod(dest, 0o644)
