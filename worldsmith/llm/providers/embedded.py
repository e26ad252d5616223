"""Embedded provider: llama-cpp-python in this process, with a GGUF from the model registry or a GGUF file named by
path (`llm.roles.agent.model=student.gguf`, e.g. a trained student from `worldsmith train export`).

Each model is loaded once per (file, n_ctx, n_threads) per process and shared by every endpoint that uses it;
a lock serialises calls because a ``llama_cpp.Llama`` is not thread-safe. The chat template comes from the
GGUF metadata. Structured output uses ``response_format={"type": "json_object", "schema": ...}``, which
llama-cpp-python turns into a grammar, so the reply is schema-valid JSON (the client still validates it).

A running generation cannot be interrupted safely, so ``timeout_s`` is not enforced here; ``max_tokens``
bounds the time a request can take. The blocking llama.cpp call runs in a worker thread (the event loop
stays free) under the model's lock.

Logprobs: llama.cpp returns them only for a model loaded with ``logits_all=True``, which allocates
n_ctx × vocabulary floats (about 5 GB for Qwen2.5 at 8k context), so this provider returns none.

Embeddings: the endpoint's model names a local embedding model (``all-minilm-l6-v2``, see
:mod:`worldsmith.llm.embeddings`), computed in a worker thread.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldsmith.llm.embeddings import EMBEDDING_MODELS, check_local_model, load_local_model
from worldsmith.llm.errors import LLMContextError, LLMRequestError, LLMUnavailableError
from worldsmith.llm.models import INSTALL_HINT, ModelSpec, ensure_model, get_spec, lookup_spec, missing_packages
from worldsmith.llm.providers.base import Provider
from worldsmith.llm.types import ProviderRequest, RawCompletion, RawEmbedding

log = logging.getLogger(__name__)

LLAMA_CPP_HINT = "pip install llama-cpp-python==0.3.36"


@dataclass
class LoadedModel:
    llama: Any  # llama_cpp.Llama
    lock: threading.Lock
    path: Path
    n_ctx: int
    load_s: float
    closed: bool = False


_LOADED: dict[tuple[str, int, int], LoadedModel] = {}
_LOAD_LOCK = threading.Lock()


def default_threads() -> int:
    """Every CPU this process may use, at least 1.

    The agents alternate between the model and the sandbox, so on a machine of its own the model has the cores
    to itself: measured here (Qwen2.5-Coder-1.5B, 2 idle cores) 2 threads gave ~40 prompt / ~13 generated tok/s
    against ~18 / ~9 for 1 thread. llama.cpp's threads spin-wait at barriers, though, so on a machine busy with
    other work all cores is many times slower (SmolLM2 on 2 busy cores: 1 thread ≈ 7 tok/s, 2 threads ≈ 1):
    there, set ``llm.default.n_threads = 1``.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus)


def load_model(path: Path, n_ctx: int, n_threads: int | None) -> LoadedModel:
    """Load (or reuse) the llama.cpp model for this file and context size."""
    threads = n_threads or default_threads()
    key = (str(Path(path).resolve()), n_ctx, threads)
    with _LOAD_LOCK:
        loaded = _LOADED.get(key)
        if loaded is None:
            try:
                import llama_cpp
            except ImportError:
                raise LLMUnavailableError(f"the embedded provider needs llama-cpp-python: {LLAMA_CPP_HINT}") from None
            t0 = time.perf_counter()
            try:
                llama = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_threads=threads,
                                        n_threads_batch=threads, verbose=False)
            except (ValueError, RuntimeError) as exc:
                raise LLMUnavailableError(f"llama.cpp could not load {path}: {exc}") from None
            loaded = _LOADED[key] = LoadedModel(llama, threading.Lock(), Path(path), n_ctx,
                                                time.perf_counter() - t0)
        return loaded


@atexit.register
def unload_all() -> None:
    """Drop every loaded model (frees memory; the next call reloads)."""
    with _LOAD_LOCK:
        for m in _LOADED.values():
            if m.lock.acquire(timeout=5):  # a generation still running at exit keeps its model
                try:
                    m.closed = True
                    m.llama.close()
                finally:
                    m.lock.release()
        _LOADED.clear()


class EmbeddedProvider(Provider):
    name = "embedded"

    def __init__(self, cfg, **kw) -> None:  # type: ignore[no-untyped-def]
        super().__init__(cfg, **kw)
        self._model: LoadedModel | None = None
        self._init_lock = threading.Lock()

    def spec(self, role: str) -> ModelSpec:
        return get_spec(self.cfg.model, key=self.key_path(role, "model"))

    def check(self, role: str) -> None:
        if self.cfg.model in EMBEDDING_MODELS:
            check_local_model(self.cfg.model, key=self.key_path(role, "model"))
            return
        spec = self.spec(role)
        missing = missing_packages(spec)
        if missing:
            raise LLMUnavailableError(
                f"{self.key_path(role, 'model')}: embedded model {spec.name!r} is not installed "
                f"(missing {missing[0]}{' …' if len(missing) > 1 else ''}): run {INSTALL_HINT}"
            )
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            raise LLMUnavailableError(f"the embedded provider needs llama-cpp-python: {LLAMA_CPP_HINT}") from None

    def model(self, role: str) -> LoadedModel:
        """Verify (assembling first if needed) and load the model; cached after the first call."""
        with self._init_lock:
            if self._model is None or self._model.closed:
                spec = self.spec(role)
                path = ensure_model(spec, self.models_dir)
                n_ctx = min(self.cfg.n_ctx, spec.context_length or self.cfg.n_ctx)  # 0: the file does not say
                if n_ctx < self.cfg.n_ctx:
                    log.info("%s: n_ctx %d capped at the model's context length %d", spec.name, self.cfg.n_ctx, n_ctx)
                self._model = load_model(path, n_ctx, self.cfg.n_threads)
            return self._model

    async def aload(self, role: str) -> float:
        """Verify and load the model now (in a worker thread); the wall time, ~0 when it was already loaded."""
        if self.cfg.model in EMBEDDING_MODELS:
            def load() -> object:
                return load_local_model(self.cfg.model, key=self.key_path(role, "model"))
        else:
            def load() -> object:
                return self.model(role)
        t0 = time.perf_counter()
        await asyncio.to_thread(load)
        return time.perf_counter() - t0

    def cache_identity(self) -> dict[str, Any]:
        spec = lookup_spec(self.cfg.model)  # a GGUF named by path is identified by its content, not its name
        return {"provider": self.name, "model": self.cfg.model, "sha256": spec.sha256 if spec else None}

    def describe(self) -> str:
        return f"embedded model {self.cfg.model!r}"

    def build_kwargs(self, req: ProviderRequest) -> dict[str, Any]:
        kw: dict[str, Any] = {"messages": req.messages, "max_tokens": req.max_tokens,
                              "temperature": req.temperature, "stop": list(req.stop)}
        if req.top_p is not None:
            kw["top_p"] = req.top_p
        if req.seed is not None:
            kw["seed"] = req.seed
        if req.schema is not None and self.cfg.structured != "none":
            kw["response_format"] = {"type": "json_object", "schema": req.schema}
        for k, v in req.extra_body.items():  # e.g. top_k, min_p, repeat_penalty
            kw.setdefault(k, v)
        return kw

    async def acomplete(self, req: ProviderRequest) -> RawCompletion:
        return await asyncio.to_thread(self._complete, req)

    async def aembed(self, texts: list[str], role: str) -> RawEmbedding:
        def run() -> RawEmbedding:
            model = load_local_model(self.cfg.model, key=self.key_path(role, "model"))
            vectors, tokens = model.encode(texts)
            return RawEmbedding(vectors.tolist(), prompt_tokens=tokens, model=self.cfg.model)

        return await asyncio.to_thread(run)

    def _complete(self, req: ProviderRequest) -> RawCompletion:
        kw = self.build_kwargs(req)
        for _ in range(2):  # a model closed by unload_all() between lookup and lock is reloaded once
            m = self.model(req.role)
            with m.lock:
                if not m.closed:
                    return self._call(m, kw, req)
        raise LLMUnavailableError(f"{self.describe()} was unloaded while in use; retry the request")

    def _call(self, m: LoadedModel, kw: dict[str, Any], req: ProviderRequest) -> RawCompletion:
        try:
            resp = m.llama.create_chat_completion(**kw)
        except ValueError as exc:
            if "context window" in str(exc):
                raise LLMContextError(
                    f"{self.key_path(req.role, 'n_ctx')}: prompt too long for the context of "
                    f"{self.cfg.model!r} ({exc}); shorten the prompt or raise n_ctx"
                ) from None
            raise LLMRequestError(f"{self.describe()} rejected the request: {exc}") from None
        except TypeError as exc:  # an unknown extra_body key
            raise LLMRequestError(f"{self.key_path(req.role, 'extra_body')}: {exc}") from None
        choice = resp["choices"][0]
        usage = resp.get("usage") or {}
        return RawCompletion(
            text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason") or "stop",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            model=self.cfg.model,
        )
