"""The LLM layer: one interface over embedded llama.cpp, OpenAI-compatible and scripted providers.

Written once, async (``acomplete``, ``astructured``, ``aembed``); the sync methods are thin wrappers.

    llm = LLM(settings.llm, home=settings.home)          # or LLM.from_settings(settings)
    llm.complete([{"role": "user", "content": "hi"}], role="agent").text
    llm.structured(messages, MySchema, role="judge")    # validated MySchema instance
    llm.embed(["a text", "another"])                    # offline all-MiniLM-L6-v2 vectors (role "embed")
"""

from worldsmith.llm.accounting import RoleUsage
from worldsmith.llm.client import LLM
from worldsmith.llm.config import EndpointConfig, LLMConfig
from worldsmith.llm.errors import (LLMConfigError, LLMContextError, LLMError, LLMOutputError, LLMRequestError,
                                   LLMUnavailableError)
from worldsmith.llm.types import Completion, Message, StructuredResult, TokenLogprob, TokenUsage

__all__ = [
    "LLM", "LLMConfig", "EndpointConfig", "Completion", "Message", "TokenUsage", "TokenLogprob", "StructuredResult",
    "RoleUsage",
    "LLMError", "LLMConfigError", "LLMUnavailableError", "LLMRequestError", "LLMContextError",
    "LLMOutputError",
]
