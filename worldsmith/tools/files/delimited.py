"""Delimited text (csv/tsv): dialect sniffing, header budgets, decimal-comma detection and the guarded pandas read."""

from __future__ import annotations

import csv
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from worldsmith.tools.files.errors import DEFAULT_LIMITS, FileLimits, FileReadError, ReadErrorReason, over_limit
from worldsmith.tools.files.formats import (
    FileFormat,
    decode_sample,
    detect_encoding,
    guess_legacy_encoding,
    read_head,
    sniff_delimiter,
)
from worldsmith.tools.files.guard import open_guarded, read_deadline

DECIMAL_ATTR = "worldsmith_decimal"  # DataFrame.attrs key: how numbers were read when not with a decimal point
ENCODING_ATTR = "worldsmith_encoding"  # DataFrame.attrs key: the encoding a read fell back to after a decode error
_LINE_RE = re.compile(r"(line|row) (\d+)")  # pandas: "in line N" is 1-based, "starting at row N" is 0-based
_COMMA_DECIMAL = re.compile(r"[-+]?(?:\d{1,3}(?:\.\d{3})+|\d+),\d+")
_DOT_DECIMAL = re.compile(r"[-+]?\d*\.\d+")
_DOT_THOUSANDS = re.compile(r"[-+]?\d{1,3}(?:\.\d{3})+(?:,\d+)?")


@dataclass(frozen=True)
class CsvDialect:
    """How to parse one delimited file."""

    encoding: str
    delimiter: str
    ascii_head: bool
    decimal: str = "."
    thousands: str | None = None

    @property
    def note(self) -> str | None:
        if self.decimal == ".":
            return None
        sep = f" and {self.thousands!r} as the thousands separator" if self.thousands else ""
        return f"decimal comma detected: numbers read with {self.decimal!r} as the decimal separator{sep}"


def sniff_csv(
    path: Path, fmt: FileFormat, limits: FileLimits | None = None, encoding: str | None = None
) -> CsvDialect:
    """Encoding, delimiter and number format of a csv/tsv file from its first bytes; refuses a header over budget."""
    limits = limits or DEFAULT_LIMITS
    head = read_head(path, fmt, limits.encoding_sniff_bytes)
    if not head.strip(b" \t\r\n\x00\xef\xbb\xbf\xff\xfe"):
        raise FileReadError(path, ReadErrorReason.EMPTY, "the file holds only whitespace", detail="empty file")
    enc = encoding or detect_encoding(path, head)
    first = _first_line(path, fmt, head, limits)
    text = decode_sample(head[: limits.delimiter_sniff_bytes * 4], enc)
    if text.lstrip()[:15].lower().startswith(("<!doctype html", "<html")):
        raise FileReadError(
            path,
            ReadErrorReason.CORRUPT,
            "download the data itself, not the web page",
            detail="content is an HTML page",
        )
    delim = sniff_delimiter(text[: limits.delimiter_sniff_bytes], "\t" if fmt.kind == "tsv" else ",")
    _check_columns(path, first.decode(enc, errors="replace").lstrip("\ufeff"), delim, limits)
    decimal, thousands = detect_decimal_comma(text, delim)
    return CsvDialect(enc, delim, head.isascii(), decimal, thousands)


def sniff_delimited(
    path: Path, fmt: FileFormat, limits: FileLimits | None = None, encoding: str | None = None
) -> tuple[str, str, bool]:
    """(encoding, delimiter, head_is_ascii) of a csv/tsv file, from its first bytes."""
    d = sniff_csv(path, fmt, limits, encoding)
    return d.encoding, d.delimiter, d.ascii_head


def _first_line(path: Path, fmt: FileFormat, head: bytes, limits: FileLimits) -> bytes:
    """The header line's bytes, refused before any parser runs when it is longer than `max_line_bytes`."""
    end = head.find(b"\n")
    if end < 0 and len(head) >= limits.encoding_sniff_bytes:  # the header may go on past the sample
        head = read_head(path, fmt, limits.max_line_bytes + 1)
        end = head.find(b"\n")
    if (end if end >= 0 else len(head)) > limits.max_line_bytes:
        raise over_limit(
            path, "max_line_bytes", limits, f"the header line is longer than {limits.max_line_bytes:,} bytes",
            "the file has a pathologically long line (wrong delimiter or newline, or not a table)", where="line 1",
        )
    return head[:end] if end >= 0 else head


def _check_columns(path: Path, header: str, delim: str, limits: FileLimits) -> None:
    # pandas renames repeated names in time that grows faster than linearly: count fields before it parses.
    if header.count(delim) < limits.max_columns:
        return
    try:
        n = len(next(csv.reader([header], delimiter=delim), []))
    except csv.Error:  # a field over csv's own size limit: count separators instead
        n = header.count(delim) + 1
    if n > limits.max_columns:
        raise over_limit(
            path, "max_columns", limits, f"the header declares {n:,} columns",
            f"check the delimiter ({delim!r}) or split the table", where="line 1",
        )


def detect_decimal_comma(text: str, delim: str) -> tuple[str, str | None]:
    """(decimal, thousands) for a sample: ("," , "." or None) when numbers are written 1.234,5 / 3,25.

    Only for non-comma delimiters; decided by majority over the sample's cells. Thousands "." is used only when
    every dotted number fits d.ddd grouping (so dates such as 01.02.2020 are never read as integers).
    """
    if delim == ",":
        return ".", None
    rows = csv.reader(text.splitlines()[1:500], delimiter=delim)
    cells = [c.strip() for row in rows for c in row]
    comma = sum(bool(_COMMA_DECIMAL.fullmatch(c)) for c in cells)
    dotted = [c for c in cells if "." in c and any(ch.isdigit() for ch in c)]
    grouped = [c for c in dotted if _DOT_THOUSANDS.fullmatch(c)]
    dot = sum(bool(_DOT_DECIMAL.fullmatch(c)) for c in dotted if not _DOT_THOUSANDS.fullmatch(c))
    if comma == 0 or comma <= dot:
        return ".", None
    return ",", "." if grouped and len(grouped) == len(dotted) else None


def read_delimited(
    path: Path,
    fmt: FileFormat,
    limits: FileLimits,
    nrows: int | None,
    encoding: str | None,
    *,
    deadline: float | None = None,
    full_read_cap: int | None = None,
) -> pd.DataFrame:
    """Parse a csv/tsv file with pandas through a guarded stream; every failure is a FileReadError."""
    dialect = sniff_csv(path, fmt, limits, encoding)
    enc, delim = dialect.encoding, dialect.delimiter
    deadline = deadline if deadline is not None else read_deadline(limits)

    def parse(enc: str) -> pd.DataFrame:
        with open_guarded(path, fmt, limits, deadline=deadline, full_read_cap=full_read_cap) as fh:
            df = pd.read_csv(
                fh,
                sep=delim,
                encoding=enc,
                nrows=nrows,
                low_memory=False,
                decimal=dialect.decimal,
                thousands=dialect.thousands,
            )
        if dialect.note:
            df.attrs[DECIMAL_ATTR] = dialect.note
        return df

    try:
        return parse(enc)
    except UnicodeDecodeError as exc:
        # A UTF-8 head with non-ASCII text proves UTF-8; a later failure means mixed encodings, not a wrong guess.
        if encoding is None and (dialect.ascii_head or enc != "utf-8"):
            retry = _redetect_encoding(path, fmt, enc, limits)
            if retry is not None:
                try:
                    df = parse(retry)
                    df.attrs[ENCODING_ATTR] = retry
                    return df
                except UnicodeDecodeError:
                    pass
        raise FileReadError(
            path,
            ReadErrorReason.ENCODING,
            "re-save the file as UTF-8 or pass encoding=",
            detail=f"bytes are not valid {enc} ({exc.reason}); the file may mix encodings",
        ) from exc
    except pd.errors.EmptyDataError as exc:
        raise FileReadError(path, ReadErrorReason.EMPTY, "the file has no header or rows", detail=str(exc)) from exc
    except pd.errors.ParserError as exc:
        msg = str(exc).strip()
        m = _LINE_RE.search(msg)
        raise FileReadError(
            path,
            ReadErrorReason.CORRUPT,
            f"fix the malformed row (delimiter detected: {delim!r}, encoding: {enc})",
            detail=msg.replace("Error tokenizing data. ", ""),
            where=f"line {int(m.group(2)) + (m.group(1) == 'row')}" if m else None,
        ) from exc
    except (OSError, EOFError, zlib.error, ValueError) as exc:
        raise FileReadError(path, ReadErrorReason.CORRUPT, "re-export the file", detail=str(exc)) from exc


def _redetect_encoding(path: Path, fmt: FileFormat, failed: str, limits: FileLimits) -> str | None:
    """Second opinion from charset-normalizer over (up to 64 MiB of) the whole file after a decode failure."""
    with open_guarded(path, fmt, limits, check_lines=False) as fh:
        guess = guess_legacy_encoding(fh.read(64 * 2**20))
    if guess is None or guess.replace("_", "-") == failed.replace("_", "-"):
        return None
    return guess
