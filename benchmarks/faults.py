"""Fault benchmark: an eval of 20 closed-form tasks against the fake OpenAI-compatible server with 20% of the
requests faulted, compared with the fault-free eval in the same process.

Tasks: a DABench-format folder written here (tests/fakes/tiny_dabench.py: "v in the row where k == i" over a
small CSV, answers known by construction). The fake server plays a competent analyst: a code turn that really runs
in the sandbox, then the answer. Faulted requests are chosen by a seeded hash of the request's index, each fault
one of five kinds in equal shares: 429 (no Retry-After, so the client's own backoff applies), 500, an HTTP 200 whose
body is not JSON, an empty completion (recorded, not retried: the analyst gets a void turn and goes on), and a short
hang below the request timeout (a slow answer). The analyst and the LLM client run with their default settings
(retries 4, backoff 0.5 s doubling with jitter, timeout 120 s, eval concurrency 1): nothing is tuned for this run.

Reports: completion (every task answered, or its failure recorded as an error trajectory), faults per kind (how
many were served, retried, given up on), empty completions, and the median wall time of the faulted runs against
the fault-free runs (interleaved in alternating order, `--reps` each), with their ratio. Target: every task completed or recorded, and
a ratio ≤ 1.5.

    python benchmarks/faults.py [--tasks 20] [--rate 0.2] [--reps 3] [--hang-s 1.0] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.fakes

from tests.fakes.fake_openai import Action, FakeOpenAI
from tests.fakes.tiny_dabench import analyst_responder, write_tiny_dabench
from worldsmith.app.eval import evaluate_path
from worldsmith.app.runtime import make_runtime
from worldsmith.core.config import load_settings

KINDS = ("rate_limit", "server", "invalid_json", "empty", "hang")


def fault_schedule(rate: float, seed: int, hang_s: float, served: Counter[str]) -> Callable[[int], Action | None]:
    """Request n → its fault (or None): a seeded hash, so a run is reproducible whatever the request order."""
    def pick(n: int) -> Action | None:
        h = hashlib.sha256(f"{seed}:{n}".encode()).digest()
        if int.from_bytes(h[:4], "big") / 2**32 >= rate:
            return None
        kind = KINDS[h[4] % len(KINDS)]
        served[kind] += 1
        return {"rate_limit": lambda: Action.rate_limit(retry_after=None),
                "server": lambda: Action.server_error(500),
                "invalid_json": lambda: Action.invalid_json(),
                "empty": lambda: Action.empty(),
                "hang": lambda: Action.hang(hang_s)}[kind]()
    return pick


def run_eval(fake: FakeOpenAI, bench: Path, runs: Path) -> tuple[float, dict[str, Any]]:
    settings = load_settings(overrides={
        "runs_dir": str(runs),
        "llm": {"cache": False, "default": {"provider": "openai", "model": "fake-model", "base_url": fake.base_url}},
    })
    rt = make_runtime(settings)
    t0 = time.perf_counter()
    try:
        result = asyncio.run(evaluate_path(rt, bench))
    finally:
        rt.llm.close()
    return time.perf_counter() - t0, result


def completion(result: dict[str, Any], n_tasks: int) -> tuple[int, int]:
    """(tasks answered, tasks whose failure is recorded as an error trajectory)."""
    run = Path(result["run_dir"])
    recorded = list((run / "trajectories").glob("*/0.json"))
    failed = result["counts"]["failed"]
    assert len(recorded) == n_tasks, f"{run}: {len(recorded)} trajectories for {n_tasks} tasks"
    return len(recorded) - failed, failed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--rate", type=float, default=0.2, help="share of requests faulted")
    ap.add_argument("--reps", type=int, default=3, help="runs of each kind (median reported)")
    ap.add_argument("--hang-s", type=float, default=1.0, help="the short hang (below the 120 s request timeout)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ws-faults-"))
    bench = write_tiny_dabench(work / "bench", n=args.tasks)
    clean_s: list[float] = []
    faulty_s: list[float] = []
    served: Counter[str] = Counter()
    retried: Counter[str] = Counter()
    gave_up: Counter[str] = Counter()
    empty = answered = recorded_failures = requests = 0
    accuracy: list[float] = []
    try:
        with FakeOpenAI() as fake:
            fake.responder = analyst_responder()
            run_eval(fake, write_tiny_dabench(work / "warm", n=1), work / "runs")  # imports, first sandbox
            for rep in range(args.reps):
                # interleaved, and in alternating order, so drift in machine load and what one run leaves
                # behind (sandbox processes still exiting) hit both kinds alike
                for faulted in ((False, True) if rep % 2 == 0 else (True, False)):
                    fake.reset()
                    fake.schedule = fault_schedule(args.rate, args.seed + rep, args.hang_s, served) if faulted else None
                    wall, result = run_eval(fake, bench, work / "runs")
                    print(f"rep {rep + 1}: {'faulted   ' if faulted else 'fault-free'} {wall:6.2f} s, "
                          f"{fake.request_count} requests, status {result['status']}", flush=True)
                    if not faulted:
                        assert result["status"] == "ok" and not result["llm_faults"], result["llm_faults"]
                        clean_s.append(wall)
                        continue
                    faulty_s.append(wall)
                    requests += fake.request_count
                    ok, failed = completion(result, args.tasks)
                    answered += ok
                    recorded_failures += failed
                    accuracy.append(result["overall"]["accuracy_by_question"])
                    agent = result["llm_faults"].get("agent", {})
                    retried.update(agent.get("retried", {}))
                    gave_up.update(agent.get("failed", {}))
                    empty += agent.get("empty_completions", 0)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    n = args.tasks * args.reps
    clean, faulty = statistics.median(clean_s), statistics.median(faulty_s)
    print(f"\nworkload: {args.tasks} tasks × {args.reps} runs, {args.rate:.0%} of requests faulted "
          f"(seeded), default client settings")
    print(f"completion: {answered}/{n} tasks answered, {recorded_failures}/{n} failures recorded "
          f"({answered + recorded_failures}/{n} accounted for); accuracy {statistics.mean(accuracy):.1%}")
    print(f"faults served: {sum(served.values())} of {requests} requests — "
          + ", ".join(f"{k} {served[k]}" for k in KINDS))
    print(f"retried: {sum(retried.values())} ({', '.join(f'{k} {v}' for k, v in sorted(retried.items())) or 'none'}); "
          f"given up: {sum(gave_up.values())} ({', '.join(f'{k} {v}' for k, v in sorted(gave_up.items())) or 'none'}); "
          f"empty completions recorded: {empty}")
    ratio = faulty / clean
    print(f"wall time (median of {args.reps}): fault-free {clean:.2f} s, faulted {faulty:.2f} s, "
          f"ratio {ratio:.2f}× (target ≤ 1.5×: {'met' if ratio <= 1.5 else 'NOT met'})")


if __name__ == "__main__":
    main()
