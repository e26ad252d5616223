"""Any OpenAI-compatible endpoint (OpenAI, vLLM, SGLang, Ollama, llama.cpp server) via the `openai` SDK.

The SDK's own retries are off (``max_retries=0``): the client's backoff is the one retry policy.
Structured output: ``structured='auto'`` tries ``json_schema``, falls back to ``json_object`` and then to
prompt-only JSON when the server rejects the format with a 400; the fallback is remembered per endpoint.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import weakref
from typing import Any
from urllib.parse import urlparse

import openai

from worldsmith.llm.errors import (LLMAuthError, LLMConfigError, LLMContextError, LLMRequestError, LLMUnavailableError,
                                   TransientError)
from worldsmith.llm.providers.base import Provider
from worldsmith.llm.retry import parse_retry_after
from worldsmith.llm.structured import is_strict_compatible
from worldsmith.llm.types import ProviderRequest, RawCompletion, RawEmbedding, TokenLogprob

_MODES = ("json_schema", "json_object", "none")
_FORMAT_WORDS = re.compile(r"response_format|json_schema|json_object|schema|structured|guided|grammar", re.I)
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}
LOCAL_PLACEHOLDER_KEY = "EMPTY"
_BODY_SHOWN = 200  # characters of a malformed body quoted in the error


def env_var_of(key: str) -> str:
    """The WORLDSMITH_* variable that sets a settings key: llm.default.api_key -> WORLDSMITH_LLM__DEFAULT__API_KEY."""
    return "WORLDSMITH_" + key.upper().replace(".", "__")


def _shown(body: object) -> str:
    text = body if isinstance(body, str) else repr(body)
    text = " ".join(text.split())
    return repr(text[:_BODY_SHOWN] + ("…" if len(text) > _BODY_SHOWN else "")) if text else "an empty body"


def is_local_url(url: str | None) -> bool:
    if not url:
        return False
    host = urlparse(url).hostname or ""
    return host in _LOCAL_HOSTS or host.startswith("127.")


class OpenAIProvider(Provider):
    name = "openai"

    def __init__(self, cfg, **kw) -> None:  # type: ignore[no-untyped-def]
        super().__init__(cfg, **kw)
        self._mode_index = 0  # negotiated position in _MODES when structured == 'auto'
        self._lock = threading.Lock()
        self._aclients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = (
            weakref.WeakKeyDictionary()
        )

    # -- configuration -------------------------------------------------------------------------------
    def api_key(self, role: str) -> str:
        """The key to send: api_key, else $api_key_env, else 'EMPTY' for a localhost base_url."""
        cfg = self.cfg
        if cfg.api_key is not None and cfg.api_key.get_secret_value():
            return cfg.api_key.get_secret_value()
        if cfg.api_key_env:
            value = os.environ.get(cfg.api_key_env, "")
            if not value:
                raise LLMConfigError(
                    f"{self.key_path(role, 'api_key_env')}: environment variable {cfg.api_key_env} is not set "
                    f"(it should hold the API key for {self.describe()})"
                )
            return value
        if is_local_url(cfg.base_url):
            return LOCAL_PLACEHOLDER_KEY
        raise LLMConfigError(
            f"{self.key_path(role, 'api_key_env')}: provider 'openai' at {self.describe()} needs an API key; "
            "set api_key_env to the name of the variable holding it (e.g. OPENAI_API_KEY) or api_key"
        )

    def check(self, role: str) -> None:
        self.api_key(role)

    def key_source(self, role: str) -> str:
        """Where the key that was sent came from, for a 401/403 message."""
        cfg = self.cfg
        if cfg.api_key is not None and cfg.api_key.get_secret_value():
            key = self.key_path(role, "api_key")
            return f"the key sent was {key} (config file, --set, or {env_var_of(key)})"
        if cfg.api_key_env:
            return f"the key sent was read from ${cfg.api_key_env} (named by {self.key_path(role, 'api_key_env')})"
        key = self.key_path(role, "api_key")
        return (f"no API key is configured, so the placeholder {LOCAL_PLACEHOLDER_KEY!r} was sent; set {key} "
                f"({env_var_of(key)}) or {self.key_path(role, 'api_key_env')} (e.g. OPENAI_API_KEY)")

    def describe(self) -> str:
        return self.cfg.base_url or "the openai SDK default endpoint"

    def _client_kwargs(self, role: str) -> dict[str, Any]:
        return {"api_key": self.api_key(role), "base_url": self.cfg.base_url, "timeout": self.cfg.timeout_s,
                "max_retries": 0}

    def _async_client(self, role: str) -> openai.AsyncOpenAI:
        loop = asyncio.get_running_loop()  # httpx async pools belong to one event loop
        with self._lock:
            client = self._aclients.get(loop)
            if client is None:
                client = self._aclients[loop] = openai.AsyncOpenAI(**self._client_kwargs(role))
            return client

    async def aclose(self) -> None:
        with self._lock:
            client = self._aclients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    def close(self) -> None:
        with self._lock:
            self._aclients.clear()

    # -- requests ------------------------------------------------------------------------------------
    def _modes(self, req: ProviderRequest) -> list[str | None]:
        if req.schema is None:
            return [None]
        if self.cfg.structured == "auto":
            return list(_MODES[self._mode_index :])
        return [self.cfg.structured]

    def _kwargs(self, req: ProviderRequest, mode: str | None) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": self.cfg.model, "messages": req.messages, "max_tokens": req.max_tokens,
                              "temperature": req.temperature}
        if req.top_p is not None:
            kw["top_p"] = req.top_p
        if req.seed is not None:
            kw["seed"] = req.seed
        if req.stop:
            kw["stop"] = req.stop
        if req.extra_body:
            kw["extra_body"] = req.extra_body
        if req.logprobs:
            kw["logprobs"] = True
        if mode == "json_schema":
            assert req.schema is not None
            kw["response_format"] = {"type": "json_schema", "json_schema": {
                "name": re.sub(r"[^A-Za-z0-9_-]", "_", req.schema_name)[:64] or "response",
                "schema": req.schema, "strict": is_strict_compatible(req.schema)}}
        elif mode == "json_object":
            kw["response_format"] = {"type": "json_object"}
        return kw

    def _downgrade(self, mode: str | None, exc: openai.BadRequestError) -> bool:
        """After a 400 for a response format under 'auto', move to the next mode; True if there is one."""
        if self.cfg.structured != "auto" or mode in (None, "none") or not _FORMAT_WORDS.search(str(exc)):
            return False
        with self._lock:
            self._mode_index = max(self._mode_index, _MODES.index(mode) + 1)
        return True

    async def acomplete(self, req: ProviderRequest) -> RawCompletion:
        client = self._async_client(req.role)
        for mode in self._modes(req):
            try:
                resp = await client.chat.completions.create(**self._kwargs(req, mode))
            except json.JSONDecodeError as exc:  # HTTP 200 whose body is not JSON (a proxy page, a cut body)
                raise self._invalid(f"a body that is not JSON: {_shown(exc.doc)}") from None
            except openai.BadRequestError as exc:
                if not self._downgrade(mode, exc):
                    raise self._map(exc, req.role) from None
            except openai.APIError as exc:
                raise self._map(exc, req.role) from None
            else:
                return self._parse(resp)
        raise AssertionError("unreachable: the last structured mode never downgrades")

    def _invalid(self, what: str) -> TransientError:
        """A malformed HTTP 200 is a server fault like a 5xx: retried, then reported with what came back."""
        return TransientError(f"{self.describe()} answered HTTP 200 with {what} (model {self.cfg.model!r})",
                              kind="invalid_body")

    def _parse(self, resp: Any) -> RawCompletion:
        if isinstance(resp, (str, bytes)):  # a non-JSON content type: the SDK hands back the text
            raise self._invalid(f"a body that is not JSON: {_shown(resp)}")
        if not getattr(resp, "choices", None):
            raise self._invalid(f"no choices: {_shown(_dump(resp))}")
        choice = resp.choices[0]
        message = getattr(choice, "message", None)
        content = getattr(message, "content", None)
        if content is None:  # "" is a (recorded) empty completion; null content is a broken body
            raise self._invalid(f"no message content: {_shown(_dump(resp))}")
        usage = resp.usage
        return RawCompletion(
            text=content,
            finish_reason=choice.finish_reason or "stop",
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            model=resp.model or self.cfg.model,
            logprobs=_logprobs(choice),
            token_ids=_token_ids(choice),
        )

    async def aembed(self, texts: list[str], role: str) -> RawEmbedding:
        client = self._async_client(role)
        try:
            resp = await client.embeddings.create(model=self.cfg.model, input=texts, encoding_format="float")
        except json.JSONDecodeError as exc:
            raise self._invalid(f"a body that is not JSON: {_shown(exc.doc)}") from None
        except openai.APIError as exc:
            raise self._map(exc, role) from None
        data = sorted(resp.data or [], key=lambda d: d.index)
        if len(data) != len(texts):
            raise LLMRequestError(f"{self.describe()} returned {len(data)} embeddings for {len(texts)} texts "
                                  f"(model {self.cfg.model!r})")
        usage = resp.usage
        return RawEmbedding([[float(x) for x in d.embedding] for d in data],
                            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0, model=resp.model or self.cfg.model)

    def _map(self, exc: openai.APIError, role: str) -> Exception:
        """Translate an SDK error into one of ours, with the config key to fix."""
        where = self.describe()
        if isinstance(exc, openai.APITimeoutError):
            return TransientError(f"no answer from {where} within {self.cfg.timeout_s:g} s", kind="timeout")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return TransientError(f"cannot connect to {where}: {type(cause).__name__}: {cause}", kind="connection")
        if not isinstance(exc, openai.APIStatusError):
            return LLMRequestError(f"{where} sent an unusable response for role {role!r}: {exc}")
        status = exc.status_code
        detail = _error_detail(exc)
        if status == 429:
            return TransientError(f"{where} rate-limited the request (HTTP 429: {detail})", kind="rate_limit",
                                  retry_after=parse_retry_after(exc.response.headers))
        if status >= 500 or status in (408, 409):
            return TransientError(f"{where} failed with HTTP {status}: {detail}", kind="server",
                                  retry_after=parse_retry_after(exc.response.headers))
        if status in (401, 403):
            return LLMAuthError(f"role {role!r}: {where} rejected the API key (HTTP {status}: {detail}); "
                                f"{self.key_source(role)}", role=role, endpoint=where)
        if status == 404:
            return LLMUnavailableError(
                f"{self.key_path(role, 'model')}: model {self.cfg.model!r} not found at {where} (HTTP 404: {detail}); "
                f"check the model name and {self.key_path(role, 'base_url')}"
            )
        if status == 400 and _CONTEXT.search(detail):  # vLLM, SGLang, OpenAI and llama-server word it so
            return LLMContextError(f"{self.key_path(role, 'model')}: the prompt does not fit the context of "
                                   f"{self.cfg.model!r} at {where} (HTTP 400: {detail})")
        return LLMRequestError(f"{where} rejected the request for role {role!r} (HTTP {status}: {detail})")


#: a 400 that says the prompt is longer than the model's context
_CONTEXT = re.compile(r"context[ _]length|context window|maximum context|exceeds? the (?:[\w']+ ){0,2}context|"
                      r"too many tokens|prompt is too long", re.IGNORECASE)


def _logprobs(choice: Any) -> list[TokenLogprob] | None:
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if content is None:
        return None
    return [TokenLogprob(token=t.token, logprob=float(t.logprob)) for t in content]


def _token_ids(choice: Any) -> list[int] | None:
    """vLLM returns the generated ids on the choice when the request has ``return_token_ids`` (extra_body)."""
    ids = getattr(choice, "token_ids", None)
    return [int(i) for i in ids] if isinstance(ids, list) else None


def _dump(resp: Any) -> str:
    try:
        return json.dumps(resp.model_dump(exclude_none=True))
    except (AttributeError, TypeError, ValueError):
        return repr(resp)


def _error_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
    return str(exc.message)[:300]
