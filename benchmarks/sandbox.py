"""Sandbox benchmark: cold start, warm-cell latency, a 1M-row groupby, concurrent sessions, idle memory.

Compared in the same run against: the bare persistent worker without isolation (`process` backend: the floor),
a new Python process per cell (`python -c`), and a Jupyter kernel (jupyter_client + ipykernel).

    python benchmarks/sandbox.py            # full run (a few minutes on 2 cores)
    python benchmarks/sandbox.py --quick    # fewer repetitions
    python benchmarks/sandbox.py --pool-only  # only: time to a ready session with and without SandboxPool

Prints medians and ratios against the floor; targets from the sandbox brief are shown next to the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from worldsmith.tools.sandbox import SandboxConfig, SandboxPool, open_sandbox  # noqa: E402

GROUPBY_SETUP = ("import numpy as np, pandas as pd\nrng = np.random.default_rng(0)\n"
                 "df = pd.DataFrame({'k': rng.integers(0, 1000, 1_000_000), 'v': rng.random(1_000_000)})")
GROUPBY = "g = df.groupby('k')['v'].sum()"


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def tree_memory(pid: int) -> tuple[int, int]:
    """(rss, uss) summed over a process tree, bytes."""
    root = psutil.Process(pid)
    rss = uss = 0
    for p in [root, *root.children(recursive=True)]:
        try:
            info = p.memory_full_info()
            rss, uss = rss + info.rss, uss + info.uss
        except psutil.Error:
            continue
    return rss, uss


# ---- worker sandboxes (local = bubblewrap, process = floor) ------------------------------------------------
async def sandbox_suite(backend: str, reps: int, cells: int, **overrides: Any) -> dict[str, Any]:
    cfg = SandboxConfig(backend=backend, timeout_s=120, **overrides)  # type: ignore[arg-type]
    cold = []
    for _ in range(reps):
        t = time.perf_counter()
        async with open_sandbox(cfg) as sb:
            r = await sb.run("import pandas")
            cold.append(time.perf_counter() - t)
            assert r.ok, r.to_observation()
    out: dict[str, Any] = {"cold": cold}
    async with open_sandbox(cfg) as sb:
        await sb.run("x = 0")
        await asyncio.sleep(0.5)
        worker = getattr(sb, "_worker")
        out["rss"], out["uss"] = tree_memory(worker.pid)
        lat = []
        for _ in range(cells):
            t = time.perf_counter()
            await sb.run("x = x + 1")
            lat.append(time.perf_counter() - t)
        out["warm"] = lat
        assert (await sb.run("x")).stdout.strip() == str(cells)
        await sb.run(GROUPBY_SETUP, timeout=120)
        gb = []
        for _ in range(max(3, reps)):
            t = time.perf_counter()
            r = await sb.run(GROUPBY, timeout=120)
            gb.append(time.perf_counter() - t)
            assert r.ok, r.to_observation()
        out["groupby"] = gb
    if overrides.get("preload") == []:
        return out
    async with open_sandbox(cfg, mode="replay") as sb:  # each cell: fresh process + silent replay of history
        rl = []
        for i in range(reps + 3):
            await asyncio.sleep(3.0)  # the agent's turn; the prespawned interpreter gets ready meanwhile
            t = time.perf_counter()
            r = await sb.run(f"import pandas as pd\nv{i} = {i}")
            if i >= 3:  # from the 4th cell on, three earlier cells are replayed first
                rl.append(time.perf_counter() - t)
            assert r.ok, r.to_observation()
        out["replay"] = rl
    return out


async def concurrent(backend: str, n: int) -> dict[str, Any]:
    cfg = SandboxConfig(backend=backend, timeout_s=120, start_timeout_s=300)  # type: ignore[arg-type]
    failures = 0
    t = time.perf_counter()

    async def session(i: int) -> bool:
        async with open_sandbox(cfg) as sb:
            ok = True
            for code in (f"import pandas as pd\ndf = pd.DataFrame({{'a': range({1000 + i})}})", "s = df.a.sum()",
                         "print(s)"):
                r = await sb.run(code)
                ok = ok and r.ok
            return ok and r.stdout.strip() == str(sum(range(1000 + i)))

    results = await asyncio.gather(*(session(i) for i in range(n)), return_exceptions=True)
    for r in results:
        if r is not True:
            failures += 1
            if isinstance(r, BaseException):
                print(f"  session failed: {type(r).__name__}: {r}", file=sys.stderr)
    return {"wall": time.perf_counter() - t, "failures": failures}


# ---- baselines -------------------------------------------------------------------------------------------
def process_per_cell(reps: int, cells: int) -> dict[str, Any]:
    def run(code: str) -> float:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - t

    cold = [run("import pandas") for _ in range(reps)]
    warm = [run("x = 0\nx = x + 1") for _ in range(cells)]
    gb = [run(GROUPBY_SETUP + "\n" + GROUPBY) for _ in range(max(3, reps))]
    return {"cold": cold, "warm": warm, "groupby": gb, "rss": None, "uss": None}


def jupyter_suite(reps: int, cells: int) -> dict[str, Any] | None:
    try:
        from jupyter_client.manager import start_new_kernel
    except ImportError:
        return None

    def execute(kc: Any, code: str) -> float:
        t = time.perf_counter()
        reply = kc.execute_interactive(code, timeout=300, output_hook=lambda msg: None)
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"kernel error: {reply['content']}")
        return time.perf_counter() - t

    cold = []
    for _ in range(reps):
        t = time.perf_counter()
        km, kc = start_new_kernel(kernel_name="python3")
        execute(kc, "import pandas")
        cold.append(time.perf_counter() - t)
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        execute(kc, "import pandas\nx = 0")  # idle with pandas imported, like a sandbox session
        time.sleep(0.5)
        rss, uss = tree_memory(km.provisioner.process.pid)  # type: ignore[union-attr]
        warm = [execute(kc, "x = x + 1") for _ in range(cells)]
        execute(kc, GROUPBY_SETUP)
        gb = [execute(kc, GROUPBY) for _ in range(max(3, reps))]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return {"cold": cold, "warm": warm, "groupby": gb, "rss": rss, "uss": uss}


# ---- fresh sessions for rollouts: on demand vs a warm pool --------------------------------------------------
async def ready_session_suite(backend: str, reps: int, input_file: Path) -> dict[str, list[float]]:
    """Seconds from asking for a fresh session (with one input file) to having run `import pandas` in it: started on
    demand, and handed out by a SandboxPool of `reps` warm sessions (a burst, as one RL step's rollouts ask)."""
    cfg = SandboxConfig(backend=backend, timeout_s=120)  # type: ignore[arg-type]
    cold = []
    for _ in range(reps):
        t = time.perf_counter()
        async with open_sandbox(cfg, inputs=[input_file]) as sb:
            assert (await sb.run("import pandas")).ok
            cold.append(time.perf_counter() - t)
    warm = []
    async with SandboxPool(cfg, size=reps) as pool:
        await pool.wait_ready()
        for _ in range(reps):
            t = time.perf_counter()
            sb = await pool.acquire([input_file])
            assert (await sb.run("import pandas")).ok
            warm.append(time.perf_counter() - t)
            await pool.release(sb)
    return {"on demand": cold, "pool": warm}


def print_ready_sessions(results: dict[str, dict[str, list[float]]]) -> None:
    for backend, res in results.items():
        cold, warm = statistics.median(res["on demand"]), statistics.median(res["pool"])
        print(f"fresh session ready with pandas ({backend:<7}): on demand {cold:6.3f} s, from the pool {warm:6.3f} s "
              f"(median of {len(res['pool'])}; target <= 0.3 s)")


# ---- report ----------------------------------------------------------------------------------------------
def table(rows: dict[str, dict[str, Any]], floor: str) -> str:
    base = rows[floor]
    metrics: list[tuple[str, Callable[[dict[str, Any]], float | None], str]] = [
        ("cold start + 'import pandas' (s)", lambda d: statistics.median(d["cold"]), "<= 0.5 s"),
        ("warm cell x=x+1 p50 (ms)", lambda d: 1000 * statistics.median(d["warm"]), "<= 1 ms"),
        ("warm cell x=x+1 p90 (ms)", lambda d: 1000 * pct(d["warm"], 0.9), ""),
        ("groupby 1M rows (ms)", lambda d: 1000 * statistics.median(d["groupby"]), ""),
        ("replay-mode cell, 3 replayed (ms)",
         lambda d: 1000 * statistics.median(d["replay"]) if d.get("replay") else None, ""),
        ("idle session RSS (MB)", lambda d: d["rss"] / 1e6 if d["rss"] else None, "<= 100 MB"),
        ("idle session USS (MB)", lambda d: d["uss"] / 1e6 if d["uss"] else None, ""),
    ]
    names = list(rows)
    head = f"{'metric':<34}" + "".join(f"{n:>22}" for n in names) + "   target"
    lines = [head, "-" * len(head)]
    for label, fn, target in metrics:
        cells = []
        ref = fn(base)
        for n in names:
            v = fn(rows[n])
            if v is None:
                cells.append(f"{'n/a':>22}")
            else:
                ratio = f" ({v / ref:5.2f}x)" if ref else ""
                cells.append(f"{v:>13.3f}{ratio:>9}")
        lines.append(f"{label:<34}" + "".join(cells) + f"   {target}")
    lines.append(f"ratios are against '{floor}' (bare persistent worker, no isolation), measured in this run")
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--cells", type=int, default=300, help="warm cells per backend (>= 200 for p90)")
    parser.add_argument("--concurrency", type=int, nargs="*", default=[16, 32], help="concurrent session counts")
    parser.add_argument("--pool-only", action="store_true", help="only the fresh-session (pool) measurement")
    args = parser.parse_args()
    logging.getLogger("worldsmith.tools.sandbox").setLevel(logging.ERROR)  # the floor's per-session warning
    data = Path(__import__("tempfile").mkdtemp(prefix="bench-sandbox-")) / "sales.csv"
    data.write_text("region,amount\n" + "".join(f"r{i % 7},{i}\n" for i in range(1000)))
    ready = {b: await ready_session_suite(b, 3 if args.quick else 5, data) for b in ("local", "process")}
    print_ready_sessions(ready)
    if args.pool_only:
        return
    reps, cells = (3, 200) if args.quick else (7, args.cells)
    print(f"workload: cold start x{reps}, {cells} warm cells, 1M-row groupby x{max(3, reps)}, concurrency "
          f"{args.concurrency}; {psutil.cpu_count()} CPUs; python {sys.version.split()[0]}")
    rows: dict[str, dict[str, Any]] = {}
    rows["floor (process)"] = await sandbox_suite("process", reps, cells)
    rows["local (bwrap)"] = await sandbox_suite("local", reps, cells)
    rows["local, no preload"] = await sandbox_suite("local", reps, cells, preload=[])
    jup = await asyncio.to_thread(jupyter_suite, reps, cells)
    if jup is not None:
        rows["jupyter kernel"] = jup
    rows["process per cell"] = await asyncio.to_thread(process_per_cell, reps, max(20, cells // 10))
    print(table(rows, "floor (process)"))
    print()
    for n in args.concurrency:
        for backend in ("process", "local"):
            res = await concurrent(backend, n)
            print(f"{n:>3} concurrent {backend:<8} sessions (3 cells each, pandas): wall {res['wall']:6.1f} s, "
                  f"failures {res['failures']}/{n}   (target: 0 failures)")


if __name__ == "__main__":
    asyncio.run(main())
