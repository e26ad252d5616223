"""Host-side workspace operations that stay safe while hostile code owns the directory.

Every path is opened component by component relative to a directory descriptor with O_NOFOLLOW, so a symlink
planted by a cell (to `/`, to /etc/shadow, ...) can never make the host read or write outside the workspace,
even if the link is swapped in between a check and a use. Scans never follow links either.
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from pathlib import Path, PurePosixPath

from worldsmith.tools.sandbox.base import PathOutsideWorkspace

Snapshot = dict[str, tuple[int, int]]  # relative path -> (mtime_ns, size)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def split_rel(rel: str) -> list[str]:
    """Validate a workspace-relative path and return its components."""
    if not isinstance(rel, str) or not rel or "\x00" in rel:
        raise PathOutsideWorkspace(f"expected a non-empty relative path inside the workspace, got {rel!r}")
    pure = PurePosixPath(rel)
    if pure.is_absolute():
        raise PathOutsideWorkspace(f"{rel!r} is absolute; give a path relative to the workspace")
    parts = [p for p in pure.parts if p != "."]
    if not parts or any(p == ".." for p in parts):
        raise PathOutsideWorkspace(f"{rel!r} leaves the workspace ('..' is not allowed)")
    return parts


def _open_dir_chain(root: Path, parts: list[str], create: bool) -> int:
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return fd
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PathOutsideWorkspace(f"{'/'.join(parts)!r} goes through a symlink or a file; refused") from exc
        raise


def read_beneath(root: Path, rel: str, max_bytes: int | None = None) -> bytes:
    parts = split_rel(rel)
    dfd = _open_dir_chain(root, parts[:-1], create=False)
    try:
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PathOutsideWorkspace(f"{rel!r} is a symlink; downloads never follow links") from exc
            raise
    finally:
        os.close(dfd)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise PathOutsideWorkspace(f"{rel!r} is not a regular file")
        data = fh.read() if max_bytes is None else fh.read(max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise ValueError(f"{rel!r} is larger than {max_bytes} bytes")
    return data


def write_beneath(root: Path, rel: str, data: bytes, owner: tuple[int, int] | None = None) -> None:
    """Atomically write `data` to `rel` (temp file + rename in the same directory)."""
    parts = split_rel(rel)
    dfd = _open_dir_chain(root, parts[:-1], create=True)
    tmp = f".{parts[-1]}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if owner is not None:
            os.chown(tmp, owner[0], owner[1], dir_fd=dfd, follow_symlinks=False)
        os.rename(tmp, parts[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
        if owner is not None and len(parts) > 1:
            chown_tree(root / parts[0], *owner)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise
    finally:
        os.close(dfd)


def scan(root: Path, skip_top: frozenset[str] = frozenset(), limit: int = 20_000,
         owner: tuple[int, int] | None = None, regular_only: bool = False) -> Snapshot:
    """mtime/size of every non-directory entry below `root`. With `owner`, foreign entries are lchowned.

    The walk holds a descriptor for each directory and opens subdirectories with O_NOFOLLOW relative to it, so a
    cell that swaps a directory for a symlink (to `/`) while the host scans cannot steer the walk, or the chown,
    outside the workspace.
    """
    snap: Snapshot = {}
    try:
        top = os.open(root, _DIR_FLAGS)
    except OSError:
        return snap
    stack = [("", top)]
    try:
        while stack:
            prefix, dfd = stack.pop()
            try:
                _scan_dir(dfd, prefix, skip_top, limit, owner, regular_only, snap, stack)
            finally:
                os.close(dfd)
    finally:
        for _, dfd in stack:
            os.close(dfd)
    return snap


def _scan_dir(dfd: int, prefix: str, skip_top: frozenset[str], limit: int, owner: tuple[int, int] | None,
              regular_only: bool, snap: Snapshot, stack: list[tuple[str, int]]) -> None:
    with os.scandir(dfd) as entries:
        for entry in entries:
            if len(snap) >= limit:
                return
            if not prefix and entry.name in skip_top:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
                if owner is not None and (st.st_uid, st.st_gid) != owner:
                    os.chown(entry.name, owner[0], owner[1], dir_fd=dfd, follow_symlinks=False)
            except OSError:
                continue  # vanished meanwhile, or not ours to change (the cell then just can't write it)
            if stat.S_ISDIR(st.st_mode):
                try:
                    stack.append((prefix + entry.name + "/", os.open(entry.name, _DIR_FLAGS, dir_fd=dfd)))
                except OSError:
                    continue  # replaced by a symlink or file since the stat: not followed
            elif not regular_only or stat.S_ISREG(st.st_mode):
                snap[prefix + entry.name] = (st.st_mtime_ns, st.st_size)


def unlink_beneath(root: Path, rel: str) -> None:
    """Remove the file (or link) `rel` below `root` without following any link on the way."""
    parts = split_rel(rel)
    dfd = _open_dir_chain(root, parts[:-1], create=False)
    try:
        os.unlink(parts[-1], dir_fd=dfd)
    except FileNotFoundError:
        pass
    finally:
        os.close(dfd)


def total_bytes(snap: Snapshot) -> int:
    return sum(size for _, size in snap.values())


def changed(before: Snapshot, after: Snapshot) -> list[str]:
    return sorted(rel for rel, sig in after.items() if before.get(rel) != sig)


def list_regular(root: Path, skip_top: frozenset[str] = frozenset(), limit: int = 20_000) -> list[str]:
    return sorted(scan(root, skip_top, limit, regular_only=True))


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """lchown `root` and everything below it, never following symlinks."""
    try:
        os.chown(root, uid, gid, follow_symlinks=False)
    except OSError:
        return
    scan(root, limit=10**9, owner=(uid, gid))


def link_inputs(workspace: Path, targets: dict[str, str]) -> list[str]:
    """Create `workspace/<name> -> target` links so cells open inputs by bare name. Returns the names made."""
    made = []
    for name, target in targets.items():
        link = workspace / name
        if os.path.lexists(link):
            if os.path.islink(link) and os.readlink(link) == target:
                made.append(name)
                continue
            raise FileExistsError(f"input {name!r} collides with an existing entry in the workspace {workspace}; "
                                  "rename the input or remove the entry")
        os.symlink(target, link)
        made.append(name)
    return made


def unlink_inputs(workspace: Path, targets: dict[str, str]) -> None:
    for name, target in targets.items():
        link = workspace / name
        if os.path.islink(link) and os.readlink(link) == target:
            os.unlink(link)
