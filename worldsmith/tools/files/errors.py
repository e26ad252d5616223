"""Errors and limits shared by the data-file readers and the profiler."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class ReadErrorReason(str, Enum):
    """Machine-readable cause of a `FileReadError` (compare with plain strings: `err.reason == "corrupt"`)."""

    NOT_FOUND = "not_found"
    UNSUPPORTED = "unsupported"
    EMPTY = "empty"
    EMPTY_SHEET = "empty_sheet"
    BINARY = "binary"
    ENCODING = "encoding"
    CORRUPT = "corrupt"
    INVALID_JSON = "invalid_json"
    TOO_LARGE = "too_large"
    TIMEOUT = "timeout"
    NO_SUCH_TABLE = "no_such_table"
    AMBIGUOUS = "ambiguous"


class FileReadError(Exception):
    """A data file could not be read. Says which file, what went wrong, where (if known) and what to do.

    `reason` is a `ReadErrorReason`; `detail` is the underlying parser message; `where` is a location
    such as "line 12" or "line 3, column 7"; `hint` is the suggested fix.
    """

    def __init__(
        self,
        path: str | Path,
        reason: ReadErrorReason | str,
        hint: str = "",
        *,
        detail: str = "",
        where: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.reason = ReadErrorReason(reason)
        self.hint = hint
        self.detail = detail
        self.where = where
        super().__init__(self._message())

    def _message(self) -> str:
        loc = f" at {self.where}" if self.where else ""
        msg = f"cannot read {self.path}{loc}: {self.reason.value}"
        if self.detail:
            msg += f": {self.detail}"
        if self.hint:
            msg += f" (hint: {self.hint})"
        return msg

    def __reduce__(self):  # keep keyword-only fields across pickling (multiprocessing, Ray)
        return (_rebuild_error, (str(self.path), self.reason.value, self.hint, self.detail, self.where))


def _rebuild_error(path: str, reason: str, hint: str, detail: str, where: str | None) -> FileReadError:
    return FileReadError(path, reason, hint, detail=detail, where=where)


class FileLimits(BaseModel):
    """Size thresholds for reading and profiling data files."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_full_read_bytes: int = Field(
        200 * 1024 * 1024,
        description="Files larger than this (bytes: size on disk, or decompressed size for .gz, counted while "
        "reading) are read as a sample of `sample_read_rows` leading rows instead of in full; formats that cannot "
        "be sampled raise too_large.",
    )
    sample_read_rows: int = Field(200_000, description="Rows read from a file over `max_full_read_bytes` (rows).")
    encoding_sniff_bytes: int = Field(
        1024 * 1024, description="Bytes from the start of a text file used to detect its encoding (bytes)."
    )
    delimiter_sniff_bytes: int = Field(
        32 * 1024, description="Bytes of decoded text given to csv.Sniffer to guess the delimiter (characters)."
    )
    max_json_bytes: int = Field(
        512 * 1024 * 1024,
        description="A whole-document .json file larger than this (decompressed) is refused: it cannot be sampled "
        "(bytes).",
    )
    # Budgets against hostile or pathological files: each is enforced while the bytes stream in, before a parser
    # sees them, so a compression bomb or a one-line file ends in a FileReadError within seconds instead of a hang.
    max_decompressed_bytes: int = Field(
        4 * 1024**3,
        description="Most bytes a compressed file (.gz text, xlsx parts together) may decompress to (bytes).",
    )
    max_compression_ratio: float = Field(
        200.0,
        description="Decompressed/compressed size above which a file is treated as a compression bomb; checked "
        "once 4 MiB are decompressed (real tables compress 3-50x, bombs about 1000x).",
    )
    max_line_bytes: int = Field(
        8 * 1024 * 1024, description="Longest line of a csv/tsv/jsonl file (bytes, decompressed)."
    )
    max_columns: int = Field(
        10_000, description="Most columns a header may declare (checked before parsing; pandas slows sharply past it)."
    )
    max_json_depth: int = Field(256, description="Deepest nesting of arrays/objects in a JSON value (levels).")
    max_xlsx_member_bytes: int = Field(
        1024**3, description="Largest declared uncompressed size of one part (sheet XML, ...) of an xlsx zip (bytes)."
    )
    max_shared_strings_bytes: int = Field(
        256 * 1024 * 1024,
        description="Largest declared uncompressed size of an xlsx shared-strings table (loaded whole) (bytes).",
    )
    max_read_seconds: float = Field(
        120.0, description="Wall-clock budget for streaming one file's bytes or running one SQLite read (seconds)."
    )


DEFAULT_LIMITS = FileLimits()


def over_limit(
    path: str | Path,
    setting: str,
    limits: FileLimits,
    detail: str,
    why: str = "",
    *,
    where: str | None = None,
    reason: ReadErrorReason = ReadErrorReason.TOO_LARGE,
) -> FileReadError:
    """The error for a file that passed one `FileLimits` budget: what, which limit, and how to raise it."""
    value = getattr(limits, setting)
    shown = f"{value:,}" if isinstance(value, int) else f"{value:g}"
    hint = (why + "; " if why else "") + (
        f"if the file is genuine, raise the limit: limits=FileLimits({setting}=...) (now {shown})"
    )
    return FileReadError(path, reason, hint, detail=f"{detail} (over {setting}={shown})", where=where)
