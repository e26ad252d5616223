"""Small pieces: cache files, backoff policy, Retry-After parsing, JSON extraction, accounting."""

from __future__ import annotations

import json
import threading
from email.utils import formatdate
from pathlib import Path
import time

import pytest
from pydantic import BaseModel, ConfigDict

from worldsmith.llm.accounting import UsageTracker
from worldsmith.llm.cache import ResponseCache, cache_key
from worldsmith.llm.errors import TransientError
from worldsmith.llm.retry import RetryPolicy, parse_retry_after, retry
from worldsmith.llm.structured import extract_json, is_strict_compatible, validate_reply


def test_cache_key_is_order_independent_and_sensitive() -> None:
    a = cache_key({"messages": [{"role": "user", "content": "x"}], "params": {"t": 0, "m": 5}})
    b = cache_key({"params": {"m": 5, "t": 0}, "messages": [{"content": "x", "role": "user"}]})
    c = cache_key({"params": {"m": 6, "t": 0}, "messages": [{"content": "x", "role": "user"}]})
    assert a == b != c and len(a) == 64


def test_cache_round_trip_atomic_and_corrupt_entry_is_a_miss(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c")
    key = cache_key({"q": 1})
    assert cache.get(key) is None
    cache.put(key, {"text": "hi"})
    assert cache.get(key) == {"text": "hi"} and len(cache) == 1
    assert not list((tmp_path / "c").rglob("*.tmp"))  # no temp files left behind
    path = tmp_path / "c" / key[:2] / f"{key}.json"
    path.write_text("{truncated")
    assert cache.get(key) is None
    path.write_text(json.dumps({"key": "other", "value": {"text": "wrong"}}))
    assert cache.get(key) is None


def test_backoff_grows_with_jitter_and_honours_retry_after() -> None:
    p = RetryPolicy(max_retries=5, base_s=0.5, max_s=4.0)
    for attempt, ceiling in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (6, 4.0)]:
        delays = [p.delay(attempt, None) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1  # jittered
    assert 2.0 <= p.delay(0, 2.0) <= 2.2
    assert p.delay(0, 100.0) <= 4.0 * 1.1  # capped


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert 8 <= parse_retry_after({"retry-after": formatdate(time.time() + 10, usegmt=True)}) <= 10.5
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


async def test_retry_stops_after_max_retries() -> None:
    calls = []

    async def flaky() -> str:
        calls.append(1)
        raise TransientError("boom", kind="server")

    with pytest.raises(TransientError):
        await retry(flaky, RetryPolicy(2, 0.0, 0.0))
    assert len(calls) == 3


async def test_retry_returns_the_first_success_and_reports_each_retry() -> None:
    outcomes = [TransientError("busy", kind="rate_limit", retry_after=0.0), TransientError("x", kind="server"), "ok"]
    seen: list[tuple[int, str]] = []

    async def flaky() -> str:
        out = outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out

    got = await retry(flaky, RetryPolicy(5, 0.0, 0.0), lambda attempt, exc, wait: seen.append((attempt, exc.kind)))
    assert got == "ok" and seen == [(0, "rate_limit"), (1, "server")]


def test_extract_json_variants() -> None:
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json('Here you go:\n```json\n{"a": 2}\n```\nthanks') == {"a": 2}
    assert extract_json('The answer is {"a": 3}.') == {"a": 3}
    with pytest.raises(json.JSONDecodeError):
        extract_json("no json here")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int


class Loose(BaseModel):
    a: int = 1


def test_strict_compatibility_and_validation_errors() -> None:
    assert is_strict_compatible(Strict.model_json_schema())
    assert not is_strict_compatible(Loose.model_json_schema())
    value, errors = validate_reply('{"a": "x"}', Strict)
    assert value is None and errors and errors[0].startswith("a:")
    value, errors = validate_reply('{"a": 4}', Strict)
    assert value == Strict(a=4) and errors == []


def test_usage_tracker_is_thread_safe() -> None:
    t = UsageTracker()

    def work() -> None:
        for _ in range(1000):
            t.record_call("r", cached=False, prompt_tokens=2, completion_tokens=1, latency_s=0.001)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    u = t.snapshot()["r"]
    assert (u.calls, u.prompt_tokens, u.completion_tokens) == (8000, 16000, 8000)
    t.record_call("r", cached=True, prompt_tokens=5, completion_tokens=5, latency_s=0.0)
    assert t.snapshot()["r"].cached_calls == 1 and t.snapshot()["r"].prompt_tokens == 16000
