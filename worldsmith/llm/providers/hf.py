"""Local-checkpoint provider: a Hugging Face causal LM folder (a trained student) generating with transformers.

`provider = "hf"`, `model = "<checkpoint dir>"` (or a Hugging Face id already in the local cache). The conversation is
rendered with the checkpoint's own chat template (as in training), generation is greedy at temperature 0 and sampled
otherwise (seeded when `seed` is set), and stops at the end-of-turn token, `max_tokens`, or the first stop sequence
(cut from the text, as OpenAI-compatible servers do). So the eval harness scores a student exactly as it scores the
teacher. Each checkpoint is loaded once per process and shared; a lock serialises generation (one model, one
request at a time) and the blocking work runs in a worker thread.

For llama.cpp speed, export the checkpoint to GGUF (`worldsmith train export`) and use 'embedded'.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldsmith.llm.errors import LLMConfigError, LLMRequestError, LLMUnavailableError
from worldsmith.llm.providers.base import Provider
from worldsmith.llm.types import ProviderRequest, RawCompletion

TRAIN_HINT = "pip install 'worldsmith[train]'"


@dataclass
class LoadedCheckpoint:
    model: Any  # transformers PreTrainedModel, eval mode
    tokenizer: Any
    lock: threading.Lock
    load_s: float


_LOADED: dict[str, LoadedCheckpoint] = {}
_LOAD_LOCK = threading.Lock()


def load_checkpoint(path: str) -> LoadedCheckpoint:
    """Load (or reuse) the model and tokenizer at `path`."""
    key = str(Path(path).resolve()) if Path(path).exists() else path
    with _LOAD_LOCK:
        loaded = _LOADED.get(key)
        if loaded is None:
            try:
                from transformers import AutoModelForCausalLM, AutoTokenizer
            except ImportError:
                raise LLMUnavailableError(f"the hf provider needs transformers and torch: {TRAIN_HINT}") from None
            t0 = time.perf_counter()
            try:
                tokenizer = AutoTokenizer.from_pretrained(path)
                model = AutoModelForCausalLM.from_pretrained(path).eval()
            except (OSError, ValueError) as exc:
                raise LLMUnavailableError(f"the hf provider could not load {path}: {exc}") from None
            import torch

            if torch.cuda.is_available():  # a student evaluated on a GPU machine generates there
                model = model.to("cuda")
            loaded = _LOADED[key] = LoadedCheckpoint(model, tokenizer, threading.Lock(), time.perf_counter() - t0)
        return loaded


def cut_at_stop(text: str, stops: list[str]) -> tuple[str, bool]:
    """`text` up to the first stop sequence (excluded), and whether one was found."""
    hits = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return (text[:min(hits)], True) if hits else (text, False)


class HFProvider(Provider):
    name = "hf"

    def check(self, role: str) -> None:
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError:
            raise LLMUnavailableError(f"the hf provider needs transformers and torch: {TRAIN_HINT}") from None
        path = Path(self.cfg.model)
        if (path.exists() and not (path / "config.json").is_file()) or (not path.exists() and "/" not in self.cfg.model):
            raise LLMConfigError(f"{self.key_path(role, 'model')}: {self.cfg.model!r} is not a checkpoint folder "
                                 "(no config.json there); give the folder `worldsmith train sft` saved")

    def describe(self) -> str:
        return f"hf checkpoint {self.cfg.model!r}"

    async def aload(self, role: str) -> float:
        """Load the checkpoint now (in a worker thread); the wall time, ~0 when it was already loaded."""
        t0 = time.perf_counter()
        await asyncio.to_thread(load_checkpoint, self.cfg.model)
        return time.perf_counter() - t0

    def cache_identity(self) -> dict[str, Any]:
        # a re-trained checkpoint in the same folder must not hit old cache entries: key on the weights' mtime
        weights = sorted(Path(self.cfg.model).glob("*.safetensors")) if Path(self.cfg.model).is_dir() else []
        return {"provider": self.name, "model": self.cfg.model,
                "weights": [(w.name, w.stat().st_size, w.stat().st_mtime_ns) for w in weights]}

    async def acomplete(self, req: ProviderRequest) -> RawCompletion:
        if req.schema is not None and self.cfg.structured != "none":
            raise LLMRequestError(f"{self.key_path(req.role, 'provider')}: the hf provider has no structured output; "
                                  "use it for the analyst role, and 'embedded' or 'openai' for judges")
        return await asyncio.to_thread(self._complete, req)

    def _complete(self, req: ProviderRequest) -> RawCompletion:
        ckpt = load_checkpoint(self.cfg.model)
        with ckpt.lock:
            return self._generate(ckpt, req)

    def _generate(self, ckpt: LoadedCheckpoint, req: ProviderRequest) -> RawCompletion:
        import torch

        tok = ckpt.tokenizer
        try:
            prompt = tok.apply_chat_template(req.messages, tokenize=False, add_generation_prompt=True)
        except (ValueError, TypeError) as exc:
            raise LLMRequestError(f"{self.describe()}: its chat template rejected the messages: {exc}") from None
        ids = tok(prompt, add_special_tokens=False, return_tensors="pt")
        sample = req.temperature > 0
        kw: dict[str, Any] = {"max_new_tokens": req.max_tokens, "do_sample": sample,
                              "pad_token_id": tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id}
        if sample:
            kw["temperature"] = req.temperature
            if req.top_p is not None:
                kw["top_p"] = req.top_p
        stops = [s for s in req.stop if s]
        if stops:
            kw["stopping_criteria"] = [_StopOnText(tok, stops, ids["input_ids"].shape[1])]
        kw.update({k: v for k, v in req.extra_body.items() if k in ("top_k", "min_p", "repetition_penalty")})
        with torch.random.fork_rng(devices=[]), torch.inference_mode():
            if req.seed is not None:
                torch.manual_seed(req.seed)
            out = ckpt.model.generate(**ids.to(ckpt.model.device), **kw)
        new = out[0, ids["input_ids"].shape[1]:].tolist()
        text, stopped = cut_at_stop(tok.decode(new, skip_special_tokens=True), stops)
        eos = set(_as_list(ckpt.model.generation_config.eos_token_id)) | {tok.eos_token_id}
        finish = "stop" if stopped or (new and new[-1] in eos) or len(new) < req.max_tokens else "length"
        return RawCompletion(text=text, finish_reason=finish, prompt_tokens=int(ids["input_ids"].shape[1]),
                             completion_tokens=len(new), model=self.cfg.model, token_ids=new)


class _StopOnText:
    """Stop once the generated text (never the prompt: transformers' own `stop_strings` also match across the
    prompt's tail) contains a stop sequence. Decoding only a window of recent tokens keeps each step cheap."""

    def __init__(self, tokenizer: Any, stops: list[str], prompt_len: int) -> None:
        self.tokenizer, self.stops, self.prompt_len = tokenizer, stops, prompt_len
        self.window = max(len(s) for s in stops) + 8  # every token decodes to at least one character, or nothing

    def __call__(self, input_ids: Any, scores: Any, **kw: Any) -> Any:
        import torch

        new = input_ids[0, self.prompt_len:]
        text = self.tokenizer.decode(new[-self.window:].tolist(), skip_special_tokens=True)
        done = any(s in text for s in self.stops)
        return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)


def _as_list(v: Any) -> list[Any]:
    return [] if v is None else list(v) if isinstance(v, (list, tuple)) else [v]
