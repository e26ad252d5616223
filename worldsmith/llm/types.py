"""Value types shared by the client and the providers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence, Union

from pydantic import BaseModel, ConfigDict, Field

ChatRole = Literal["system", "user", "assistant", "tool"]


class Message(BaseModel):
    """One chat message. Plain ``{"role": ..., "content": ...}`` dicts are accepted everywhere too."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: ChatRole
    content: str


MessageLike = Union[Message, Mapping[str, Any]]


def normalize_messages(messages: Sequence[MessageLike]) -> list[dict[str, str]]:
    """Validate messages and return them as plain ``{"role", "content"}`` dicts (a fresh list)."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TypeError(f"messages must be a list of {{role, content}} dicts, got {type(messages).__name__}")
    if not messages:
        raise ValueError("messages is empty: a chat request needs at least one message")
    out: list[dict[str, str]] = []
    for i, msg in enumerate(messages):
        m = msg if isinstance(msg, Message) else _parse(i, msg)
        out.append({"role": m.role, "content": m.content})
    return out


def _parse(index: int, msg: Any) -> Message:
    if not isinstance(msg, Mapping):
        raise TypeError(f"messages[{index}]: expected a {{role, content}} dict or Message, got {type(msg).__name__}")
    try:
        return Message(role=msg.get("role"), content=msg.get("content"))
    except Exception as exc:  # pydantic.ValidationError → one readable line
        raise ValueError(
            f"messages[{index}]: needs role in system/user/assistant/tool and a string content; got {dict(msg)!r}"
        ) from exc


class TokenUsage(BaseModel):
    prompt_tokens: int = Field(0, description="Tokens in the prompt.")
    completion_tokens: int = Field(0, description="Tokens generated.")

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class TokenLogprob(BaseModel):
    """One generated token and its log-probability (natural log) under the sampling distribution."""

    token: str
    logprob: float


class Completion(BaseModel):
    """The result of one chat completion."""

    text: str
    finish_reason: str = Field(description="'stop' (EOS or stop sequence), 'length' (max_tokens) or provider-specific.")
    usage: TokenUsage = Field(default_factory=TokenUsage)
    latency_s: float = Field(0.0, description="Wall time of this call, in seconds (cache read time when cached).")
    model: str = ""
    provider: str = ""
    role: str = ""
    cached: bool = Field(False, description="True when the answer came from the on-disk cache.")
    empty: bool = Field(False, description="True when the model returned no text (whitespace only counts as none); "
                        "recorded as it came, never retried.")
    request_messages: list[dict[str, str]] = Field(
        default_factory=list, description="The messages exactly as the provider received them (training record).")
    sampling: dict[str, Any] = Field(
        default_factory=dict, description="Effective sampling parameters: max_tokens, temperature, top_p, seed, stop.")
    logprobs: list[TokenLogprob] | None = Field(
        None, description="Per generated token: text and logprob, when asked (logprobs=True) and the provider gives "
        "them; else None.")
    token_ids: list[int] | None = Field(
        None, description="Generated token ids, where the provider returns them (e.g. vLLM's return_token_ids); "
        "else None.")


@dataclass
class StructuredResult:
    """A validated structured answer plus how it was obtained."""

    value: BaseModel
    completion: Completion
    repaired: bool = False


@dataclass
class ProviderRequest:
    """Everything one provider attempt needs. Built by the client; providers do not retry or cache."""

    messages: list[dict[str, str]]
    role: str
    max_tokens: int
    temperature: float
    top_p: float | None = None
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    schema: dict[str, Any] | None = None  # JSON schema when structured output is wanted
    schema_name: str = "response"
    extra_body: dict[str, Any] = field(default_factory=dict)
    logprobs: bool = False  # ask for per-token logprobs


@dataclass
class RawCompletion:
    """What a provider returns from one successful attempt."""

    text: str
    finish_reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""
    logprobs: list[TokenLogprob] | None = None
    token_ids: list[int] | None = None


@dataclass
class RawEmbedding:
    """What a provider returns from one embedding request: one vector per input text, in input order."""

    vectors: list[list[float]]
    prompt_tokens: int = 0
    model: str = ""
