"""Student models for training: a tiny random one for tests, the embedded GGUFs, any Hugging Face causal LM.

    model, tokenizer = load_student("tiny")                 # 2 layers, hidden 32, byte-level tokenizer: no download
    model, tokenizer = load_student("smollm2-135m")         # the embedded registry's GGUF, dequantised by transformers
    model, tokenizer = load_student("runs/…/checkpoint")    # a saved checkpoint or any HF model path / id

GGUF loading needs the `gguf` package (transformers reads the file with it) and dequantises to float32: fine for
135M-0.5B on CPU. A trained checkpoint goes back to GGUF with `worldsmith train export` (training/export.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

TINY = "tiny"
#: ChatML, as SmolLM2 and Qwen2.5 write it (no default system prompt, so tests see exactly the messages given).
CHATML_TEMPLATE = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] "
                   "+ '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
                   "{% endif %}")
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
#: The command that writes a checkpoint back into its base GGUF (training/export.py), for run reports.
GGUF_EXPORT_HINT = "worldsmith train export CHECKPOINT_DIR --out student.gguf"


def tiny_tokenizer() -> Any:
    """A byte-level tokenizer built offline: the 256 bytes plus ChatML's special tokens, no merges (one token per
    byte), with the ChatML chat template. Encoding any text works; it only has to be consistent for tests."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  additional_special_tokens=list(SPECIAL_TOKENS[1:]))
    tok.add_special_tokens({"additional_special_tokens": list(SPECIAL_TOKENS[1:])})
    tok.chat_template = CHATML_TEMPLATE
    return tok


def tiny_model(tokenizer: Any, *, seed: int = 0, hidden_size: int = 32, layers: int = 2) -> Any:
    """A randomly initialised Qwen2 causal LM sized to `tokenizer` (same seed → same weights)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=8192, tie_word_embeddings=True,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=None)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def embedded_gguf(name: str, models_dir: Path | None) -> Path | None:
    """The verified GGUF of an embedded registry name, or None when `name` is not one."""
    from worldsmith.core.config import Settings
    from worldsmith.llm.models import REGISTRY, ensure_model

    spec = REGISTRY.get(name)
    if spec is None:
        return None
    if models_dir is None:  # the configured default, as the embedded provider would use
        settings = Settings()
        models_dir = settings.llm.resolved_models_dir(settings.home)
    return ensure_model(spec, models_dir)


def load_tokenizer(name_or_path: str, *, models_dir: Path | None = None) -> Any:
    """The tokenizer `load_student` would return, without loading weights."""
    from transformers import AutoTokenizer

    if name_or_path == TINY:
        return tiny_tokenizer()
    gguf = embedded_gguf(name_or_path, models_dir)
    if gguf is not None:
        return _ensure_pad(AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name))
    return _ensure_pad(AutoTokenizer.from_pretrained(name_or_path))


def load_student(name_or_path: str, *, models_dir: Path | None = None, seed: int = 0) -> tuple[Any, Any]:
    """(model, tokenizer) for "tiny", an embedded registry name (its GGUF) or a Hugging Face path / id.
    `models_dir`: where the embedded models are assembled (the LLM config's models dir)."""
    from transformers import AutoModelForCausalLM, GgufConfig

    if name_or_path == TINY:
        tok = tiny_tokenizer()
        return tiny_model(tok, seed=seed), tok
    gguf = embedded_gguf(name_or_path, models_dir)
    if gguf is not None:
        try:
            # dequantize=True: plain dense float32 weights, which the Trainer accepts (a model loaded with a GGUF
            # quantizer attached counts as "purely quantized" and may not be fine-tuned without adapters)
            model = AutoModelForCausalLM.from_pretrained(
                str(gguf.parent), gguf_file=gguf.name,
                quantization_config=GgufConfig(gguf_file=gguf.name, dequantize=True))
        except ImportError as exc:
            raise ImportError(f"loading {name_or_path} from {gguf.name} needs the gguf package: "
                              "pip install 'worldsmith[train]'") from exc
        return model, load_tokenizer(name_or_path, models_dir=models_dir)
    if not Path(name_or_path).exists() and "/" not in name_or_path:
        raise FileNotFoundError(f"student model {name_or_path!r}: not 'tiny', not an embedded model name and not a "
                                "checkpoint folder (or a Hugging Face id 'org/name')")
    return AutoModelForCausalLM.from_pretrained(name_or_path), load_tokenizer(name_or_path)


def _ensure_pad(tokenizer: Any) -> Any:
    if tokenizer.pad_token is None:  # batching pads; the end-of-turn token never trains where it pads (labels -100)
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer
