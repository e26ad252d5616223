"""The one LLM interface: messages → text, messages + pydantic schema → validated object, texts → vectors.

Built in for every provider: retries with backoff (429/5xx/timeouts/connection errors, honouring Retry-After),
a concurrency limit per endpoint, an on-disk response cache, schema validation with one repair retry, and
token/latency accounting per role.

Every operation is written once, async (``acomplete``, ``astructured_result``, ``astructured``, ``aembed``).
The sync methods (``complete``, ``structured_result``, ``structured``, ``embed``) run that coroutine on the
LLM's private event loop (:mod:`worldsmith.llm.sync`) and block until it finishes: they work from any thread,
including one whose own event loop is running (which then waits, so async code should await the ``a…``
methods). Sync callers in many threads share that loop, hence the per-endpoint concurrency limit.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Coroutine, Iterable, Sequence, TypeVar

from pydantic import BaseModel

from worldsmith.llm.accounting import RoleUsage, UsageTracker
from worldsmith.llm.cache import ResponseCache, cache_key
from worldsmith.llm.config import EndpointConfig, LLMConfig
from worldsmith.llm.embeddings import EMBED_ROLE
from worldsmith.llm.errors import (LLMError, LLMFatalError, LLMOutputError, LLMRequestError, LLMUnavailableError,
                                   TransientError)
from worldsmith.llm.providers import Provider, make_provider
from worldsmith.llm.retry import RetryPolicy, retry
from worldsmith.llm.structured import json_schema_of, repair_messages, validate_reply, with_schema_instruction
from worldsmith.llm.sync import LoopThread
from worldsmith.llm.types import (Completion, MessageLike, ProviderRequest, RawCompletion, StructuredResult,
                                  TokenUsage, normalize_messages)

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
#: Texts per embedding request (OpenAI accepts up to 2048; smaller batches keep one failure cheap).
EMBED_BATCH = 128

# Endpoint settings that only shape individual requests; endpoints differing only in these share a provider.
_REQUEST_ONLY = {"temperature", "top_p", "max_tokens", "seed", "max_retries", "backoff_base_s", "backoff_max_s"}
_OPTS = {"stop", "max_tokens", "temperature", "top_p", "seed", "sample_index", "use_cache", "logprobs"}
# What to tell the user to check when retries run out, by failure kind.
_EXHAUSTED_HINT = {"connection": ("base_url", "is the server running?"), "timeout": ("timeout_s", "raise it or check the server"),
                   "rate_limit": ("concurrency", "lower it or raise max_retries"), "server": ("base_url", "check the server"),
                   "invalid_body": ("base_url", "the server keeps sending malformed answers: check its logs")}
# Retries spent on these mean the endpoint is down or hanging: nothing else sent to it will succeed either.
_FATAL_WHEN_EXHAUSTED = {"connection", "timeout"}


@dataclass
class _Endpoint:
    """A provider plus the concurrency limit shared by every role that uses the same endpoint."""

    provider: Provider
    limit: int
    _sems: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]" = field(
        default_factory=weakref.WeakKeyDictionary)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def sem(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()  # an asyncio.Semaphore belongs to one event loop
        with self._lock:
            sem = self._sems.get(loop)
            if sem is None:
                sem = self._sems[loop] = asyncio.Semaphore(self.limit)
            return sem


@dataclass
class _Call:
    """One prepared request: what to send, where, and its cache key (None = do not cache)."""

    role: str
    cfg: EndpointConfig
    endpoint: _Endpoint
    request: ProviderRequest
    key: str | None


def _request_record(req: ProviderRequest) -> dict[str, Any]:
    """What a trajectory records of a request: the messages as the provider got them and the sampling used."""
    return {"request_messages": [dict(m) for m in req.messages],
            "sampling": {"max_tokens": req.max_tokens, "temperature": req.temperature, "top_p": req.top_p,
                         "seed": req.seed, "stop": list(req.stop)}}


class LLM:
    """Entry point of the LLM layer. Thread-safe; one instance serves sync and async callers (module doc)."""

    def __init__(self, config: LLMConfig | None = None, *, home: Path | str) -> None:
        self.config = config or LLMConfig()
        self.home = Path(home)
        self.cache = ResponseCache(self.config.resolved_cache_dir(self.home)) if self.config.cache else None
        self.models_dir = self.config.resolved_models_dir(self.home)
        self._usage = UsageTracker()
        self._endpoints: dict[tuple, _Endpoint] = {}
        self._by_role: dict[str, tuple[EndpointConfig, _Endpoint]] = {}
        self._lock = threading.Lock()
        self._loop = LoopThread("worldsmith-llm")  # runs the sync API's coroutines; started on first use
        weakref.finalize(self, self._loop.stop)  # an LLM dropped without close() does not leave its thread behind

    @classmethod
    def from_settings(cls, settings: Any) -> "LLM":
        """Build from the global settings (uses ``settings.llm`` and ``settings.home``)."""
        return cls(settings.llm, home=settings.home)

    # -- configuration ---------------------------------------------------------------------------------
    def endpoint(self, role: str) -> EndpointConfig:
        """The merged endpoint config of ``role``."""
        return self.config.for_role(role)

    def _endpoint(self, role: str) -> tuple[EndpointConfig, _Endpoint]:
        hit = self._by_role.get(role)  # the config is treated as immutable once the LLM is built
        if hit is not None:
            return hit
        cfg = self.config.for_role(role)
        secret = cfg.api_key.get_secret_value() if cfg.api_key else None
        key = (cfg.model_dump_json(exclude=_REQUEST_ONLY | {"api_key"}), secret)
        with self._lock:
            ep = self._endpoints.get(key)
            if ep is None:
                provider = make_provider(cfg, key_path=self.config.key_path, models_dir=self.models_dir)
                ep = self._endpoints[key] = _Endpoint(provider, cfg.resolved_concurrency())
            self._by_role[role] = (cfg, ep)
        return cfg, ep

    def provider(self, role: str) -> Provider:
        return self._endpoint(role)[1].provider

    def script(self, role: str) -> Any:
        """The :class:`~worldsmith.llm.providers.scripted.Script` answering ``role`` (scripted provider only)."""
        provider = self.provider(role)
        if provider.name != "scripted":
            raise TypeError(f"role {role!r} uses provider {provider.name!r}, not 'scripted'")
        return provider.script  # type: ignore[attr-defined]

    def check(self, roles: Iterable[str] | None = None) -> dict[str, str | None]:
        """Validate keys, packages and model names for ``roles`` (default: 'default' + configured roles)
        without sending a request. Returns role → None when fine, else the error line."""
        names = list(roles) if roles is not None else ["default", *self.config.roles]
        out: dict[str, str | None] = {}
        for role in names:
            try:
                self.provider(role).check(role)
                out[role] = None
            except LLMError as exc:
                out[role] = str(exc)
        return out

    def usage(self) -> dict[str, RoleUsage]:
        """Per-role calls, cached calls, prompt/completion tokens, latency, retries, repairs, errors."""
        return self._usage.snapshot()

    @property
    def usage_tracker(self) -> UsageTracker:
        """The tracker behind :meth:`usage` (LangChain callbacks record into it)."""
        return self._usage

    def usage_total(self) -> RoleUsage:
        return self._usage.total()

    def reset_usage(self) -> None:
        self._usage.reset()

    def close(self) -> None:
        """Close connections and stop the private event loop (the LLM stays usable: both come back on use)."""
        with self._lock:
            providers = [ep.provider for ep in self._endpoints.values()]
            self._endpoints.clear()
            self._by_role.clear()
        if self._loop.started:  # the sync API's HTTP clients belong to that loop: close them there
            self._loop.run(_aclose_all(providers))
            self._loop.stop()
        for provider in providers:
            provider.close()

    async def aclose(self) -> None:
        """Close the connections that belong to the running event loop (call it before that loop ends, e.g. at
        the end of an ``asyncio.run``); they come back on the next request."""
        with self._lock:
            providers = [ep.provider for ep in self._endpoints.values()]
        await _aclose_all(providers)

    async def aload(self, role: str = "agent") -> float:
        """Load ``role``'s model now if its provider loads lazily (embedded); returns the seconds spent loading
        (0.0 when there is nothing to load or it is already loaded), so a first request's latency excludes it."""
        return await self.provider(role).aload(role)

    def load(self, role: str = "agent") -> float:
        """Sync :meth:`aload`."""
        return self._sync(self.aload(role))

    def _sync(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop.run(coro)

    # -- request preparation -----------------------------------------------------------------------------
    def _prepare(self, messages: Sequence[MessageLike], role: str, schema: dict | None, schema_name: str,
                 opts: dict[str, Any]) -> _Call:
        cfg, ep = self._endpoint(role)
        msgs = messages if opts.pop("_normalized", False) else normalize_messages(messages)
        temperature = cfg.temperature if opts.get("temperature") is None else float(opts["temperature"])
        seed = cfg.seed if opts.get("seed") is None else int(opts["seed"])
        sample_index = int(opts.get("sample_index") or 0)
        if temperature > 0:  # distinct samples come from distinct seeds, so they stay cacheable and reproducible
            seed = (seed or 0) + sample_index
        stop = opts.get("stop")
        req = ProviderRequest(
            messages=msgs, role=role,
            max_tokens=cfg.max_tokens if opts.get("max_tokens") is None else int(opts["max_tokens"]),
            temperature=temperature, top_p=cfg.top_p if opts.get("top_p") is None else float(opts["top_p"]),
            seed=seed, stop=[stop] if isinstance(stop, str) else list(stop or []), schema=schema,
            schema_name=schema_name, extra_body=dict(cfg.extra_body), logprobs=bool(opts.get("logprobs")),
        )
        use_cache = self.config.cache if opts.get("use_cache") is None else bool(opts["use_cache"])
        key = None
        if use_cache and self.cache is not None and ep.provider.cacheable:
            key = cache_key({
                "endpoint": ep.provider.cache_identity(), "messages": msgs, "schema": schema,
                "params": {"max_tokens": req.max_tokens, "temperature": temperature, "top_p": req.top_p,
                           "seed": seed, "stop": req.stop, "extra_body": req.extra_body,
                           "structured": cfg.structured, "sample_index": sample_index if temperature > 0 else 0,
                           **({"logprobs": True} if req.logprobs else {})},  # absent when off: old keys stay valid
            })
        return _Call(role, cfg, ep, req, key)

    def _policy(self, cfg: EndpointConfig) -> RetryPolicy:
        return RetryPolicy(cfg.max_retries, cfg.backoff_base_s, cfg.backoff_max_s)

    def _from_cache(self, call: _Call, t0: float) -> Completion | None:
        if call.key is None or self.cache is None:
            return None
        hit = self.cache.get(call.key)
        if hit is None:
            return None
        try:
            c = Completion.model_validate({**hit, "cached": True, "role": call.role,
                                           "latency_s": time.perf_counter() - t0, **_request_record(call.request)})
        except ValueError:
            return None
        self._usage.record_call(call.role, cached=True, prompt_tokens=c.usage.prompt_tokens,
                                completion_tokens=c.usage.completion_tokens, latency_s=c.latency_s)
        return c

    def _finish(self, call: _Call, raw: RawCompletion, t0: float) -> Completion:
        c = Completion(text=raw.text, finish_reason=raw.finish_reason,
                       usage=TokenUsage(prompt_tokens=raw.prompt_tokens, completion_tokens=raw.completion_tokens),
                       latency_s=time.perf_counter() - t0, model=raw.model or call.cfg.model,
                       provider=call.cfg.provider, role=call.role, logprobs=raw.logprobs, token_ids=raw.token_ids,
                       empty=not raw.text.strip(), **_request_record(call.request))
        if c.empty:
            self._usage.add(call.role, "empty_completions")
        self._usage.record_call(call.role, cached=False, prompt_tokens=raw.prompt_tokens,
                                completion_tokens=raw.completion_tokens, latency_s=c.latency_s)
        return c

    def _write_cache(self, call: _Call, c: Completion) -> None:
        if call.key is not None and self.cache is not None:
            self.cache.put(call.key, c.model_dump(exclude={"cached", "role", "latency_s", "request_messages", "sampling"}))

    def _on_retry(self, role: str):  # type: ignore[no-untyped-def]
        def count(attempt: int, exc: TransientError, wait: float) -> None:
            self._usage.add(role, "retries")
            self._usage.add_kind(role, "faults", exc.kind)
        return count

    def _exhausted(self, role: str, cfg: EndpointConfig, ep: _Endpoint, exc: TransientError) -> LLMUnavailableError:
        fld, advice = _EXHAUSTED_HINT.get(exc.kind, ("base_url", "check the endpoint"))
        attempts = cfg.max_retries + 1
        message = (f"role {role!r}: {exc} (gave up after {attempts} attempt{'s' * (attempts > 1)}); "
                   f"check {self.config.key_path(role, fld)} — {advice}")
        if exc.kind in _FATAL_WHEN_EXHAUSTED:
            return LLMFatalError(message, kind="unreachable", role=role, endpoint=ep.provider.describe())
        return LLMUnavailableError(message, kind=exc.kind)

    async def _attempts(self, role: str, cfg: EndpointConfig, ep: _Endpoint, fn: Callable[[], Awaitable[T]]) -> T:
        """``fn()`` under the endpoint's concurrency limit, retried on transient failures; failures accounted."""
        async def attempt() -> T:
            async with ep.sem():
                return await fn()

        try:
            return await retry(attempt, self._policy(cfg), self._on_retry(role))
        except TransientError as exc:
            self._usage.add(role, "errors")
            self._usage.add_kind(role, "failures", exc.kind)
            raise self._exhausted(role, cfg, ep, exc) from None
        except LLMFatalError as exc:
            self._usage.add(role, "errors")
            self._usage.add_kind(role, "failures", exc.kind)
            raise
        except LLMError:
            self._usage.add(role, "errors")
            raise

    # -- text completions --------------------------------------------------------------------------------
    async def _run(self, call: _Call) -> Completion:
        t0 = time.perf_counter()
        cached = self._from_cache(call, t0)
        if cached is not None:
            return cached
        raw = await self._attempts(call.role, call.cfg, call.endpoint,
                                   lambda: call.endpoint.provider.acomplete(call.request))
        c = self._finish(call, raw, t0)
        if call.key is not None:  # file I/O in a worker thread: the event loop keeps serving other requests
            await asyncio.to_thread(self._write_cache, call, c)
        return c

    async def acomplete(self, messages: Sequence[MessageLike], *, role: str = "agent",
                        stop: str | list[str] | None = None, max_tokens: int | None = None,
                        temperature: float | None = None, top_p: float | None = None, seed: int | None = None,
                        sample_index: int = 0, use_cache: bool | None = None, logprobs: bool = False) -> Completion:
        """Chat completion for ``role``. Unset parameters come from the role's endpoint config.
        ``sample_index`` selects a distinct (cached) sample when temperature > 0. ``logprobs=True`` asks for
        per-token logprobs (``Completion.logprobs``; None where the provider has none)."""
        opts = dict(stop=stop, max_tokens=max_tokens, temperature=temperature, top_p=top_p, seed=seed,
                    sample_index=sample_index, use_cache=use_cache, logprobs=logprobs)
        return await self._run(self._prepare(messages, role, None, "", opts))

    def complete(self, messages: Sequence[MessageLike], *, role: str = "agent", **opts: Any) -> Completion:
        """Sync :meth:`acomplete` (same options: stop, max_tokens, temperature, top_p, seed, sample_index,
        use_cache, logprobs)."""
        return self._sync(self.acomplete(messages, role=role, **opts))

    # -- structured output ---------------------------------------------------------------------------------
    def _structured_calls(self, messages: Sequence[MessageLike], schema: type[BaseModel], role: str,
                          opts: dict[str, Any]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        unknown = set(opts) - _OPTS
        if unknown:
            raise TypeError(f"structured(): unexpected option(s) {sorted(unknown)}; allowed: {sorted(_OPTS)}")
        schema_json = json_schema_of(schema)
        return with_schema_instruction(normalize_messages(messages), schema_json), schema_json

    def _check_reply(self, c: Completion, schema: type[M]) -> tuple[M | None, list[str]]:
        value, errors = validate_reply(c.text, schema)
        if value is None and c.finish_reason == "length":
            errors.append("the reply was cut off at max_tokens; raise max_tokens")
        return value, errors  # type: ignore[return-value]

    def _output_error(self, role: str, schema: type[BaseModel], c: Completion, errors: list[str]) -> LLMOutputError:
        return LLMOutputError(
            f"role {role!r}: the model's reply does not fit {schema.__name__} even after one repair retry: "
            f"{'; '.join(errors[:3])}", raw_text=c.text, errors=errors, role=role, schema_name=schema.__name__)

    async def astructured_result(self, messages: Sequence[MessageLike], schema: type[M], *, role: str = "agent",
                                 **opts: Any) -> StructuredResult:
        """Like :meth:`astructured`, but also returns the completion and whether a repair was needed."""
        msgs, schema_json = self._structured_calls(messages, schema, role, opts)
        first = await self._run(self._prepare(msgs, role, schema_json, schema.__name__, {**opts, "_normalized": True}))
        value, errors = self._check_reply(first, schema)
        if value is not None:
            return StructuredResult(value, first)
        self._usage.add(role, "repairs")
        fix = repair_messages(msgs, first.text, errors)
        second = await self._run(self._prepare(fix, role, schema_json, schema.__name__, {**opts, "_normalized": True}))
        value, errors = self._check_reply(second, schema)
        if value is None:
            self._usage.add(role, "errors")
            raise self._output_error(role, schema, second, errors)
        return StructuredResult(value, second, repaired=True)

    async def astructured(self, messages: Sequence[MessageLike], schema: type[M], *, role: str = "agent",
                          **opts: Any) -> M:
        """Validated instance of ``schema``. On invalid JSON or a validation error the model gets ONE repair
        retry showing its reply and the errors; then :class:`LLMOutputError` (raw text + errors).
        ``opts``: stop, max_tokens, temperature, top_p, seed, sample_index, use_cache, logprobs."""
        return (await self.astructured_result(messages, schema, role=role, **opts)).value  # type: ignore[return-value]

    def structured_result(self, messages: Sequence[MessageLike], schema: type[M], *, role: str = "agent",
                          **opts: Any) -> StructuredResult:
        """Sync :meth:`astructured_result`."""
        return self._sync(self.astructured_result(messages, schema, role=role, **opts))

    def structured(self, messages: Sequence[MessageLike], schema: type[M], *, role: str = "agent", **opts: Any) -> M:
        """Sync :meth:`astructured`."""
        return self._sync(self.astructured(messages, schema, role=role, **opts))

    # -- embeddings ------------------------------------------------------------------------------------------
    async def aembed(self, texts: Sequence[str], *, role: str = EMBED_ROLE) -> list[list[float]]:
        """One vector per text, in order, from ``role``'s endpoint (default: the offline local model
        all-minilm-l6-v2, 384 dimensions, unit length). Retries, concurrency limit and accounting as for
        completions; not cached (the local model is cheap and deterministic)."""
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise TypeError(f"embed(): texts must be a list of strings, got {type(texts).__name__}"
                            f"{'' if isinstance(texts, str) else ' with non-string items'}")
        texts = list(texts)
        if not texts:
            return []
        cfg, ep = self._endpoint(role)
        t0 = time.perf_counter()
        batches = [texts[i:i + EMBED_BATCH] for i in range(0, len(texts), EMBED_BATCH)]
        raws = await asyncio.gather(*[
            self._attempts(role, cfg, ep, lambda b=batch: ep.provider.aembed(b, role)) for batch in batches])
        vectors = [v for raw in raws for v in raw.vectors]
        if len(vectors) != len(texts):
            raise LLMRequestError(f"role {role!r}: {ep.provider.describe()} returned {len(vectors)} vectors "
                                  f"for {len(texts)} texts")
        self._usage.record_call(role, cached=False, prompt_tokens=sum(r.prompt_tokens for r in raws),
                                completion_tokens=0, latency_s=time.perf_counter() - t0)
        return vectors

    def embed(self, texts: Sequence[str], *, role: str = EMBED_ROLE) -> list[list[float]]:
        """Sync :meth:`aembed`."""
        return self._sync(self.aembed(texts, role=role))


async def _aclose_all(providers: list[Provider]) -> None:
    for provider in providers:
        await provider.aclose()
