"""Chat tokenizers for SFT data: render a conversation with a model's own chat template, and encode the text.

`ChatTokenizer` is the small protocol `to_sft_example` needs. Two adapters: a Hugging Face tokenizer (duck-typed, so
transformers is never imported here) and a GGUF file read with llama-cpp-python (vocabulary only, no weights loaded),
whose chat template comes from the file's `tokenizer.chat_template` metadata and is rendered with jinja2.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable

ChatMessages = Sequence[dict[str, str]]


@runtime_checkable
class ChatTokenizer(Protocol):
    def render(self, messages: ChatMessages, *, add_generation_prompt: bool) -> str:
        """The chat template applied to `messages` (roles system/user/assistant), as text."""

    def encode(self, text: str) -> list[int]:
        """Token ids of rendered text; special tokens written in it are parsed, none are added."""

    def decode(self, ids: Sequence[int]) -> str:
        """Text of token ids, special tokens included."""


class HFChatTokenizer:
    """Adapter for a Hugging Face `PreTrainedTokenizer(Fast)` (anything with apply_chat_template/encode/decode)."""

    def __init__(self, tokenizer: Any) -> None:
        for method in ("apply_chat_template", "encode", "decode"):
            if not callable(getattr(tokenizer, method, None)):
                raise TypeError(f"HFChatTokenizer needs a Hugging Face tokenizer; {type(tokenizer).__name__} "
                                f"has no {method}()")
        self.tokenizer = tokenizer

    def render(self, messages: ChatMessages, *, add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False,
                                                  add_generation_prompt=add_generation_prompt)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))  # the template wrote BOS if it wants one

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)


class GGUFChatTokenizer:
    """The tokenizer and chat template stored in a GGUF model file (llama-cpp-python, `vocab_only=True`)."""

    TEMPLATE_KEY = "tokenizer.chat_template"

    def __init__(self, model_path: str | Path, *, chat_template: str | None = None) -> None:
        from llama_cpp import Llama  # the embedded-model extra; only this adapter needs it

        path = Path(model_path)
        if not path.is_file():
            raise FileNotFoundError(f"GGUF model file not found: {path}")
        self._llama = Llama(model_path=str(path), vocab_only=True, verbose=False)
        template = chat_template or self._llama.metadata.get(self.TEMPLATE_KEY)
        if not template:
            raise ValueError(f"{path.name}: no chat template in its metadata key {self.TEMPLATE_KEY!r}; "
                             "pass chat_template= explicitly")
        self.chat_template = template
        self.bos_token = self.decode([self._llama.token_bos()]) if self._llama.token_bos() >= 0 else ""
        self.eos_token = self.decode([self._llama.token_eos()]) if self._llama.token_eos() >= 0 else ""
        self._compiled = _jinja_environment().from_string(template)

    def render(self, messages: ChatMessages, *, add_generation_prompt: bool) -> str:
        return self._compiled.render(messages=[dict(m) for m in messages], add_generation_prompt=add_generation_prompt,
                                     bos_token=self.bos_token, eos_token=self.eos_token)

    def encode(self, text: str) -> list[int]:
        return list(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def decode(self, ids: Sequence[int]) -> str:
        return self._llama.detokenize(list(ids), special=True).decode("utf-8", errors="replace")

    def close(self) -> None:
        """Free llama.cpp's vocabulary (also freed when the object is collected)."""
        self._llama.close()

    def __enter__(self) -> GGUFChatTokenizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _jinja_environment() -> Any:
    """A sandboxed jinja2 environment configured the way chat templates are written for (Hugging Face's
    convention: trimmed blocks, `raise_exception`, `strftime_now`), so a template renders as it does there."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise ValueError(f"chat template: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env
