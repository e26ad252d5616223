"""Format detection for data files: extension registry, magic-number checks, encoding and delimiter sniffing."""

from __future__ import annotations

import csv
import gzip
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from worldsmith.tools.files.errors import FileReadError, ReadErrorReason

Kind = Literal["csv", "tsv", "xlsx", "json", "jsonl", "parquet", "sqlite"]

_SUFFIX_KIND: dict[str, Kind] = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".sqlite": "sqlite",
    ".sqlite3": "sqlite",
    ".db": "sqlite",
}
TEXT_KINDS: frozenset[str] = frozenset({"csv", "tsv", "json", "jsonl"})
# Non-table files a workspace may hold (memos, notes, scripts, logs): listed with their first lines.
DOCUMENT_SUFFIXES: frozenset[str] = frozenset(
    {".md", ".txt", ".rst", ".log", ".py", ".sql", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".html", ".htm", ".xml"}
)
UNSUPPORTED_HINTS = {
    ".xls": "legacy .xls is not supported; save the workbook as .xlsx",
    ".zip": "unpack the archive and profile the files inside",
    ".feather": "convert to parquet",
}

_MAGICS: list[tuple[bytes, str]] = [
    (b"PK\x03\x04", "a zip archive (xlsx/docx/zip)"),
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"PAR1", "a Parquet file"),
    (b"SQLite format 3\x00", "a SQLite database"),
    (b"%PDF", "a PDF document"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\x7fELF", "an executable"),
    (b"\xd0\xcf\x11\xe0", "an OLE2 file (legacy .xls/.doc or encrypted xlsx)"),
    (b"\xfd7zXZ\x00", "xz-compressed data"),
    (b"7z\xbc\xaf", "a 7z archive"),
]
_SUPPORTED = sorted(_SUFFIX_KIND) + [f"{s}.gz" for s in sorted(_SUFFIX_KIND) if _SUFFIX_KIND[s] in TEXT_KINDS]


@dataclass(frozen=True)
class FileFormat:
    """What a file holds (`kind`) and whether it is gzip-wrapped."""

    kind: Kind
    gzip: bool = False

    @property
    def is_text(self) -> bool:
        return self.kind in TEXT_KINDS


def supported_suffixes() -> list[str]:
    """Every file ending `read_table` accepts."""
    return list(_SUPPORTED)


def detect_format(path: Path) -> FileFormat:
    """Map a file name to its format, or raise FileReadError(unsupported) listing what is supported."""
    suffixes = [s.lower() for s in path.suffixes]
    gz = bool(suffixes) and suffixes[-1] == ".gz"
    inner = suffixes[-2] if gz and len(suffixes) >= 2 else (suffixes[-1] if suffixes and not gz else "")
    kind = _SUFFIX_KIND.get(inner)
    if kind is None or (gz and kind not in TEXT_KINDS):
        hint = UNSUPPORTED_HINTS.get(inner, "")
        hint = (hint + "; " if hint else "") + "supported: " + ", ".join(_SUPPORTED)
        shown = "".join(path.suffixes[-2:]) if gz else (path.suffix or "(no extension)")
        raise FileReadError(path, ReadErrorReason.UNSUPPORTED, hint, detail=f"unsupported file type {shown!r}")
    return FileFormat(kind=kind, gzip=gz)


def is_table_file(path: Path) -> bool:
    try:
        detect_format(path)
    except FileReadError:
        return False
    return True


def open_binary(path: Path, fmt: FileFormat) -> BinaryIO:
    """Open the (decompressed) byte stream of a file."""
    return gzip.open(path, "rb") if fmt.gzip else open(path, "rb")  # type: ignore[return-value]


def read_head(path: Path, fmt: FileFormat, n: int) -> bytes:
    """First `n` decompressed bytes; corrupt gzip becomes FileReadError(corrupt)."""
    try:
        with open_binary(path, fmt) as fh:
            return fh.read(n)
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        if fmt.gzip:
            hint = "the .gz file is damaged or truncated; re-export it"
            raise FileReadError(path, ReadErrorReason.CORRUPT, hint, detail=f"gzip: {exc}") from exc
        raise FileReadError(path, ReadErrorReason.CORRUPT, "check the file is readable", detail=str(exc)) from exc


def _magic_name(head: bytes) -> str | None:
    for magic, name in _MAGICS:
        if head.startswith(magic):
            return name
    return None


def check_container(path: Path, fmt: FileFormat) -> None:
    """Verify the on-disk bytes match the declared format (catches binaries disguised as text and vice versa)."""
    size = path.stat().st_size
    if size == 0:
        raise FileReadError(path, ReadErrorReason.EMPTY, "the file has 0 bytes; re-export it", detail="empty file")
    with open(path, "rb") as fh:
        raw = fh.read(16)
    expected = {"xlsx": b"PK\x03\x04", "parquet": b"PAR1", "sqlite": b"SQLite format 3\x00"}.get(fmt.kind)
    if fmt.gzip:
        expected = b"\x1f\x8b"
    if expected is not None and not raw.startswith(expected):
        seen = _magic_name(raw) or ("plain text" if _looks_text(raw) else "unrecognised bytes")
        hint = f"the content is {seen}, not {fmt.kind}{' (gzip)' if fmt.gzip else ''}"
        if fmt.gzip and seen == "plain text":
            hint += "; drop the .gz suffix"
        raise FileReadError(path, ReadErrorReason.CORRUPT, hint, detail=f"not a valid {path.name} file")
    if fmt.is_text and not fmt.gzip:
        seen = _magic_name(raw)
        if seen is not None:
            hint = "rename it with the right extension" + (" (.gz)" if seen.startswith("gzip") else "")
            raise FileReadError(
                path, ReadErrorReason.BINARY, hint, detail=f"binary content disguised as .{fmt.kind}: looks like {seen}"
            )


def _looks_text(raw: bytes) -> bool:
    return bool(raw) and b"\x00" not in raw and sum(32 <= b < 127 or b in (9, 10, 13) for b in raw) >= 0.9 * len(raw)


_BOMS: list[tuple[bytes, str]] = [
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
]


def detect_encoding(path: Path, head: bytes) -> str:
    """Guess the encoding of `head` (a file's first bytes): BOM, UTF-16 NUL pattern, UTF-8, else charset-normalizer.

    Raises FileReadError(binary) when NUL bytes show it is not text, FileReadError(encoding) when nothing fits.
    """
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name
    if b"\x00" in head:
        even, odd = head[0::2], head[1::2]
        nul_even = even.count(0) / max(len(even), 1)
        nul_odd = odd.count(0) / max(len(odd), 1)
        if nul_odd > 0.6 and nul_even < 0.05:
            return "utf-16-le"
        if nul_even > 0.6 and nul_odd < 0.05:
            return "utf-16-be"
        first = head.index(b"\x00")
        raise FileReadError(
            path,
            ReadErrorReason.BINARY,
            "this is not a text table; check the file type",
            detail=f"NUL byte at offset {first}: binary content in a text-format file",
        )
    try:
        head.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError as exc:
        if exc.start >= len(head) - 3 and exc.reason == "unexpected end of data":
            return "utf-8"  # the sample cut a multi-byte character in half
    guess = guess_legacy_encoding(head)
    if guess is None:
        raise FileReadError(
            path, ReadErrorReason.ENCODING, "re-save the file as UTF-8", detail="could not determine the text encoding"
        )
    return guess


def guess_legacy_encoding(data: bytes) -> str | None:
    """charset-normalizer's guess for non-UTF-8 bytes, preferring Windows-1252 on near-ties; None if nothing fits."""
    from charset_normalizer import from_bytes

    matches = from_bytes(data)
    best = matches.best()
    if best is None:
        return None
    # charset-normalizer ranks single-byte code pages poorly on short Western text (it picks cp1257 for "Genève");
    # Windows-1252 is by far the most common legacy encoding in tables, so it wins near-ties.
    western = next((m for m in matches if m.encoding == "cp1252"), None)
    if western is not None and western.chaos <= best.chaos + 0.05:
        try:
            data.decode("cp1252")
            return "cp1252"
        except UnicodeDecodeError:
            return "latin-1"  # bytes 0x81/0x8D/0x8F/0x90/0x9D are undefined in cp1252 but valid latin-1
    return best.encoding


def decode_sample(head: bytes, encoding: str) -> str:
    """Decode a byte sample for sniffing, dropping the last (possibly partial) line."""
    text = head.decode(encoding, errors="replace")
    if "\n" in text:
        text = text[: text.rindex("\n") + 1]
    return text.lstrip("\ufeff")


def sniff_delimiter(text: str, default: str) -> str:
    """Guess the field delimiter from decoded text with csv.Sniffer, then a consistency count; else `default`."""
    lines = [ln for ln in text.splitlines() if ln.strip()][:50]
    if len(lines) < 1:
        return default
    sample = "\n".join(lines) + "\n"
    try:
        found = csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
        if _consistent(lines, found):
            return found
    except csv.Error:
        pass
    scores = {d: _consistent_count(lines, d) for d in (default, ",", ";", "\t", "|")}
    best = max(scores, key=lambda d: scores[d])
    return best if scores[best] > 0 else default


def _consistent_count(lines: list[str], delim: str) -> int:
    rows = list(csv.reader(lines, delimiter=delim))
    counts = [len(r) for r in rows if r]
    if not counts or counts[0] < 2:
        return 0
    agree = sum(c == counts[0] for c in counts) / len(counts)
    return counts[0] if agree >= 0.8 else 0


def _consistent(lines: list[str], delim: str) -> bool:
    return _consistent_count(lines, delim) > 0 or len(lines) == 1
