"""`worldsmith llm ping`: one small structured request that proves a role's endpoint works end to end."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from worldsmith.llm.client import LLM

PING_PROMPT = "Say hello in a few words, and compute 2+3."


class PingAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    greeting: str = Field(description="a short greeting")
    answer: int = Field(description="the value of 2+3")


class PingResult(BaseModel):
    role: str
    provider: str
    model: str
    load_s: float = Field(description="seconds spent loading the model before the request (0 when nothing to load "
                          "or already loaded); not part of latency or tokens/s")
    latency_s: float = Field(description="wall time of the request alone, in seconds")
    prompt_tokens: int
    completion_tokens: int
    tokens_per_s: float = Field(description="completion tokens / latency")
    repaired: bool = Field(description="True when the model needed the repair retry")
    answer: PingAnswer
    correct: bool = Field(description="answer == 5")


def ping(llm: LLM, role: str = "agent", *, max_tokens: int = 64) -> PingResult:
    """Send the ping request for ``role`` (bypassing the cache) and report what came back.

    The model is loaded first and timed apart, so latency and tokens/s describe the request alone.
    Raises the LLM layer's errors (config, unavailable, output) unchanged: the CLI prints their one line.
    """
    load_s = llm.load(role)
    res = llm.structured_result(
        [{"role": "user", "content": PING_PROMPT}], PingAnswer, role=role, max_tokens=max_tokens, use_cache=False
    )
    c = res.completion
    answer: PingAnswer = res.value  # type: ignore[assignment]
    return PingResult(
        role=role, provider=c.provider, model=c.model, load_s=round(load_s, 4), latency_s=round(c.latency_s, 4),
        prompt_tokens=c.usage.prompt_tokens, completion_tokens=c.usage.completion_tokens,
        tokens_per_s=round(c.usage.completion_tokens / c.latency_s, 2) if c.latency_s > 0 else 0.0,
        repaired=res.repaired, answer=answer, correct=answer.answer == 5,
    )
