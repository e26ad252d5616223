"""Run memory (chromadb, offline embeddings): findings, questions, documents and exemplars of one run."""

from worldsmith.memory.documents import IngestReport, SkippedFile
from worldsmith.memory.store import (
                                     COLLECTIONS,
                                     DEFAULT_DUPLICATE_THRESHOLD,
                                     MEMORY_DIRNAME,
                                     DuplicateCheck,
                                     MemoryHit,
                                     RunMemory,
                                     memory_path,
)

__all__ = ["COLLECTIONS", "DEFAULT_DUPLICATE_THRESHOLD", "MEMORY_DIRNAME", "DuplicateCheck", "IngestReport", "MemoryHit",
           "RunMemory", "SkippedFile", "memory_path"]
