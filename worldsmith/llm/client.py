"""The one LLM interface: messages → text, or messages + pydantic schema → validated object (sync and async).

Built in for every provider: retries with backoff (429/5xx/timeouts/connection errors, honouring Retry-After),
a concurrency limit per endpoint, an on-disk response cache, schema validation with one repair retry, and
token/latency accounting per role.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence, TypeVar

from pydantic import BaseModel

from worldsmith.llm.accounting import RoleUsage, UsageTracker
from worldsmith.llm.cache import ResponseCache, cache_key
from worldsmith.llm.config import EndpointConfig, LLMConfig
from worldsmith.llm.errors import LLMError, LLMOutputError, LLMUnavailableError, TransientError
from worldsmith.llm.providers import Provider, make_provider
from worldsmith.llm.retry import RetryPolicy, arun_with_retry, run_with_retry
from worldsmith.llm.structured import json_schema_of, repair_messages, validate_reply, with_schema_instruction
from worldsmith.llm.types import (Completion, MessageLike, ProviderRequest, RawCompletion, StructuredResult,
                                  TokenUsage, normalize_messages)

M = TypeVar("M", bound=BaseModel)

# Endpoint settings that only shape individual requests; endpoints differing only in these share a provider.
_REQUEST_ONLY = {"temperature", "top_p", "max_tokens", "seed", "max_retries", "backoff_base_s", "backoff_max_s"}
_OPTS = {"stop", "max_tokens", "temperature", "top_p", "seed", "sample_index", "use_cache"}
# What to tell the user to check when retries run out, by failure kind.
_EXHAUSTED_HINT = {"connection": ("base_url", "is the server running?"), "timeout": ("timeout_s", "raise it or check the server"),
                   "rate_limit": ("concurrency", "lower it or raise max_retries"), "server": ("base_url", "check the server")}


@dataclass
class _Endpoint:
    """A provider plus the concurrency limits shared by every role that uses the same endpoint."""

    provider: Provider
    limit: int
    thread_sem: threading.Semaphore = field(init=False)
    _async_sems: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]" = field(
        default_factory=weakref.WeakKeyDictionary)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.thread_sem = threading.BoundedSemaphore(self.limit)

    def async_sem(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()  # an asyncio.Semaphore belongs to one event loop
        with self._lock:
            sem = self._async_sems.get(loop)
            if sem is None:
                sem = self._async_sems[loop] = asyncio.Semaphore(self.limit)
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
    """Entry point of the LLM layer. Thread-safe; one instance can serve sync and async callers."""

    def __init__(self, config: LLMConfig | None = None, *, home: Path | str) -> None:
        self.config = config or LLMConfig()
        self.home = Path(home)
        self.cache = ResponseCache(self.config.resolved_cache_dir(self.home)) if self.config.cache else None
        self.models_dir = self.config.resolved_models_dir(self.home)
        self._usage = UsageTracker()
        self._endpoints: dict[tuple, _Endpoint] = {}
        self._by_role: dict[str, tuple[EndpointConfig, _Endpoint]] = {}
        self._lock = threading.Lock()

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
        with self._lock:
            for ep in self._endpoints.values():
                ep.provider.close()
            self._endpoints.clear()
            self._by_role.clear()

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
            schema_name=schema_name, extra_body=dict(cfg.extra_body),
        )
        use_cache = self.config.cache if opts.get("use_cache") is None else bool(opts["use_cache"])
        key = None
        if use_cache and self.cache is not None and ep.provider.cacheable:
            key = cache_key({
                "endpoint": ep.provider.cache_identity(), "messages": msgs, "schema": schema,
                "params": {"max_tokens": req.max_tokens, "temperature": temperature, "top_p": req.top_p,
                           "seed": seed, "stop": req.stop, "extra_body": req.extra_body,
                           "structured": cfg.structured, "sample_index": sample_index if temperature > 0 else 0},
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

    def _finish(self, call: _Call, raw: RawCompletion, t0: float, *, write: bool = True) -> Completion:
        c = Completion(text=raw.text, finish_reason=raw.finish_reason,
                       usage=TokenUsage(prompt_tokens=raw.prompt_tokens, completion_tokens=raw.completion_tokens),
                       latency_s=time.perf_counter() - t0, model=raw.model or call.cfg.model,
                       provider=call.cfg.provider, role=call.role, **_request_record(call.request))
        if write:
            self._write_cache(call, c)
        self._usage.record_call(call.role, cached=False, prompt_tokens=raw.prompt_tokens,
                                completion_tokens=raw.completion_tokens, latency_s=c.latency_s)
        return c

    def _write_cache(self, call: _Call, c: Completion) -> None:
        if call.key is not None and self.cache is not None:
            self.cache.put(call.key, c.model_dump(exclude={"cached", "role", "latency_s", "request_messages", "sampling"}))

    def _on_retry(self, role: str):  # type: ignore[no-untyped-def]
        return lambda attempt, exc, wait: self._usage.add(role, "retries")

    def _exhausted(self, call: _Call, exc: TransientError) -> LLMUnavailableError:
        fld, advice = _EXHAUSTED_HINT.get(exc.kind, ("base_url", "check the endpoint"))
        attempts = call.cfg.max_retries + 1
        return LLMUnavailableError(
            f"role {call.role!r}: {exc} (gave up after {attempts} attempt{'s' * (attempts > 1)}); "
            f"check {self.config.key_path(call.role, fld)} — {advice}"
        )

    # -- text completions --------------------------------------------------------------------------------
    def _run(self, call: _Call) -> Completion:
        t0 = time.perf_counter()
        cached = self._from_cache(call, t0)
        if cached is not None:
            return cached

        def attempt() -> RawCompletion:
            with call.endpoint.thread_sem:
                return call.endpoint.provider.complete(call.request)

        try:
            raw = run_with_retry(attempt, self._policy(call.cfg), self._on_retry(call.role))
        except TransientError as exc:
            self._usage.add(call.role, "errors")
            raise self._exhausted(call, exc) from None
        except LLMError:
            self._usage.add(call.role, "errors")
            raise
        return self._finish(call, raw, t0)

    async def _arun(self, call: _Call) -> Completion:
        t0 = time.perf_counter()
        cached = self._from_cache(call, t0)
        if cached is not None:
            return cached

        async def attempt() -> RawCompletion:
            async with call.endpoint.async_sem():
                return await call.endpoint.provider.acomplete(call.request)

        try:
            raw = await arun_with_retry(attempt, self._policy(call.cfg), self._on_retry(call.role))
        except TransientError as exc:
            self._usage.add(call.role, "errors")
            raise self._exhausted(call, exc) from None
        except LLMError:
            self._usage.add(call.role, "errors")
            raise
        c = self._finish(call, raw, t0, write=False)
        if call.key is not None:  # file I/O in a worker thread: the event loop keeps serving other requests
            await asyncio.to_thread(self._write_cache, call, c)
        return c

    def complete(self, messages: Sequence[MessageLike], *, role: str = "agent", stop: str | list[str] | None = None,
                 max_tokens: int | None = None, temperature: float | None = None, top_p: float | None = None,
                 seed: int | None = None, sample_index: int = 0, use_cache: bool | None = None) -> Completion:
        """Chat completion for ``role``. Unset parameters come from the role's endpoint config.
        ``sample_index`` selects a distinct (cached) sample when temperature > 0."""
        opts = dict(stop=stop, max_tokens=max_tokens, temperature=temperature, top_p=top_p, seed=seed,
                    sample_index=sample_index, use_cache=use_cache)
        return self._run(self._prepare(messages, role, None, "", opts))

    async def acomplete(self, messages: Sequence[MessageLike], *, role: str = "agent",
                        stop: str | list[str] | None = None, max_tokens: int | None = None,
                        temperature: float | None = None, top_p: float | None = None, seed: int | None = None,
                        sample_index: int = 0, use_cache: bool | None = None) -> Completion:
        """Async twin of :meth:`complete`."""
        opts = dict(stop=stop, max_tokens=max_tokens, temperature=temperature, top_p=top_p, seed=seed,
                    sample_index=sample_index, use_cache=use_cache)
        return await self._arun(self._prepare(messages, role, None, "", opts))

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

    def structured_result(self, messages: Sequence[MessageLike], schema: type[M], *, role: str = "agent",
                          **opts: Any) -> StructuredResult:
        """Like :meth:`structured`, but also returns the completion and whether a repair was needed."""
        msgs, schema_json = self._structured_calls(messages, schema, role, opts)
        first = self._run(self._prepare(msgs, role, schema_json, schema.__name__, {**opts, "_normalized": True}))
        value, errors = self._check_reply(first, schema)
        if value is not None:
            return StructuredResult(value, first)
        self._usage.add(role, "repairs")
        fix = repair_messages(msgs, first.text, errors)
        second = self._run(self._prepare(fix, role, schema_json, schema.__name__, {**opts, "_normalized": True}))
        value, errors = self._check_reply(second, schema)
        if value is None:
            self._usage.add(role, "errors")
            raise self._output_error(role, schema, second, errors)
        return StructuredResult(value, second, repaired=True)

    async def astructured_result(self, messages: Sequence[MessageLike], schema: type[M], *, role: str = "agent",
                                 **opts: Any) -> StructuredResult:
        """Async twin of :meth:`structured_result`."""
        msgs, schema_json = self._structured_calls(messages, schema, role, opts)
        first = await self._arun(self._prepare(msgs, role, schema_json, schema.__name__, {**opts, "_normalized": True}))
        value, errors = self._check_reply(first, schema)
        if value is not None:
            return StructuredResult(value, first)
        self._usage.add(role, "repairs")
        fix = repair_messages(msgs, first.text, errors)
        second = await self._arun(self._prepare(fix, role, schema_json, schema.__name__, {**opts, "_normalized": True}))
        value, errors = self._check_reply(second, schema)
        if value is None:
            self._usage.add(role, "errors")
            raise self._output_error(role, schema, second, errors)
        return StructuredResult(value, second, repaired=True)

    def structured(self, messages: Sequence[MessageLike], schema: type[M], *, role: str = "agent",
                   **opts: Any) -> M:
        """Validated instance of ``schema``. On invalid JSON or a validation error the model gets ONE repair
        retry showing its reply and the errors; then :class:`LLMOutputError` (raw text + errors).
        ``opts``: stop, max_tokens, temperature, top_p, seed, sample_index, use_cache."""
        return self.structured_result(messages, schema, role=role, **opts).value  # type: ignore[return-value]

    async def astructured(self, messages: Sequence[MessageLike], schema: type[M], *, role: str = "agent",
                          **opts: Any) -> M:
        """Async twin of :meth:`structured`."""
        return (await self.astructured_result(messages, schema, role=role, **opts)).value  # type: ignore[return-value]
