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
        description="Files larger than this (bytes, uncompressed size on disk) are read as a sample of "
        "`sample_read_rows` leading rows instead of in full; formats that cannot be sampled raise too_large.",
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
        description="A whole-document .json file larger than this is refused (it cannot be sampled) (bytes).",
    )


DEFAULT_LIMITS = FileLimits()
