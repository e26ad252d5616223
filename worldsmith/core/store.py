"""Atomic writes, content hashes and resumable step records.

Every file worldsmith writes goes through `atomic_write_*`: a temp file in the same directory, fsync, rename.
A killed process leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)
_CHUNK = 1 << 20


class ArtifactError(RuntimeError):
    """An artifact on disk is missing, corrupt or does not match its contract."""


def _read_umask() -> int:
    """The process umask, read without changing it (os.umask() would race with other threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


_UMASK = _read_umask()


def public_mode(path: str | os.PathLike[str], *, directory: bool = False) -> None:
    """Give a file or folder made by mkstemp/mkdtemp (0600/0700) the mode the user's umask asks for, so a run
    folder can be shared like anything else the user creates."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_UMASK)


@contextmanager
def _atomic_target(path: Path) -> Iterator[Path]:
    """A temp file beside `path` for the caller to fill; renamed onto `path` on success, removed on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    public_mode(tmp)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_stale_temps(parent: str | os.PathLike[str], name: str | None = None) -> list[Path]:
    """Delete what a killed writer left beside its target: `.NAME.*.tmp` files or folders (this module's and the
    package writer's) and `.NAME.tmp-*` folders (world building). Call it where one process owns `parent` (a run
    being resumed, an output folder being rebuilt); NAME None sweeps every target's leftovers below `parent`."""
    root = Path(parent)
    if not root.is_dir():
        return []
    if name is None:
        found = []  # os.walk never follows links: a run folder may hold a sandbox workspace with planted ones
        for folder, dirs, files in os.walk(root):
            for entry in (*dirs, *files):
                if entry.startswith(".") and (entry.endswith(".tmp") or ".tmp-" in entry):
                    found.append(Path(folder) / entry)
            dirs[:] = [d for d in dirs if not (d.startswith(".") and (d.endswith(".tmp") or ".tmp-" in d))]
    else:
        found = [*root.glob(f".{glob.escape(name)}.*.tmp"), *root.glob(f".{glob.escape(name)}.tmp-*")]
    removed = []
    for p in found:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed.append(p)
    return removed


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    path = Path(path)
    with _atomic_target(path) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    return path


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_copy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    dst = Path(dst)
    with _atomic_target(dst) as tmp:
        shutil.copyfile(src, tmp)
        shutil.copymode(src, tmp)  # mkstemp makes 0600 files; keep the source's permissions
    return dst


def write_model(path: str | os.PathLike[str], model: BaseModel) -> Path:
    return atomic_write_text(path, model.model_dump_json(indent=2) + "\n")


def read_model(path: str | os.PathLike[str], cls: type[M]) -> M:
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ArtifactError(f"{path}: missing (expected a {cls.__name__} JSON file)") from exc
    try:
        return cls.model_validate_json(raw)
    except ValidationError as exc:
        raise ArtifactError(f"{path}: not a valid {cls.__name__}: {_first_errors(exc)}") from exc


def _first_errors(exc: ValidationError, n: int = 3) -> str:
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()[:n]]
    more = len(exc.errors()) - n
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def sha256_json(obj: Any) -> str:
    """Stable hash of a JSON-able object (sorted keys, no whitespace)."""
    return sha256_bytes(json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode())


def iter_files(root: Path) -> Iterator[Path]:
    """Regular files under root in a stable order, skipping hidden temp files from atomic writes."""
    for p in sorted(root.rglob("*")):
        if p.is_file() and not (p.name.startswith(".") and p.name.endswith(".tmp")):
            yield p


def hash_tree(root: str | os.PathLike[str], files: Iterable[Path] | None = None) -> tuple[str, list[tuple[str, str, int]]]:
    """Content hash of a directory: sha256 over sorted (relative path, file hash) pairs."""
    root = Path(root)
    entries = []
    for p in files if files is not None else iter_files(root):
        rel = p.relative_to(root).as_posix()
        entries.append((rel, sha256_file(p), p.stat().st_size))
    entries.sort()
    digest = sha256_bytes("\n".join(f"{r}\t{h}" for r, h, _ in entries).encode())
    return digest, entries


# --------------------------------------------------------------------------------------------- JSONL


def append_jsonl(path: str | os.PathLike[str], record: dict[str, Any] | BaseModel, *, lock: threading.Lock | None = None) -> None:
    """Append one line and fsync. A crash can leave a truncated last line; `read_jsonl` skips exactly that."""
    line = record.model_dump_json() if isinstance(record, BaseModel) else json.dumps(record, default=str)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (line + "\n").encode()
    if lock is None:
        _append(path, data)
    else:
        with lock:
            _append(path, data)


def _append(path: Path, data: bytes) -> None:
    with open(path, "a+b") as fh:
        _drop_torn_tail(fh)
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _drop_torn_tail(fh: Any) -> None:
    """A writer killed mid-line leaves a last line without its newline; appending after it would glue the next
    record onto the fragment and poison every later read. Cut the file back to its last complete line."""
    end = fh.seek(0, os.SEEK_END)
    if end == 0:
        return
    fh.seek(end - 1)
    if fh.read(1) == b"\n":
        return
    pos = end
    while pos > 0:
        start = max(0, pos - _CHUNK)
        fh.seek(start)
        chunk = fh.read(pos - start)
        nl = chunk.rfind(b"\n")
        if nl >= 0:
            fh.truncate(start + nl + 1)
            return
        pos = start
    fh.truncate(0)


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if i == len(lines):  # torn final line from a killed writer: drop it, keep the rest
                break
            raise ArtifactError(f"{path}:{i}: invalid JSON line ({exc.msg})") from exc
    return out


def read_jsonl_lines(path: str | os.PathLike[str]) -> list[tuple[int, Any]]:
    """(line number, value) for every non-blank line of a JSONL file someone handed us: unlike `read_jsonl`
    (our own files, where a torn last line is a killed writer's), any bad line is an error naming file and line."""
    path = Path(path)
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append((i, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise ArtifactError(f"{path}:{i}: invalid JSON ({exc.msg})") from exc
    return rows


def write_jsonl(path: str | os.PathLike[str], records: Iterable[dict[str, Any] | BaseModel]) -> Path:
    lines = [r.model_dump_json() if isinstance(r, BaseModel) else json.dumps(r, default=str) for r in records]
    return atomic_write_text(path, "".join(line + "\n" for line in lines))


# --------------------------------------------------------------------------------------------- stores


class ContentStore:
    """Content-addressed blobs: `put` returns the sha256, identical content is stored once."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    def path_for(self, digest: str) -> Path:
        return self.root / digest[:2] / digest[2:]

    def put(self, data: bytes) -> str:
        digest = sha256_bytes(data)
        target = self.path_for(digest)
        if not target.exists():
            atomic_write_bytes(target, data)
        return digest

    def get(self, digest: str) -> bytes:
        target = self.path_for(digest)
        if not target.exists():
            raise ArtifactError(f"{target}: no blob {digest[:12]}… in the content store")
        data = target.read_bytes()
        if sha256_bytes(data) != digest:
            raise ArtifactError(f"{target}: blob is corrupt (hash mismatch)")
        return data

    def has(self, digest: str) -> bool:
        return self.path_for(digest).exists()


class StepLedger:
    """Records the last success of each pipeline step so a killed run resumes where it stopped.

    A step key is usually `<step>:<input hash>`; `done()` is true only when the step finished and every
    output it recorded still exists with the same hash.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, Any]] = {}
        for rec in read_jsonl(self.path):
            self._entries[rec["key"]] = rec

    def done(self, key: str) -> bool:
        rec = self._entries.get(key)
        if rec is None:
            return False
        for rel, digest in rec.get("outputs", {}).items():
            p = self.path.parent / rel
            if not p.exists() or sha256_file(p) != digest:
                return False
        return True

    def get(self, key: str) -> dict[str, Any] | None:
        return self._entries.get(key)

    def record(self, key: str, outputs: Iterable[str | os.PathLike[str]] = (), **info: Any) -> None:
        base = self.path.parent
        hashed = {Path(o).resolve().relative_to(base.resolve()).as_posix(): sha256_file(o) for o in outputs}
        rec = {"key": key, "outputs": hashed, **info}
        append_jsonl(self.path, rec, lock=self._lock)
        self._entries[key] = rec

    def keys(self) -> list[str]:
        return list(self._entries)
