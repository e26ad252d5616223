"""Write a trained student back into a GGUF, so the embedded (llama.cpp) provider serves it.

    path = export_gguf(model, base_gguf=Path("…/SmolLM2-135M-Instruct.Q4_1.gguf"), out=Path("student.gguf"))
    path = export_checkpoint(Path("runs/sft1/checkpoint"), out=Path("student.gguf"))   # base found from the run

The student was loaded from a GGUF by transformers (`gguf_file=`), so the base file already holds everything that is
not a weight: tokenizer, chat template, architecture hyper-parameters. The export copies every metadata key/value of
the base and replaces each tensor with the trained one, undoing what transformers did on load: its GGUF→HF tensor-name
mapping (reversed here) and, for the llama architecture, the Q/K row permutation llama.cpp's converter applies
(re-applied here). Architectures whose load applies any other transform are refused rather than exported wrongly.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

import numpy as np

#: q8_0 is the f16 file quantized by llama.cpp's own quantizer (`llama_model_quantize`, as `llama-quantize` does):
#: half the bytes and faster decoding on CPU. gguf 0.19's numpy Q8_0 quantizer is not used: its file decoded to
#: garbage in llama.cpp (SmolLM2, checked 2026-12-01).
OutType = Literal["f32", "f16", "q8_0"]
OUT_TYPES: tuple[str, ...] = ("f32", "f16", "q8_0")
#: Keys the writer sets itself (the GGUF.* pseudo-fields are the reader's view of the header; split.* would describe
#: a sharding the single output file does not have).
_WRITER_OWNED = ("GGUF.", "split.")
_OWN_KEYS = ("general.architecture", "general.file_type", "general.alignment")


def _file_type(out_type: OutType) -> int:
    from gguf import LlamaFileType

    return {"f32": LlamaFileType.ALL_F32, "f16": LlamaFileType.MOSTLY_F16}[out_type].value


def quantize_gguf(source: Path, out: Path, out_type: str = "q8_0", *, threads: int = 0) -> Path:
    """llama.cpp's quantizer: `source` (an f16/f32 GGUF) → `out` at `out_type`, metadata kept. Raises RuntimeError
    when llama.cpp refuses."""
    import ctypes

    import llama_cpp

    from worldsmith.llm.models import quiet_llama_log

    ftypes = {"q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0}
    if out_type not in ftypes:
        raise ValueError(f"quantize_gguf: out type must be one of {', '.join(ftypes)}, got {out_type!r}")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.nthread = ftypes[out_type], threads  # 0: llama.cpp uses every core
    with quiet_llama_log():  # a line per tensor otherwise
        rc = llama_cpp.llama_model_quantize(str(source).encode(), str(out).encode(), ctypes.byref(params))
    if rc != 0:
        raise RuntimeError(f"llama.cpp could not quantize {source} to {out_type} (return code {rc})")
    return out


def permute_qk(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's converter layout for a llama Q or K projection (rows of each head regrouped from HF's rotate-half
    order to interleaved pairs); the inverse of transformers' `LlamaTensorProcessor._reverse_permute_weights`.
    `n_head`: query heads for Q, key/value heads for K."""
    rows = weights.shape[0]
    if rows % (2 * n_head):
        raise ValueError(f"permute_qk: {rows} rows do not split into {n_head} heads of even size")
    return (weights.reshape(n_head, 2, rows // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def _to_gguf_layout(arch: str, config: Any) -> Any:
    """For `arch`, the function mapping (gguf name, HF-layout array) → the array as the GGUF stores it. Raises when
    transformers' load of this architecture transforms tensors in a way not inverted here."""
    from transformers.modeling_gguf_pytorch_utils import (
        TENSOR_PROCESSORS,
        TensorProcessor,
    )

    if arch == "llama":
        heads, kv_heads = config.num_attention_heads, config.num_key_value_heads

        def llama(name: str, w: np.ndarray) -> np.ndarray:
            if ".attn_q." in name:
                return permute_qk(w, heads)
            if ".attn_k." in name:
                return permute_qk(w, kv_heads)
            return w
        return llama
    if TENSOR_PROCESSORS.get(arch, TensorProcessor) is not TensorProcessor:
        raise NotImplementedError(f"GGUF export: transformers transforms {arch!r} tensors on load "
                                  f"({TENSOR_PROCESSORS[arch].__name__}) and that transform is not inverted here; "
                                  "supported: llama and architectures loaded without a transform (e.g. qwen2)")
    return lambda name, w: w


def _encode(w: np.ndarray, out_type: OutType) -> np.ndarray:
    """1-D tensors (norms, biases) stay f32, as llama.cpp's converter keeps them."""
    w = np.ascontiguousarray(w, dtype=np.float32)
    return w if out_type == "f32" or w.ndim < 2 else w.astype(np.float16)


def _copy_metadata(reader: Any, writer: Any) -> None:
    from gguf import GGUFValueType

    for key, field in reader.fields.items():
        if key.startswith(_WRITER_OWNED) or key in _OWN_KEYS:
            continue
        main = field.types[0]
        sub = field.types[-1] if main == GGUFValueType.ARRAY else None
        if main == GGUFValueType.ARRAY and len(field.types) > 2:
            raise NotImplementedError(f"GGUF export: metadata {key!r} is a nested array, which is not copied")
        value = field.contents()
        if main == GGUFValueType.ARRAY and not value:
            continue  # the writer refuses empty arrays; a reader sees an absent key the same way
        writer.add_key_value(key, value, main, sub_type=sub)


def _state_dict(model: Any) -> tuple[dict[str, Any], Any]:
    if hasattr(model, "merge_and_unload"):  # a peft model: bake the LoRA adapters in first
        model = model.merge_and_unload()
    return {k: v.detach().to("cpu").float() for k, v in model.state_dict().items()}, model


def export_gguf(model: Any, *, base_gguf: Path, out: Path, out_type: OutType = "f16") -> Path:
    """Write `model`'s weights into a copy of `base_gguf` (metadata kept, tensors replaced) at `out`, atomically.
    Raises when a base tensor has no trained counterpart or a trained weight has no place in the base."""
    from gguf import GGUFReader, GGUFWriter
    from transformers.modeling_gguf_pytorch_utils import (
        TENSOR_PROCESSORS,
        TensorProcessor,
        get_gguf_hf_weights_map,
    )

    if out_type not in OUT_TYPES:
        raise ValueError(f"GGUF export: out type must be one of {', '.join(OUT_TYPES)}, got {out_type!r}")
    base_gguf, out = Path(base_gguf), Path(out)
    reader = GGUFReader(str(base_gguf))
    arch = reader.fields["general.architecture"].contents()
    state, model = _state_dict(model)
    layout = _to_gguf_layout(arch, model.config)
    processor = TENSOR_PROCESSORS.get(arch, TensorProcessor)(config=model.config.to_dict())
    gguf_to_hf = get_gguf_hf_weights_map(model, processor)

    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        writer = GGUFWriter(str(tmp), arch)
        if "general.alignment" in reader.fields:
            alignment = int(reader.fields["general.alignment"].contents())
            writer.data_alignment = alignment
            writer.add_custom_alignment(alignment)
        _copy_metadata(reader, writer)
        dense: OutType = "f16" if out_type == "q8_0" else out_type  # q8_0: written as f16, then quantized
        writer.add_file_type(_file_type(dense))
        written: set[str] = set()
        for tensor in reader.tensors:
            hf_name = gguf_to_hf.get(tensor.name)
            if hf_name is None or hf_name not in state:
                raise ValueError(f"GGUF export: base tensor {tensor.name!r} of {base_gguf.name} has no trained "
                               f"counterpart in the model (mapped to {hf_name!r}); is this the student's base GGUF?")
            weights = state[hf_name].numpy()
            expected = tuple(int(n) for n in reversed(tensor.shape))  # GGUF lists dimensions innermost first
            if weights.shape != expected:
                raise ValueError(f"GGUF export: {hf_name} has shape {tuple(weights.shape)} but base tensor "
                                 f"{tensor.name} has {expected}; the model is not this base's architecture")
            writer.add_tensor(tensor.name, _encode(layout(tensor.name, weights), dense))
            written.add(hf_name)
        _check_all_written(model, state, written)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        if out_type == "q8_0":
            quantized = tmp.with_name(tmp.name + f".{out_type}")
            try:
                quantize_gguf(tmp, quantized, out_type)
                os.replace(quantized, tmp)
            finally:
                quantized.unlink(missing_ok=True)
        os.chmod(tmp, 0o644)  # mkstemp made it owner-only; a model file is meant to be read by the serving user
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out


def _check_all_written(model: Any, state: dict[str, Any], written: set[str]) -> None:
    """Every trained weight must land in the file; a tied output head shares the embedding's tensor."""
    tied = {"lm_head.weight"} if getattr(model.config, "tie_word_embeddings", False) else set()
    left = sorted(set(state) - written - tied)
    if left:
        raise ValueError(f"GGUF export: {len(left)} trained weights have no tensor in the base GGUF "
                         f"(first: {', '.join(left[:3])}); the export would drop them")


def base_of_checkpoint(checkpoint: Path, *, models_dir: Path | None = None) -> Path:
    """The GGUF a checkpoint descends from: the run directory's config (`request.model`) names the student it
    started from; an embedded name resolves to its GGUF, a checkpoint path is followed up its own run."""
    from worldsmith.training.models import embedded_gguf

    seen: set[Path] = set()
    current = Path(checkpoint).resolve()
    while current not in seen:
        seen.add(current)
        config = current.parent / "config.json"
        if not config.is_file():
            break
        model = json.loads(config.read_text(encoding="utf-8")).get("request", {}).get("model", "")
        gguf = embedded_gguf(model, models_dir) if model else None
        if gguf is not None:
            return gguf
        if not model or not Path(model).exists():
            break
        current = Path(model).resolve()
    raise FileNotFoundError(f"GGUF export: cannot tell which GGUF {checkpoint} was trained from (its run's "
                            "config.json does not lead to an embedded model); pass --base NAME_OR_GGUF")


def resolve_base(base: str | None, checkpoint: Path, *, models_dir: Path | None = None) -> Path:
    """`base` as an embedded model name or a GGUF path; None: found from the checkpoint's run."""
    from worldsmith.training.models import embedded_gguf

    if base is None:
        return base_of_checkpoint(checkpoint, models_dir=models_dir)
    gguf = embedded_gguf(base, models_dir)
    if gguf is not None:
        return gguf
    if Path(base).is_file():
        return Path(base)
    raise FileNotFoundError(f"GGUF export: --base {base!r} is neither an embedded model name nor a GGUF file")


def export_checkpoint(checkpoint: Path, *, out: Path, base: str | None = None, out_type: OutType = "f16",
                      models_dir: Path | None = None) -> Path:
    """Load a saved checkpoint (a LoRA adapter folder is merged into its base model first) and export it."""
    from transformers import AutoModelForCausalLM

    checkpoint = Path(checkpoint)
    if not checkpoint.is_dir():
        raise FileNotFoundError(f"GGUF export: checkpoint {checkpoint} is not a folder")
    base_gguf = resolve_base(base, checkpoint, models_dir=models_dir)
    if (checkpoint / "adapter_config.json").is_file():
        from peft import AutoPeftModelForCausalLM

        model = AutoPeftModelForCausalLM.from_pretrained(str(checkpoint)).merge_and_unload()
    else:
        model = AutoModelForCausalLM.from_pretrained(str(checkpoint))
    return export_gguf(model, base_gguf=base_gguf, out=out, out_type=out_type)
