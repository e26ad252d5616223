"""A real OpenAI-compatible HTTP server for tests: 127.0.0.1, a free port, a background thread.

Implements ``POST /v1/chat/completions`` (plain and ``stream=true``; per-word ``logprobs`` and vLLM-style
``token_ids`` when asked), ``POST /v1/embeddings`` and ``GET /v1/models`` with behaviour programmable per test: fixed
latency, queued per-request actions (429 with Retry-After, 5xx, 401/403, hanging past the client's timeout, HTTP 200
with a body that is not JSON or lacks choices or content, empty completions, given replies), a ``schedule`` that picks
the action of the n-th request when the queue is empty (faults on a schedule), json_schema / json_object rejection,
unknown model → 404, and request counting including the maximum number of requests in flight.

    def test_x(fake_openai):
        fake_openai.enqueue(Action.rate_limit(retry_after=0.05), Action.reply('{"a": 1}'))
        llm = LLM(LLMConfig(default=fake_openai.endpoint()), home=tmp_path)
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

import pytest

DEFAULT_MODEL = "fake-model"


@dataclass
class Action:
    """What the server does with one chat request (consumed in FIFO order; default = a normal reply)."""

    status: int = 200
    content: str | None = None  # reply text (None = the server's responder)
    finish_reason: str = "stop"
    delay_s: float = 0.0  # extra wait before answering (use > client timeout to simulate a hang)
    headers: dict[str, str] = field(default_factory=dict)
    error: str = ""
    raw_body: str | None = None  # sent verbatim with HTTP 200 instead of a completion (malformed bodies)

    @classmethod
    def invalid_json(cls, body: str = "<html><body>502 Bad Gateway</body></html>") -> "Action":
        """HTTP 200 whose body is not JSON (a proxy's error page, a truncated answer)."""
        return cls(raw_body=body)

    @classmethod
    def missing_choices(cls) -> "Action":
        return cls(raw_body=json.dumps({"id": "chatcmpl-broken", "object": "chat.completion", "model": DEFAULT_MODEL}))

    @classmethod
    def null_content(cls) -> "Action":
        return cls(raw_body=json.dumps({
            "id": "chatcmpl-null", "object": "chat.completion", "created": 0, "model": DEFAULT_MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": None}, "finish_reason": "stop"}]}))

    @classmethod
    def empty(cls) -> "Action":
        """A well-formed completion with no text."""
        return cls(content="")

    @classmethod
    def unauthorized(cls, status: int = 401) -> "Action":
        return cls(status=status, error="Incorrect API key provided (fake)")

    @classmethod
    def reply(cls, content: str, *, finish_reason: str = "stop", delay_s: float = 0.0) -> "Action":
        return cls(content=content, finish_reason=finish_reason, delay_s=delay_s)

    @classmethod
    def rate_limit(cls, retry_after: float | None = 0.05) -> "Action":
        headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
        return cls(status=429, headers=headers, error="Rate limit reached (fake)")

    @classmethod
    def server_error(cls, status: int = 500) -> "Action":
        return cls(status=status, error=f"Internal error {status} (fake)")

    @classmethod
    def hang(cls, seconds: float) -> "Action":
        return cls(delay_s=seconds)


def _words(text: str) -> int:
    return len(text.split())


def fake_embedding(text: str) -> list[float]:
    """The fake server's vector for ``text``: [characters, words, 1.0] (easy to compute by hand in a test)."""
    return [float(len(text)), float(_words(text)), 1.0]


def fake_logprob(index: int) -> float:
    """The logprob the fake server reports for the ``index``-th generated word: -0.5, -1.0, -1.5, ..."""
    return -0.5 * (index + 1)


class FakeOpenAI:
    """The server plus its programmable state. Use as a context manager or via the ``fake_openai`` fixture."""

    def __init__(self, *, models: set[str] | None = None, latency_s: float = 0.0) -> None:
        self.models: set[str] = set(models or {DEFAULT_MODEL})
        self.latency_s = latency_s
        self.reject_json_schema = False
        self.reject_json_object = False
        self.responder: Callable[[dict[str, Any]], str] = lambda body: "Hello from the fake server."
        self.requests: list[dict[str, Any]] = []  # chat request bodies, in arrival order
        self.embedding_requests: list[dict[str, Any]] = []  # /v1/embeddings bodies (they share the action queue)
        self.headers: list[dict[str, str]] = []  # their headers
        self.max_in_flight = 0
        self._in_flight = 0
        self._actions: deque[Action] = deque()
        # n (0-based index of the request over both routes) -> its action, when the queue is empty; None = normal
        self.schedule: Callable[[int], Action | None] | None = None
        self._served = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- programming ---------------------------------------------------------------------------------
    def enqueue(self, *actions: Action) -> "FakeOpenAI":
        with self._lock:
            self._actions.extend(actions)
        return self

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.embedding_requests.clear()
            self.headers.clear()
            self._actions.clear()
            self.max_in_flight = 0
            self._served = 0

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def endpoint(self, **overrides: Any) -> Any:
        """An EndpointConfig pointing here, with fast retries for tests."""
        from worldsmith.llm.config import EndpointConfig

        base = {"provider": "openai", "model": DEFAULT_MODEL, "base_url": self.base_url, "timeout_s": 5.0,
                "max_retries": 3, "backoff_base_s": 0.01, "backoff_max_s": 0.5}
        return EndpointConfig(**{**base, **overrides})

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> "FakeOpenAI":
        fake = self

        class Handler(_Handler):
            server_state = fake

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        server.daemon_threads = True
        server.block_on_close = False
        server.request_queue_size = 256  # the default backlog of 5 drops connections under concurrency
        server.allow_reuse_address = True
        server.server_bind()
        server.server_activate()
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()  # wakes handlers that are sleeping (latency / hang)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- request handling (called from handler threads) ----------------------------------------------
    def _begin(self, body: dict[str, Any], headers: dict[str, str], log: list[dict[str, Any]]) -> Action:
        with self._lock:
            log.append(body)
            self.headers.append(headers)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            n, self._served = self._served, self._served + 1
            if self._actions:
                return self._actions.popleft()
            scheduled = self.schedule(n) if self.schedule is not None else None
            return scheduled or Action()

    def _end(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stop.wait(seconds)

    def _serve(self, body: dict[str, Any], headers: dict[str, str], log: list[dict[str, Any]],
               answer: Callable[[Action], tuple[int, dict[str, str], Any]]) -> tuple[int, dict[str, str], Any]:
        """The behaviour every route shares: latency, queued error actions, unknown model → 404."""
        action = self._begin(body, headers, log)
        try:
            self._sleep(self.latency_s + action.delay_s)
            if action.status != 200:
                code = {401: "invalid_api_key", 403: "forbidden", 429: "rate_limit_exceeded"}.get(
                    action.status, "server_error")
                return action.status, action.headers, _error(action.error, code)
            if action.raw_body is not None:
                return 200, action.headers, RawBody(action.raw_body)
            model = body.get("model")
            if model not in self.models:
                return 404, {}, _error(f"The model `{model}` does not exist or you do not have access to it.",
                                       "model_not_found")
            return answer(action)
        finally:
            self._end()

    def chat(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
        """Return (status, headers, payload) for one chat request."""
        return self._serve(body, headers, self.requests, lambda action: self._chat_answer(body, action))

    def embeddings(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
        """Return (status, headers, payload) for one embeddings request (vectors from :func:`fake_embedding`)."""
        return self._serve(body, headers, self.embedding_requests, lambda action: self._embed_answer(body))

    def _chat_answer(self, body: dict[str, Any], action: Action) -> tuple[int, dict[str, str], Any]:
        rtype = (body.get("response_format") or {}).get("type")
        if (rtype == "json_schema" and self.reject_json_schema) or (rtype == "json_object" and self.reject_json_object):
            return 400, {}, _error(f"response_format type '{rtype}' is not supported by this server",
                                   "invalid_request_error")
        text = action.content if action.content is not None else self.responder(body)
        finish = action.finish_reason
        stops = body.get("stop") or []
        for s in [stops] if isinstance(stops, str) else stops:
            cut = text.find(s)
            if cut >= 0:
                text, finish = text[:cut], "stop"
        prompt = sum(_words(str(m.get("content", ""))) for m in body.get("messages", []))
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": finish}
        pieces = [w if i == 0 else " " + w for i, w in enumerate(text.split(" "))] if text else []
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [
                {"token": p, "logprob": fake_logprob(i), "bytes": list(p.encode()), "top_logprobs": []}
                for i, p in enumerate(pieces)]}
        if body.get("return_token_ids"):  # vLLM's extension: generated ids on the choice
            choice["token_ids"] = [1000 + i for i in range(len(pieces))]
        return 200, {}, {
            "id": f"chatcmpl-fake-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model"), "choices": [choice],
            "usage": {"prompt_tokens": prompt, "completion_tokens": _words(text), "total_tokens": prompt + _words(text)},
        }

    def _embed_answer(self, body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        if not all(isinstance(t, str) for t in texts):
            return 400, {}, _error("input must be a string or a list of strings", "invalid_request_error")
        tokens = sum(_words(t) for t in texts)
        data = [{"object": "embedding", "index": i, "embedding": fake_embedding(t)} for i, t in enumerate(texts)]
        return 200, {}, {"object": "list", "data": data[::-1],  # out of order on purpose: clients sort by index
                         "model": body.get("model"), "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


class RawBody(str):
    """A response body sent as it is (not JSON-encoded)."""


def _error(message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": code, "param": None, "code": code}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like real servers
    disable_nagle_algorithm = True  # else headers and body in two writes stall ~40 ms on delayed ACKs
    server_state: FakeOpenAI

    def log_message(self, format: str, *args: Any) -> None:  # silence per-request logging
        pass

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = payload.encode() if isinstance(payload, RawBody) else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/") == "/v1/models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in sorted(self.server_state.models)]
            self._send(200, {"object": "list", "data": data})
        else:
            self._send(404, _error(f"no route GET {self.path}", "not_found"))

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        route = self.path.rstrip("/")
        if route not in ("/v1/chat/completions", "/v1/embeddings"):
            self._send(404, _error(f"no route POST {self.path}", "not_found"))
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send(400, _error("request body is not JSON", "invalid_request_error"))
            return
        handle = self.server_state.chat if route == "/v1/chat/completions" else self.server_state.embeddings
        status, headers, payload = handle(body, {k.lower(): v for k, v in self.headers.items()})
        if status == 200 and body.get("stream") and not isinstance(payload, RawBody):
            self._stream(payload)
        else:
            self._send(status, payload, headers)

    def _stream(self, payload: dict[str, Any]) -> None:
        """Server-sent events: one chunk per word, then the finish chunk and [DONE]."""
        choice = payload["choices"][0]
        words = choice["message"]["content"].split(" ")
        base = {"id": payload["id"], "object": "chat.completion.chunk", "created": payload["created"],
                "model": payload["model"]}
        chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
        for i, w in enumerate(words):
            piece = w if i == 0 else " " + w
            chunks.append({**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}],
                       "usage": payload["usage"]})
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for c in chunks:
                self.wfile.write(f"data: {json.dumps(c)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A fresh fake OpenAI-compatible server for one test; ``.base_url`` ends in /v1."""
    with FakeOpenAI() as fake:
        yield fake
