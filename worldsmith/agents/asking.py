"""One way for the evolution agents to ask a model for a typed answer: schema-constrained output through the
LLM layer (which repairs invalid JSON once), then the agent's own checks with the problems fed back, a bounded
number of times. Every call is recorded as a `ModelCall`; a failure is returned with its reasons, never raised
for a bad model answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from worldsmith.core.schemas import Action, ModelCall, RecordedMessage
from worldsmith.llm.errors import (
    LLMConfigError,
    LLMError,
    LLMFatalError,
    LLMOutputError,
)
from worldsmith.prompts import template, versions

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

RETRY_TEMPLATE = "evolve_retry.md"


@dataclass
class Outcome(Generic[T]):
    """An agent's answer (None when it failed), every model call it made, and why earlier drafts were refused."""

    value: T | None
    calls: list[ModelCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.value is not None


def _recorded(messages: list[dict[str, str]]) -> list[RecordedMessage]:
    """Messages as sent, with what wrote each: the prompt (system, task), the model's own earlier replies, and
    the agent's feedback on them. None of it trains: these are agent calls, not analyst trajectories."""
    out, users = [], 0
    for m in messages:
        role = m["role"] if m["role"] in ("system", "user", "assistant") else "user"
        if role == "user":
            users += 1
        source = {"system": "system", "assistant": "model"}.get(role, "task" if users == 1 else "feedback")
        out.append(RecordedMessage(role=role, content=m["content"], source=source))
    return out


def record_call(index: int, completion: Any, templates: dict[str, str], *, reply: str | None = None,
                repaired: str | None = None, sent: list[dict[str, str]] | None = None, action: Action | None = None,
                void_reason: str | None = None, dropped: str | None = None) -> ModelCall:
    """The training record of one call: the messages exactly as the provider received them (the client echoes
    them; `sent` stands in for a stub that does not), the raw completion and its sampling."""
    as_sent = getattr(completion, "request_messages", None) or sent or []
    usage = getattr(completion, "usage", None)
    return ModelCall(index=index, messages=_recorded(as_sent), templates=dict(templates), completion=completion.text,
                     reply=completion.text if reply is None else reply, repaired=repaired, action=action,
                     void_reason=void_reason, dropped=dropped,
                     sampling=dict(getattr(completion, "sampling", {}) or {}),
                     prompt_tokens=getattr(usage, "prompt_tokens", 0), completion_tokens=getattr(usage, "completion_tokens", 0),
                     latency_s=getattr(completion, "latency_s", 0.0), finish_reason=getattr(completion, "finish_reason", ""),
                     cached=getattr(completion, "cached", False), model=getattr(completion, "model", ""),
                     provider=getattr(completion, "provider", ""))


def failed_call(index: int, exc: LLMOutputError, sent: list[dict[str, str]], templates: dict[str, str]) -> ModelCall:
    """The record of a call whose reply never fit the schema (the layer's repair retry included)."""
    return ModelCall(index=index, messages=_recorded(sent), templates=dict(templates), completion=exc.raw_text,
                     reply=exc.raw_text, repaired="; ".join(exc.errors[:3]) or "schema validation failed",
                     finish_reason="invalid")


#: A reply longer than this goes back into the retry conversation cut (a runaway that hit max_tokens, sent back
#: whole, pushed the profiler's retry past the model's context window: nothing was asked at all).
RETRY_REPLY_CHARS = 4000


def _clipped(reply: str) -> str:
    return reply if len(reply) <= RETRY_REPLY_CHARS else reply[:RETRY_REPLY_CHARS] + " …[cut]"


def retry_message(problems: list[str]) -> str:
    return template(RETRY_TEMPLATE).section("problems", problems="\n".join(f"- {p}" for p in problems))


async def ask(llm: Any, messages: list[dict[str, str]], schema: type[M], *, role: str, templates: dict[str, str],
              check: Callable[[M], list[str]] | None = None, retries: int = 2, first_index: int = 0,
              **opts: Any) -> Outcome[M]:
    """A `schema` instance that passes `check` (which returns the problems, empty when fine), asking again with
    the problems at most `retries` times. `templates` are the prompt files that built `messages`."""
    conversation = [dict(m) for m in messages]
    used = {**templates, **versions(RETRY_TEMPLATE)}
    out: Outcome[M] = Outcome(None)
    for _ in range(retries + 1):
        index = first_index + len(out.calls)
        try:
            got = await llm.astructured_result(conversation, schema, role=role, **opts)
        except LLMOutputError as exc:
            out.calls.append(failed_call(index, exc, conversation, used))
            problems = list(exc.errors) or [str(exc)]
            reply = exc.raw_text
        except (LLMFatalError, LLMConfigError):
            raise  # an unreachable endpoint or a rejected key stops the run with its own clear line
        except LLMError as exc:  # retries exhausted on one request: this answer failed, asking again will not help
            out.errors.append(f"{schema.__name__}: {exc}")
            return out
        else:
            note = "the first reply did not fit the schema; the model repaired it in one retry" if got.repaired else None
            out.calls.append(record_call(index, got.completion, used, repaired=note))
            value: M = got.value  # type: ignore[assignment]
            problems = check(value) if check is not None else []
            if not problems:
                out.value = value
                return out
            reply = value.model_dump_json()
        out.errors.extend(problems)
        # only the latest failed reply goes back: with every earlier one kept, two runaways (a reply of digits is
        # a token a character) pushed the third ask past the model's context, and it was never asked at all
        conversation = [dict(m) for m in messages] + [{"role": "assistant", "content": _clipped(reply)},
                                                      {"role": "user", "content": retry_message(problems)}]
    return out
