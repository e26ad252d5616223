"""Budgets enforced at the root of every read: a guarded byte stream, JSON depth and xlsx zip checks.

Every check runs before (or while) bytes reach a parser, so a compression bomb, a one-line file, a
100k-deep JSON or a zip bomb ends in a `FileReadError` naming the `FileLimits` setting to raise, never a hang
or an out-of-memory kill. Model code in the sandbox reads files with pandas itself, outside these readers: there
the worker's rlimits (address space, CPU time) are the budget.
"""

from __future__ import annotations

import gzip
import io
import time
import zipfile
from pathlib import Path
from typing import BinaryIO

import numpy as np

from worldsmith.tools.files.errors import FileLimits, FileReadError, ReadErrorReason, over_limit
from worldsmith.tools.files.formats import FileFormat

RATIO_FLOOR = 4 * 2**20  # decompressed bytes before the ratio is judged: small files may compress very well
_BUFFER = 2**20  # raw read size; lines between two newlines of one read are bounded by it


class OverFullRead(FileReadError):
    """The stream passed the full-read cap: the caller reads a sample of leading rows instead."""


class _GuardedRaw(io.RawIOBase):
    """Counts the (decompressed) bytes of a file as they stream and stops at the first exceeded budget."""

    def __init__(
        self,
        path: Path,
        raw: BinaryIO,
        inner: BinaryIO,
        limits: FileLimits,
        *,
        compressed: bool,
        check_lines: bool,
        deadline: float,
        full_read_cap: int | None,
        cap_setting: str | None,
    ) -> None:
        self._path, self._raw, self._inner, self._limits = path, raw, inner, limits
        self._compressed, self._check_lines, self._deadline = compressed, check_lines, deadline
        self._full_read_cap, self._cap_setting = full_read_cap, cap_setting
        self._total = 0
        self._line_run = 0  # bytes since the last newline
        self._lines = 1

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        data = self._inner.read(min(len(buffer), _BUFFER))
        n = len(data)
        self._total += n
        self._check(data)
        buffer[:n] = data
        return n

    def close(self) -> None:
        try:
            self._inner.close()
            self._raw.close()
        finally:
            super().close()

    def _check(self, data: bytes) -> None:
        lim, path = self._limits, self._path
        if time.monotonic() > self._deadline:
            raise over_limit(
                path, "max_read_seconds", lim, f"reading stopped after {self._total:,} bytes",
                "the file is too slow to read in full", reason=ReadErrorReason.TIMEOUT,
            )
        if self._compressed:
            if self._total > lim.max_decompressed_bytes:
                raise over_limit(
                    path, "max_decompressed_bytes", lim, f"decompressed past {lim.max_decompressed_bytes:,} bytes",
                    "possible compression bomb",
                )
            consumed = max(self._raw.tell(), 1)
            if self._total > RATIO_FLOOR and self._total > lim.max_compression_ratio * consumed:
                raise over_limit(
                    path, "max_compression_ratio", lim,
                    f"{consumed:,} compressed bytes expanded to {self._total:,} (ratio {self._total / consumed:,.0f})",
                    "looks like a compression bomb",
                )
        if self._full_read_cap is not None and self._total > self._full_read_cap:
            setting = self._cap_setting or "max_full_read_bytes"
            raise OverFullRead(
                path, ReadErrorReason.TOO_LARGE,
                f"if the file is genuine, raise the limit: limits=FileLimits({setting}=...)",
                detail=f"decompressed content is over {setting}={self._full_read_cap:,} bytes",
            )
        if self._check_lines:
            self._check_line_length(data)

    def _check_line_length(self, data: bytes) -> None:
        limit = self._limits.max_line_bytes
        first = data.find(b"\n")
        if first < 0:
            self._line_run += len(data)
        elif self._line_run + first > limit:
            self._line_run += first
        else:
            inner = data.split(b"\n")[1:-1] if len(data) > limit else []  # a limit below the read size
            long_at = next((k for k, seg in enumerate(inner) if len(seg) > limit), None)
            if long_at is not None:
                self._lines += long_at + 1
                self._line_run = len(inner[long_at])
            else:
                self._lines += data.count(b"\n")
                self._line_run = len(data) - data.rfind(b"\n") - 1
        if self._line_run > limit:
            raise over_limit(
                self._path, "max_line_bytes", self._limits, f"a line of more than {self._line_run:,} bytes",
                "the file has a pathologically long line (wrong delimiter or newline, or not a table)",
                where=f"line {self._lines}",
            )


def open_guarded(
    path: Path,
    fmt: FileFormat,
    limits: FileLimits,
    *,
    deadline: float | None = None,
    check_lines: bool | None = None,
    full_read_cap: int | None = None,
    cap_setting: str | None = None,
) -> io.BufferedReader:
    """The decompressed bytes of `path`, checked against `limits` as they are read.

    Raises FileReadError (too_large/timeout) from `read()` at the first budget passed: decompressed size, compression
    ratio, line length (csv/tsv/jsonl unless `check_lines` says otherwise), wall time (`deadline`, a
    `time.monotonic()` value; default now + max_read_seconds) and `full_read_cap` (raises `OverFullRead`).
    """
    raw = open(path, "rb")  # noqa: SIM115 - owned and closed by the guard
    inner: BinaryIO = gzip.GzipFile(fileobj=raw, mode="rb") if fmt.gzip else raw  # type: ignore[assignment]
    guard = _GuardedRaw(
        path,
        raw,
        inner,
        limits,
        compressed=fmt.gzip,
        check_lines=fmt.kind in ("csv", "tsv", "jsonl") if check_lines is None else check_lines,
        deadline=deadline if deadline is not None else time.monotonic() + limits.max_read_seconds,
        full_read_cap=full_read_cap,
        cap_setting=cap_setting,
    )
    return io.BufferedReader(guard, buffer_size=_BUFFER)


def read_deadline(limits: FileLimits) -> float:
    return time.monotonic() + limits.max_read_seconds


# --- JSON nesting depth ---------------------------------------------------------------------------------------

_DEPTH_CHUNK = 4 * 2**20


def check_json_depth(path: Path, text: str, limits: FileLimits, where: str | None = None) -> None:
    """Refuse JSON nested deeper than `max_json_depth` before a recursive parser sees it.

    Cheap when it cannot matter (fewer brackets than the limit); otherwise a vectorised scan that skips brackets
    inside strings. Python's json raises RecursionError near depth 1000, and normalising deep values is slower still.
    """
    limit = limits.max_json_depth
    if text.count("{") + text.count("[") <= limit:
        return
    # Escapes come in left-to-right pairs inside strings: drop `\\` first, then `\"`; what is left of `"` delimits.
    data = text.encode("utf-8", errors="replace").replace(b"\\\\", b"").replace(b'\\"', b"")
    arr = np.frombuffer(data, dtype=np.uint8)
    in_string, depth = 0, 0
    for start in range(0, len(arr), _DEPTH_CHUNK):
        chunk = arr[start : start + _DEPTH_CHUNK]
        opens = (chunk == ord("{")) | (chunk == ord("["))
        closes = (chunk == ord("}")) | (chunk == ord("]"))
        is_quote = chunk == ord('"')
        at = np.flatnonzero(opens | closes | is_quote)  # only these bytes matter: work on them alone
        quote = is_quote[at]
        outside = ((np.cumsum(quote, dtype=np.int32) + in_string) & 1) == 0
        step = opens[at].astype(np.int32) - closes[at].astype(np.int32)
        levels = np.cumsum(step * outside, dtype=np.int32) + depth
        if len(levels) and int(levels.max()) > limit:
            first = start + int(at[np.argmax(levels > limit)])
            line = data.count(b"\n", 0, first) + 1
            raise over_limit(
                path, "max_json_depth", limits, f"JSON nested more than {limit} levels deep",
                "deeply nested JSON cannot be made into a table", where=where or f"line {line}",
            )
        in_string = (in_string + int(quote.sum())) & 1
        depth = int(levels[-1]) if len(levels) else depth


# --- xlsx (zip) parts -----------------------------------------------------------------------------------------


def check_xlsx_zip(path: Path, limits: FileLimits) -> None:
    """Check an xlsx zip's parts before openpyxl opens it: declared sizes, their total, and compression ratios.

    Declared sizes are the ones that matter: Python's zipfile never yields more than a part's declared size (a
    part that inflates past it fails its CRC check, which surfaces as a corrupt-workbook error).
    """
    try:
        with zipfile.ZipFile(path) as zf:
            parts = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise FileReadError(
            path, ReadErrorReason.CORRUPT, "open and re-save the workbook", detail=f"not a readable xlsx: {exc}"
        ) from exc
    total = 0
    for part in parts:
        size, packed = part.file_size, max(part.compress_size, 1)
        total += size
        where = f"part {part.filename!r}"
        if part.filename.lower().endswith("sharedstrings.xml") and size > limits.max_shared_strings_bytes:
            raise over_limit(
                path, "max_shared_strings_bytes", limits, f"shared-strings table declares {size:,} bytes",
                "the workbook's text table is loaded whole", where=where,
            )
        if size > limits.max_xlsx_member_bytes:
            raise over_limit(
                path, "max_xlsx_member_bytes", limits, f"part declares {size:,} uncompressed bytes",
                "possible zip bomb", where=where,
            )
        if size > RATIO_FLOOR and size > limits.max_compression_ratio * packed:
            raise over_limit(
                path, "max_compression_ratio", limits,
                f"{packed:,} compressed bytes declare {size:,} (ratio {size / packed:,.0f})",
                "looks like a zip bomb", where=where,
            )
    if total > limits.max_decompressed_bytes:
        raise over_limit(
            path, "max_decompressed_bytes", limits, f"parts declare {total:,} uncompressed bytes in all",
            "possible zip bomb",
        )
