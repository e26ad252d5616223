"""Run memory: chromadb collections of findings, questions, documents and exemplars, persisted per run.

One ``chromadb.PersistentClient`` per run folder (``RUN/memory/``), so a resumed run finds what it had
remembered. Vectors come from worldsmith's own ``llm.embed()`` (offline MiniLM by default): every text is
embedded by us and handed to chromadb as vectors, and each collection is also opened with
:class:`~worldsmith.llm.embeddings.ChromaEmbeddingFunction`, so chromadb never falls back to its default
embedding function (which downloads a model at run time and fails offline). Cosine space: ``similarity`` is
``1 - cosine distance``, 1.0 for the same direction.

Async first (embedding may call an endpoint); the sync methods are thin wrappers. chromadb itself is
blocking and runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from worldsmith.core.aio import run_sync
from worldsmith.core.schemas import Finding
from worldsmith.llm.embeddings import EMBED_ROLE, ChromaEmbeddingFunction
from worldsmith.memory.documents import DEFAULT_MAX_CHARS, IngestReport, scan_corpus

if TYPE_CHECKING:
    from worldsmith.llm.client import LLM

Collection = Literal["findings", "questions", "documents", "exemplars"]
COLLECTIONS: tuple[Collection, ...] = ("findings", "questions", "documents", "exemplars")
#: The folder inside a run directory that holds its memory.
MEMORY_DIRNAME = "memory"
#: Cosine similarity from which a new question counts as a repeat of a remembered one. Measured with the
#: default MiniLM model: paraphrases of one analysis question score about 0.8-0.99; a different question on
#: the same measure and grouping ("lowest average monthly revenue by region" against "average monthly
#: revenue per region") also scores about 0.85, which the director should treat as too close anyway; a
#: question about other things scores below 0.5 (tests/evolution/test_memory.py holds hand-made cases).
DEFAULT_DUPLICATE_THRESHOLD = 0.8
_BATCH = 256

Metadata = dict[str, str | int | float | bool]


class MemoryHit(BaseModel):
    id: str
    text: str
    metadata: dict[str, Any]
    similarity: float


class DuplicateCheck(BaseModel):
    """Is a question a repeat? ``nearest`` is the most similar remembered question (None when none is)."""

    duplicate: bool
    similarity: float
    threshold: float
    nearest: MemoryHit | None = None


def memory_path(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / MEMORY_DIRNAME


def clean_metadata(meta: dict[str, Any] | None) -> Metadata:
    """chromadb keeps str/int/float/bool values: None is dropped, anything else is stored as JSON text."""
    out: Metadata = {}
    for key, value in (meta or {}).items():
        if value is None:
            continue
        out[str(key)] = value if isinstance(value, (str, int, float, bool)) else json.dumps(value, default=str)
    return out


class RunMemory:
    """The memory of one run, stored at ``path`` (created on first use)."""

    def __init__(self, path: str | os.PathLike[str], llm: LLM, *, role: str = EMBED_ROLE) -> None:
        import chromadb
        from chromadb.config import Settings

        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.llm, self.role = llm, role
        self._client = chromadb.PersistentClient(path=str(self.path),
                                                 settings=Settings(anonymized_telemetry=False, allow_reset=False))
        ef = ChromaEmbeddingFunction(llm, role)
        self._cols = {name: self._client.get_or_create_collection(
            name, embedding_function=ef, configuration={"hnsw": {"space": "cosine"}}) for name in COLLECTIONS}

    # -- generic ---------------------------------------------------------------------------------------------
    async def aadd(self, collection: Collection, ids: list[str], texts: list[str],
                   metadatas: list[dict[str, Any]] | None = None) -> None:
        """Add or replace entries (same id → replaced)."""
        if len(ids) != len(texts) or (metadatas is not None and len(metadatas) != len(ids)):
            raise ValueError(f"memory.{collection}: {len(ids)} ids, {len(texts)} texts and "
                             f"{len(metadatas or [])} metadatas must match")
        if len(set(ids)) != len(ids):
            raise ValueError(f"memory.{collection}: ids repeat within one call")
        col = self._col(collection)
        for i in range(0, len(ids), _BATCH):
            part_texts = texts[i:i + _BATCH]
            vectors = await self.llm.aembed(part_texts, role=self.role)
            metas = [clean_metadata(m) or None for m in (metadatas or [{}] * len(ids))[i:i + _BATCH]]
            await asyncio.to_thread(col.upsert, ids=ids[i:i + _BATCH], documents=part_texts, embeddings=vectors,
                                    metadatas=metas if any(metas) else None)  # type: ignore[arg-type]

    async def asearch(self, collection: Collection, query: str, k: int = 5,
                      where: dict[str, Any] | None = None) -> list[MemoryHit]:
        """The ``k`` entries most similar to ``query`` (optionally filtered by metadata), most similar first."""
        col = self._col(collection)
        count = await asyncio.to_thread(col.count)
        if count == 0 or k <= 0:
            return []
        (vector,) = await self.llm.aembed([query], role=self.role)
        res = await asyncio.to_thread(col.query, query_embeddings=[vector], n_results=min(k, count), where=where,
                                      include=["documents", "metadatas", "distances"])
        ids, docs = res["ids"][0], (res["documents"] or [[]])[0]
        metas, dists = (res["metadatas"] or [[]])[0], (res["distances"] or [[]])[0]
        return [MemoryHit(id=i, text=d or "", metadata=dict(m or {}), similarity=1.0 - float(dist))
                for i, d, m, dist in zip(ids, docs, metas, dists)]

    def count(self, collection: Collection) -> int:
        return self._col(collection).count()

    # -- findings --------------------------------------------------------------------------------------------
    async def aadd_finding(self, finding: Finding, **metadata: Any) -> None:
        meta = {"node_id": finding.node_id, "status": finding.status, "script": finding.script,
                "depends_on": finding.depends_on or None, **metadata}
        await self.aadd("findings", [finding.id], [finding.statement], [meta])

    async def asearch_findings(self, query: str, k: int = 5, where: dict[str, Any] | None = None) -> list[MemoryHit]:
        return await self.asearch("findings", query, k, where)

    # -- questions -------------------------------------------------------------------------------------------
    async def aadd_question(self, question_id: str, question: str, **metadata: Any) -> None:
        await self.aadd("questions", [question_id], [question], [metadata])

    async def ais_duplicate(self, question: str, threshold: float = DEFAULT_DUPLICATE_THRESHOLD,
                            where: dict[str, Any] | None = None) -> DuplicateCheck:
        """Whether a remembered question is at least ``threshold`` similar to ``question``."""
        hits = await self.asearch("questions", question, 1, where)
        if not hits:
            return DuplicateCheck(duplicate=False, similarity=0.0, threshold=threshold)
        return DuplicateCheck(duplicate=hits[0].similarity >= threshold, similarity=hits[0].similarity,
                              threshold=threshold, nearest=hits[0])

    # -- documents -------------------------------------------------------------------------------------------
    async def aingest(self, folder: str | os.PathLike[str], *, max_chars: int = DEFAULT_MAX_CHARS) -> IngestReport:
        """Read a local corpus (.md, .txt, and .pdf when a reader is installed) into ``documents``. Re-ingesting
        replaces a document's chunks, so an edited file leaves no stale ones."""
        chunks, report = await asyncio.to_thread(scan_corpus, folder, max_chars)
        col = self._col("documents")
        for source in sorted({c.source for c in chunks}):
            await asyncio.to_thread(col.delete, where={"source": source})
        await self.aadd("documents", [f"{c.source}#{c.index}" for c in chunks], [c.text for c in chunks],
                        [{"source": c.source, "chunk": c.index} for c in chunks])
        return report

    async def asearch_documents(self, query: str, k: int = 5) -> list[MemoryHit]:
        return await self.asearch("documents", query, k)

    # -- exemplars -------------------------------------------------------------------------------------------
    async def aadd_exemplar(self, exemplar_id: str, text: str, **metadata: Any) -> None:
        await self.aadd("exemplars", [exemplar_id], [text], [metadata])

    async def asearch_exemplars(self, query: str, k: int = 3, where: dict[str, Any] | None = None) -> list[MemoryHit]:
        return await self.asearch("exemplars", query, k, where)

    # -- sync wrappers ---------------------------------------------------------------------------------------
    def add(self, collection: Collection, ids: list[str], texts: list[str],
            metadatas: list[dict[str, Any]] | None = None) -> None:
        run_sync(self.aadd(collection, ids, texts, metadatas))

    def search(self, collection: Collection, query: str, k: int = 5,
               where: dict[str, Any] | None = None) -> list[MemoryHit]:
        return run_sync(self.asearch(collection, query, k, where))

    def add_finding(self, finding: Finding, **metadata: Any) -> None:
        run_sync(self.aadd_finding(finding, **metadata))

    def search_findings(self, query: str, k: int = 5, where: dict[str, Any] | None = None) -> list[MemoryHit]:
        return run_sync(self.asearch_findings(query, k, where))

    def add_question(self, question_id: str, question: str, **metadata: Any) -> None:
        run_sync(self.aadd_question(question_id, question, **metadata))

    def is_duplicate(self, question: str, threshold: float = DEFAULT_DUPLICATE_THRESHOLD,
                     where: dict[str, Any] | None = None) -> DuplicateCheck:
        return run_sync(self.ais_duplicate(question, threshold, where))

    def ingest(self, folder: str | os.PathLike[str], *, max_chars: int = DEFAULT_MAX_CHARS) -> IngestReport:
        return run_sync(self.aingest(folder, max_chars=max_chars))

    def search_documents(self, query: str, k: int = 5) -> list[MemoryHit]:
        return run_sync(self.asearch_documents(query, k))

    def add_exemplar(self, exemplar_id: str, text: str, **metadata: Any) -> None:
        run_sync(self.aadd_exemplar(exemplar_id, text, **metadata))

    def search_exemplars(self, query: str, k: int = 3, where: dict[str, Any] | None = None) -> list[MemoryHit]:
        return run_sync(self.asearch_exemplars(query, k, where))

    def _col(self, name: str) -> Any:
        try:
            return self._cols[name]  # type: ignore[index]
        except KeyError:
            raise ValueError(f"memory has no collection {name!r}; collections: {', '.join(COLLECTIONS)}") from None
