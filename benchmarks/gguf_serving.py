"""What a student's GGUF export type costs when llama.cpp serves it: prompt and decode speed, memory and size of the
same weights exported as f16 and as q8_0 (`worldsmith train export --out-type`), and whether greedy text agrees.

    python benchmarks/gguf_serving.py                                   # the untrained Qwen2.5-Coder-0.5B
    python benchmarks/gguf_serving.py --student smollm2-135m --repeats 3

The student is loaded by transformers from its embedded GGUF and exported both ways with `training/export.py`, as
`benchmarks/student.py` exports its base (so the two files differ only in tensor type). Each file is then loaded by
llama.cpp (`n_threads` = every core) and one chat prompt (the analyst's system prompt and a task turn, about 2,300
tokens for Qwen2.5) is timed: prompt processing (a 1-token completion on a fresh cache) and decoding
(`--new-tokens` greedy tokens, the prompt time taken out). Medians of `--repeats`. The last column is the position
of the first greedy token where q8_0's text leaves f16's (none: the same text).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]


def prompt_messages() -> list[dict[str, str]]:
    system = ROOT / "worldsmith" / "prompts" / "analyst_system.md"
    text = system.read_text(encoding="utf-8") if system.is_file() else ""
    task = (ROOT / "worldsmith" / "graphs" / "analyst.py").read_text(encoding="utf-8")[:6000]
    return [{"role": "system", "content": text or "You are a data analyst."},
            {"role": "user", "content": "Explain what this module does, then write pandas code that computes the "
                                        "mean of column `amount` in sales.csv.\n\n" + task}]


def export_both(student: str, out: Path) -> dict[str, Path]:
    from worldsmith.training.export import export_gguf
    from worldsmith.training.models import embedded_gguf, load_student

    files = {kind: out / f"{student}-{kind}.gguf" for kind in ("f16", "q8_0")}
    if all(p.is_file() for p in files.values()):
        return files
    model, _ = load_student(student)
    for kind, path in files.items():
        t0 = time.perf_counter()
        export_gguf(model, base_gguf=embedded_gguf(student, None), out=path, out_type=kind)  # type: ignore[arg-type]
        print(f"exported {path.name}: {path.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - t0:.1f} s",
              flush=True)
    return files


def measure(path: Path, messages: list[dict[str, str]], new_tokens: int, repeats: int) -> dict[str, Any]:
    import psutil
    from llama_cpp import Llama

    from worldsmith.llm.providers.embedded import default_threads

    rss0 = psutil.Process().memory_info().rss
    llm = Llama(model_path=str(path), n_ctx=8192, n_threads=default_threads(), n_threads_batch=default_threads(),
                verbose=False)
    prompt_s, decode_tps, text, prompt_tokens = [], [], [], 0
    try:
        for _ in range(repeats):
            llm.reset()
            t0 = time.perf_counter()
            first = llm.create_chat_completion(messages, max_tokens=1, temperature=0.0)
            prompt_s.append(time.perf_counter() - t0)
            prompt_tokens = first["usage"]["prompt_tokens"]
            llm.reset()
            t0 = time.perf_counter()
            out = llm.create_chat_completion(messages, max_tokens=new_tokens, temperature=0.0)
            elapsed = time.perf_counter() - t0
            generated = out["usage"]["completion_tokens"]
            decode_tps.append((generated - 1) / max(1e-9, elapsed - prompt_s[-1]))
            text = llm.tokenize(out["choices"][0]["message"]["content"].encode(), add_bos=False, special=False)
        rss = psutil.Process().memory_info().rss - rss0
    finally:
        llm.close()
    return {"bytes": path.stat().st_size, "prompt_tokens": prompt_tokens, "prompt_s": statistics.median(prompt_s),
            "decode_tps": statistics.median(decode_tps), "rss_mb": rss / 1e6, "tokens": text}


def first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--student", default="qwen2.5-coder-0.5b", help="an embedded model name")
    ap.add_argument("--out", type=Path, default=Path("runs/gguf-serving"), help="where the exports are kept")
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    files = export_both(a.student, a.out)
    messages = prompt_messages()
    rows = {kind: measure(path, messages, a.new_tokens, a.repeats) for kind, path in files.items()}
    base = rows["f16"]
    print(f"\n{a.student}, prompt {base['prompt_tokens']} tokens, {a.new_tokens} greedy tokens, median of "
          f"{a.repeats}\n")
    print("| export | MB | prompt s | decode tok/s | RSS MB | greedy text vs f16 |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for kind, r in rows.items():
        diff = first_difference(base["tokens"], r["tokens"])
        agree = "—" if kind == "f16" else ("same" if diff is None else f"leaves it at token {diff}")
        print(f"| {kind} | {r['bytes'] / 1e6:.0f} | {r['prompt_s']:.2f} | {r['decode_tps']:.1f} | {r['rss_mb']:.0f} "
              f"| {agree} |")
    q = rows["q8_0"]
    print(f"\nq8_0 / f16: prompt {base['prompt_s'] / q['prompt_s']:.2f}× faster, decode "
          f"{q['decode_tps'] / base['decode_tps']:.2f}× faster, {q['bytes'] / base['bytes']:.2f}× the bytes")


if __name__ == "__main__":
    main()
