"""Scripted provider: deterministic answers for tests and demos, selected by config like any other provider.

``EndpointConfig(provider="scripted", model=NAME)`` uses the :class:`Script` registered under NAME with
:func:`register_script`; otherwise a script built from ``extra_body`` (declarative rules, handy in TOML):

    extra_body = {"rules": [{"pattern": "2\\+3", "response": "5", "role": "agent"}],
                  "queue": ["first answer"], "default": "I don't know"}

Answer order: the role's queued responses (FIFO), then rules in the order added, then the fallback.
Every request is recorded in ``script.requests``. Embeddings are deterministic hashed bag-of-words vectors
(``embed_dim`` long, unit length), so tests get stable vectors in which texts sharing words are close.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from pydantic import BaseModel

from worldsmith.llm.errors import LLMConfigError, LLMRequestError
from worldsmith.llm.providers.base import Provider
from worldsmith.llm.types import ProviderRequest, RawCompletion, RawEmbedding


@dataclass
class ScriptedRequest:
    """One request as the scripted provider received it."""

    role: str
    messages: list[dict[str, str]]
    max_tokens: int
    temperature: float
    stop: list[str]
    schema: dict[str, Any] | None
    seed: int | None

    @property
    def text(self) -> str:
        return "\n".join(m["content"] for m in self.messages)

    @property
    def last_user(self) -> str:
        return next((m["content"] for m in reversed(self.messages) if m["role"] == "user"), "")


Answer = Union[str, dict, list, BaseModel]
Responder = Union[Answer, Callable[[ScriptedRequest], Answer]]


@dataclass
class _Rule:
    pattern: re.Pattern[str]
    response: Responder
    role: str | None
    times: int | None
    scope: str
    hits: int = 0


@dataclass
class Script:
    """Programmable answers. Methods return ``self`` so calls chain."""

    delay_s: float = 0.0  # simulated latency per request, in seconds
    embed_dim: int = 32  # length of the hashed embedding vectors (see hashed_embedding)
    requests: list[ScriptedRequest] = field(default_factory=list)
    _rules: list[_Rule] = field(default_factory=list)
    _queues: dict[str | None, deque] = field(default_factory=dict)
    _fallback: Responder | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def on(
        self,
        pattern: str,
        response: Responder,
        *,
        role: str | None = None,
        regex: bool = True,
        times: int | None = None,
        scope: str = "all",
    ) -> "Script":
        """Answer ``response`` when ``pattern`` occurs in the prompt (``scope``: 'all' messages or
        'last_user'), optionally only for ``role`` and at most ``times`` times."""
        if scope not in ("all", "last_user"):
            raise ValueError(f"scope must be 'all' or 'last_user', got {scope!r}")
        compiled = re.compile(pattern if regex else re.escape(pattern), re.DOTALL)
        self._rules.append(_Rule(compiled, response, role, times, scope))
        return self

    def queue(self, *responses: Responder, role: str | None = None) -> "Script":
        """Answer these in order (for ``role``, or for any role when None) before any rule applies."""
        self._queues.setdefault(role, deque()).extend(responses)
        return self

    def fallback(self, response: Responder) -> "Script":
        """Answer used when nothing else matches (a string, an object, or a callable of the request)."""
        self._fallback = response
        return self

    def respond(self, req: ScriptedRequest) -> str:
        with self._lock:
            self.requests.append(req)
            responder = self._pick(req)
        answer = responder(req) if callable(responder) and not isinstance(responder, type) else responder
        return _to_text(answer)

    def _pick(self, req: ScriptedRequest) -> Responder:
        for key in (req.role, None):
            q = self._queues.get(key)
            if q:
                return q.popleft()
        for rule in self._rules:
            if rule.role not in (None, req.role) or (rule.times is not None and rule.hits >= rule.times):
                continue
            haystack = req.text if rule.scope == "all" else req.last_user
            if rule.pattern.search(haystack):
                rule.hits += 1
                return rule.response
        if self._fallback is not None:
            return self._fallback
        snippet = req.last_user[:120].replace("\n", " ")
        raise LLMRequestError(
            f"scripted provider: no queued answer or rule matches role {req.role!r}, prompt {snippet!r}; "
            "add one with script.on(pattern, response) or script.queue(...)"
        )

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> "Script":
        """Build a script from ``extra_body``-style declarative settings."""
        unknown = set(spec) - {"rules", "queue", "default", "delay_s", "embed_dim"}
        if unknown:
            raise LLMConfigError(f"scripted extra_body: unknown keys {sorted(unknown)} "
                                 "(use rules, queue, default, delay_s, embed_dim)")
        script = cls(delay_s=float(spec.get("delay_s", 0.0)), embed_dim=int(spec.get("embed_dim", 32)))
        for i, rule in enumerate(spec.get("rules", [])):
            try:
                script.on(rule["pattern"], rule["response"], role=rule.get("role"), regex=rule.get("regex", True),
                          times=rule.get("times"), scope=rule.get("scope", "all"))
            except (KeyError, TypeError, re.error) as exc:
                raise LLMConfigError(f"scripted extra_body.rules[{i}]: needs pattern and response ({exc})") from None
        script.queue(*spec.get("queue", []))
        if "default" in spec:
            script.fallback(spec["default"])
        return script


def _to_text(answer: Any) -> str:
    if isinstance(answer, str):
        return answer
    if isinstance(answer, BaseModel):
        return answer.model_dump_json()
    return json.dumps(answer)


_SCRIPTS: dict[str, Script] = {}
_SCRIPTS_LOCK = threading.Lock()


def register_script(name: str, script: Script) -> Script:
    """Make ``script`` answer for ``EndpointConfig(provider='scripted', model=name)``."""
    with _SCRIPTS_LOCK:
        _SCRIPTS[name] = script
    return script


def unregister_script(name: str) -> None:
    with _SCRIPTS_LOCK:
        _SCRIPTS.pop(name, None)


class ScriptedProvider(Provider):
    name = "scripted"
    cacheable = False

    def __init__(self, cfg, **kw) -> None:  # type: ignore[no-untyped-def]
        super().__init__(cfg, **kw)
        with _SCRIPTS_LOCK:
            registered = _SCRIPTS.get(cfg.model)
        self.script = registered if registered is not None else Script.from_spec(cfg.extra_body)

    def _answer(self, req: ProviderRequest) -> RawCompletion:
        sreq = ScriptedRequest(req.role, req.messages, req.max_tokens, req.temperature, list(req.stop),
                               req.schema, req.seed)
        text = self.script.respond(sreq)
        finish = "stop"
        cut = min((i for i in (text.find(s) for s in req.stop if s) if i >= 0), default=-1)
        if cut >= 0:
            text = text[:cut]
        words = text.split(" ")
        if len(words) > req.max_tokens:  # "tokens" are space-separated words here
            text, finish = " ".join(words[: req.max_tokens]), "length"
        prompt_tokens = sum(len(m["content"].split()) for m in req.messages)
        return RawCompletion(text, finish, prompt_tokens, len(text.split()), model=self.cfg.model)

    async def acomplete(self, req: ProviderRequest) -> RawCompletion:
        if self.script.delay_s:
            await asyncio.sleep(self.script.delay_s)
        return self._answer(req)

    async def aembed(self, texts: list[str], role: str) -> RawEmbedding:
        if self.script.delay_s:
            await asyncio.sleep(self.script.delay_s)
        return RawEmbedding([hashed_embedding(t, self.script.embed_dim) for t in texts],
                            prompt_tokens=sum(len(t.split()) for t in texts), model=self.cfg.model)


def hashed_embedding(text: str, dim: int) -> list[float]:
    """A deterministic unit vector: each lower-cased word adds ±1 at a hash-chosen position (feature hashing),
    so texts sharing words point in similar directions; text without words hashes as a whole."""
    vec = [0.0] * dim
    for word in re.findall(r"\w+", text.lower()) or [text]:
        digest = hashlib.sha256(word.encode()).digest()
        vec[int.from_bytes(digest[:4], "little") % dim] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vec))
    if norm == 0.0:  # the hashed words cancelled out: fall back to one position for the whole text
        vec[int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little") % dim] = 1.0
        norm = 1.0
    return [x / norm for x in vec]
