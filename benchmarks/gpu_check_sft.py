"""GPU check of the SFT half: bf16 autodetect, a tiny SFT run, a SmolLM2-shaped random model's step time, tokens/s and
peak memory, LoRA, and the `hf` provider generating on cuda from the saved checkpoint. Prints one `RESULT {json}` line.
Run through benchmarks/gpu_check_sft.sh (it installs the carried wheels the GPU machine lacks). SMALL=1 shrinks it."""
import os, asyncio, json, math, tempfile
from pathlib import Path
import torch
print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
import transformers, trl, peft
print("transformers", transformers.__version__, "trl", trl.__version__, "peft", peft.__version__)
from worldsmith.core.runs import RunDir
from worldsmith.core.schemas import Action, Step, Trajectory
from worldsmith.training.data import DataConfig, build_sft_dataset
from worldsmith.training.models import tiny_model, tiny_tokenizer
from worldsmith.training.sft import SFTRunConfig, train_sft, _use_bf16

def oracle(i, rep=1):
    code = "\n".join(f"df{i}_{k} = pd.read_csv('t.csv')\nprint(df{i}_{k}['a'].sum())" for k in range(rep))
    return Trajectory(id=f"o{i}", task_id=f"t{i}", model="ref", label="oracle", user_prompt=f"What is the sum of a in t{i}.csv?" * rep,
        status="answered", final_answer=f"@x[{i}]", metadata={"group": f"g{i % 4}"},
        steps=[Step(index=0, thought="Load and sum." * rep, action=Action(kind="code", content=code), observation=str(i)),
               Step(index=1, thought="done", action=Action(kind="answer", content=f"@x[{i}]"))])

out = {}
tmp = Path(tempfile.mkdtemp())
tok = tiny_tokenizer()
out["bf16_auto"] = _use_bf16(SFTRunConfig())
data = build_sft_dataset([oracle(i) for i in range(8)], tok, config=DataConfig(validation_fraction=0.25))
r = train_sft(data, tiny_model(tok), tok, SFTRunConfig(max_steps=3, lr=1e-3), RunDir.create("sft", tmp), model_name="tiny")
out["tiny"] = {k: r.summary[k] for k in ("steps", "final_loss", "eval_loss", "seconds_per_step")}
assert math.isfinite(r.summary["final_loss"]) and (r.checkpoint / "model.safetensors").is_file()

from transformers import LlamaConfig, LlamaForCausalLM
cfg = LlamaConfig(vocab_size=len(tok), hidden_size=576, intermediate_size=1536, num_hidden_layers=2 if os.environ.get("SMALL") else 30, num_attention_heads=9,
                  num_key_value_heads=3, max_position_embeddings=8192, tie_word_embeddings=True,
                  eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
torch.manual_seed(0)
big = LlamaForCausalLM(cfg)
out["smol_shape_params_M"] = round(sum(p.numel() for p in big.parameters()) / 1e6, 1)
data = build_sft_dataset([oracle(i, rep=6) for i in range(64)], tok, config=DataConfig(validation_fraction=0, max_tokens=4096))
out["smol_shape_tokens_per_example"] = sum(data.train["n_tokens"]) / data.train.num_rows
torch.cuda.reset_peak_memory_stats() if torch.cuda.is_available() else None
r = train_sft(data, big, tok, SFTRunConfig(max_steps=2 if os.environ.get("SMALL") else 10, batch_size=8, lr=1e-4), RunDir.create("sft", tmp), model_name="smol-shape")
s = r.summary
out["smol_shape"] = {k: s[k] for k in ("steps", "final_loss", "seconds_per_step")}
out["smol_shape"]["tokens_per_s"] = round(8 * out["smol_shape_tokens_per_example"] / s["seconds_per_step"])
if torch.cuda.is_available():
    out["smol_shape"]["peak_mem_GiB"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
r = train_sft(build_sft_dataset([oracle(i) for i in range(8)], tok, config=DataConfig(validation_fraction=0)), tiny_model(tok), tok,
              SFTRunConfig(max_steps=3, lora=True, lr=1e-2, lora_r=4), RunDir.create("sft", tmp), model_name="lora")
out["lora"] = {"final_loss": r.summary["final_loss"], "merged": (r.checkpoint / "model.safetensors").is_file()
               and not (r.checkpoint / "adapter_config.json").exists()}
try:
    from worldsmith.llm.config import EndpointConfig
    from worldsmith.llm.providers.hf import HFProvider, load_checkpoint
    from worldsmith.llm.types import ProviderRequest
    p = HFProvider(EndpointConfig(provider="hf", model=str(r.checkpoint)), key_path=lambda a, b: f"{a}.{b}", models_dir=tmp)
    res = asyncio.run(p.acomplete(ProviderRequest(messages=[{"role": "user", "content": "hi"}], role="agent", max_tokens=16, temperature=0.0, stop=["</code>"])))
    out["hf_provider"] = {"device": str(load_checkpoint(str(r.checkpoint)).model.device), "finish": res.finish_reason, "tokens": res.completion_tokens}
except Exception as exc:  # report, do not hide
    out["hf_provider"] = f"{type(exc).__name__}: {exc}"
print("RESULT " + json.dumps(out))
