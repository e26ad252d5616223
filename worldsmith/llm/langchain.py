"""LangChain interop.

* :class:`WorldsmithChatModel` — a LangChain ``BaseChatModel`` over our :class:`LLM` and one role, so graph
  nodes can use LangChain chat models while sharing our config, cache, retries and accounting.
* :func:`chat_openai` / :func:`chat_openai_for_role` — a ``langchain_openai.ChatOpenAI`` built from an
  :class:`EndpointConfig`, for users who prefer it; accounting flows into our tracker via a callback.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Optional, Sequence
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ChatMessage
from langchain_core.outputs import ChatGeneration, ChatResult, LLMResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import BaseModel, ConfigDict

from worldsmith.llm.accounting import UsageTracker
from worldsmith.llm.client import LLM
from worldsmith.llm.config import EndpointConfig
from worldsmith.llm.errors import LLMConfigError
from worldsmith.llm.types import Completion

_ROLE_OF_TYPE = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}
_CALL_KWARGS = {"max_tokens", "temperature", "top_p", "seed", "sample_index", "use_cache", "logprobs"}


def to_chat_dicts(messages: Sequence[BaseMessage]) -> list[dict[str, str]]:
    """LangChain messages → our ``{role, content}`` dicts (text content only)."""
    out = []
    for i, m in enumerate(messages):
        role = m.role if isinstance(m, ChatMessage) else _ROLE_OF_TYPE.get(m.type)
        if role is None:
            raise ValueError(f"messages[{i}]: LangChain message type {m.type!r} has no chat role here")
        content = m.content
        if isinstance(content, list):  # content blocks: keep the text ones
            parts = []
            for block in content:
                if isinstance(block, str):
                    parts.append(block)
                elif isinstance(block, dict) and block.get("type") == "text":
                    parts.append(str(block.get("text", "")))
                else:
                    raise ValueError(f"messages[{i}]: only text content is supported, got a {block!r} block")
            content = "".join(parts)
        out.append({"role": role, "content": content})
    return out


def _chat_result(c: Completion) -> ChatResult:
    usage = {"input_tokens": c.usage.prompt_tokens, "output_tokens": c.usage.completion_tokens,
             "total_tokens": c.usage.total_tokens}
    meta = {"finish_reason": c.finish_reason, "model_name": c.model, "provider": c.provider, "cached": c.cached,
            "latency_s": c.latency_s}
    info: dict[str, Any] = {"finish_reason": c.finish_reason}
    if c.logprobs is not None:  # where ChatOpenAI puts them too
        meta["logprobs"] = info["logprobs"] = {"content": [t.model_dump() for t in c.logprobs]}
    msg = AIMessage(content=c.text, usage_metadata=usage, response_metadata=meta)  # type: ignore[arg-type]
    return ChatResult(generations=[ChatGeneration(message=msg, generation_info=info)],
                      llm_output={"token_usage": {"prompt_tokens": c.usage.prompt_tokens,
                                                  "completion_tokens": c.usage.completion_tokens},
                                  "model_name": c.model})


class WorldsmithChatModel(BaseChatModel):
    """LangChain chat model answering through ``llm`` as ``role``. Extra call kwargs: max_tokens, temperature,
    top_p, seed, sample_index, use_cache, logprobs."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: Any  # worldsmith.llm.LLM (Any: LangChain's pydantic model must not validate it)
    role: str = "agent"

    @property
    def _llm_type(self) -> str:
        return "worldsmith"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        ep = self.llm.endpoint(self.role)
        return {"role": self.role, "provider": ep.provider, "model": ep.model}

    def _opts(self, stop: Optional[list[str]], kwargs: dict[str, Any]) -> dict[str, Any]:
        unknown = set(kwargs) - _CALL_KWARGS
        if unknown:
            raise TypeError(f"WorldsmithChatModel: unsupported call option(s) {sorted(unknown)}; "
                            f"allowed: {sorted(_CALL_KWARGS)}")
        return {"role": self.role, "stop": stop, **kwargs}

    def _generate(self, messages: list[BaseMessage], stop: Optional[list[str]] = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return _chat_result(self.llm.complete(to_chat_dicts(messages), **self._opts(stop, kwargs)))

    async def _agenerate(self, messages: list[BaseMessage], stop: Optional[list[str]] = None,
                         run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return _chat_result(await self.llm.acomplete(to_chat_dicts(messages), **self._opts(stop, kwargs)))

    def with_structured_output(self, schema: Any, *, include_raw: bool = False, **kwargs: Any) -> Runnable:
        """A runnable returning a validated ``schema`` instance (our schema prompt, grammar and repair retry)."""
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise NotImplementedError("WorldsmithChatModel.with_structured_output needs a pydantic model class")
        if include_raw or kwargs:
            raise NotImplementedError("include_raw and method options are not supported; use llm.structured_result")

        def run(value: Any) -> BaseModel:
            msgs = to_chat_dicts(self._convert_input(value).to_messages())
            return self.llm.structured(msgs, schema, role=self.role)

        async def arun(value: Any) -> BaseModel:
            msgs = to_chat_dicts(self._convert_input(value).to_messages())
            return await self.llm.astructured(msgs, schema, role=self.role)

        return RunnableLambda(run, afunc=arun, name=f"worldsmith_structured_{schema.__name__}")


class UsageCallback(BaseCallbackHandler):
    """Feeds token counts and latency of LangChain model calls into a :class:`UsageTracker` under ``role``."""

    def __init__(self, tracker: UsageTracker, role: str) -> None:
        self.tracker = tracker
        self.role = role
        self._starts: dict[UUID, float] = {}

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._starts[run_id] = time.perf_counter()

    def on_llm_start(self, serialized: Any, prompts: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._starts[run_id] = time.perf_counter()

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        latency = time.perf_counter() - self._starts.pop(run_id, time.perf_counter())
        prompt = completion = 0
        for gens in response.generations:
            for g in gens:
                um = getattr(getattr(g, "message", None), "usage_metadata", None) or {}
                prompt += int(um.get("input_tokens", 0))
                completion += int(um.get("output_tokens", 0))
        if not (prompt or completion) and response.llm_output:
            tu = response.llm_output.get("token_usage") or {}
            prompt, completion = int(tu.get("prompt_tokens", 0)), int(tu.get("completion_tokens", 0))
        self.tracker.record_call(self.role, cached=False, prompt_tokens=prompt, completion_tokens=completion,
                                 latency_s=latency)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._starts.pop(run_id, None)
        self.tracker.add(self.role, "errors")


def chat_openai(endpoint: EndpointConfig, *, role: str = "agent", tracker: UsageTracker | None = None,
                key_path: Any = None) -> Any:
    """A ``langchain_openai.ChatOpenAI`` for an openai-provider endpoint (same key rules as our provider).

    Retries are ChatOpenAI's own here (``max_retries`` from the endpoint); our cache is not used.
    """
    if endpoint.provider != "openai":
        raise LLMConfigError(f"llm: role {role!r} uses provider {endpoint.provider!r}; ChatOpenAI needs 'openai' "
                             "(use WorldsmithChatModel for embedded or scripted endpoints)")
    from langchain_openai import ChatOpenAI

    from worldsmith.llm.providers.openai_compat import OpenAIProvider

    kp = key_path or (lambda r, f: f"llm.default.{f}")
    api_key = OpenAIProvider(endpoint, key_path=kp, models_dir=Path(".")).api_key(role)
    kwargs: dict[str, Any] = {"model": endpoint.model, "api_key": api_key, "base_url": endpoint.base_url,
                              "temperature": endpoint.temperature, "max_tokens": endpoint.max_tokens,
                              "timeout": endpoint.timeout_s, "max_retries": endpoint.max_retries}
    if endpoint.top_p is not None:
        kwargs["top_p"] = endpoint.top_p
    if endpoint.seed is not None:
        kwargs["seed"] = endpoint.seed
    if endpoint.extra_body:
        kwargs["extra_body"] = dict(endpoint.extra_body)
    if tracker is not None:
        kwargs["callbacks"] = [UsageCallback(tracker, role)]
    return ChatOpenAI(**kwargs)


def chat_openai_for_role(llm: LLM, role: str) -> Any:
    """ChatOpenAI for ``role`` of ``llm``'s config, accounted in ``llm.usage()`` under that role."""
    return chat_openai(llm.endpoint(role), role=role, tracker=llm.usage_tracker, key_path=llm.config.key_path)
