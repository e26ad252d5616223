"""Reading a local document corpus into chunks for the memory's ``documents`` collection.

Plain text (.md, .txt) is read as UTF-8; PDF text is extracted when a reader (pypdf) is installed and the
file is otherwise skipped with a note saying what to install. Chunks follow paragraph boundaries up to
``max_chars`` (the local embedding model reads about 256 word pieces, so longer chunks would be truncated
unseen).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from pydantic import BaseModel, Field

TEXT_SUFFIXES = (".md", ".markdown", ".txt")
PDF_SUFFIX = ".pdf"
DEFAULT_MAX_CHARS = 1000


class Chunk(BaseModel):
    source: str = Field(description="path relative to the ingested folder")
    index: int
    text: str


class SkippedFile(BaseModel):
    path: str
    reason: str


class IngestReport(BaseModel):
    """What :meth:`RunMemory.ingest` did with a folder."""

    folder: str
    files: int = 0
    chunks: int = 0
    skipped: list[SkippedFile] = Field(default_factory=list)


def pdf_reader_available() -> bool:
    return importlib.util.find_spec("pypdf") is not None


def read_text(path: Path) -> str:
    """A document's text; raises ``ValueError`` (with what to do) when it cannot be read."""
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        try:
            return path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"not UTF-8 text (byte {exc.start}); convert it to UTF-8") from None
    if suffix == PDF_SUFFIX:
        if not pdf_reader_available():
            raise ValueError("no PDF reader installed (pip install pypdf); skipped")
        import pypdf

        try:
            return "\n\n".join(page.extract_text() or "" for page in pypdf.PdfReader(str(path)).pages)
        except (pypdf.errors.PyPdfError, OSError, ValueError, KeyError, TypeError) as exc:  # a damaged file:
            # skipped with the reason, the rest of the corpus is still read
            raise ValueError(f"unreadable PDF: {type(exc).__name__}: {exc}") from None
    raise ValueError(f"unsupported type {suffix or '(none)'}; readable: {', '.join(TEXT_SUFFIXES)}, {PDF_SUFFIX}")


def chunk_text(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> list[str]:
    """Paragraphs packed greedily into chunks of at most ``max_chars``; a longer paragraph is cut at spaces."""
    pieces: list[str] = []
    for para in (p.strip() for p in text.replace("\r\n", "\n").split("\n\n")):
        while len(para) > max_chars:
            cut = para.rfind(" ", 0, max_chars)
            cut = cut if cut > 0 else max_chars
            pieces.append(para[:cut].strip())
            para = para[cut:].strip()
        if para:
            pieces.append(para)
    chunks: list[str] = []
    for piece in pieces:
        if chunks and len(chunks[-1]) + 2 + len(piece) <= max_chars:
            chunks[-1] = f"{chunks[-1]}\n\n{piece}"
        else:
            chunks.append(piece)
    return chunks


def scan_corpus(folder: str | os.PathLike[str], max_chars: int = DEFAULT_MAX_CHARS) -> tuple[list[Chunk], IngestReport]:
    """Every readable document under ``folder`` as chunks, and a report of what was read or skipped."""
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such folder to ingest")
    report = IngestReport(folder=str(root))
    chunks: list[Chunk] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = path.relative_to(root).as_posix()
        if any(part.startswith(".") for part in path.relative_to(root).parts):
            continue  # hidden files and folders (.git, editor swap files)
        try:
            text = read_text(path)
        except ValueError as exc:
            report.skipped.append(SkippedFile(path=rel, reason=str(exc)))
            continue
        parts = chunk_text(text, max_chars)
        if not parts:
            report.skipped.append(SkippedFile(path=rel, reason="no text"))
            continue
        report.files += 1
        chunks += [Chunk(source=rel, index=i, text=t) for i, t in enumerate(parts)]
    report.chunks = len(chunks)
    return chunks, report
