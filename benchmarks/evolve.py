"""Workspace-evolution benchmark (issue 13, item 10).

Default (fake endpoint): the whole evolution graph against the fake OpenAI-compatible server answering every agent
(the scripted player of tests/evolution/evolve_kit.py) at a fixed latency per request, so the figures measure the
orchestration: nodes per hour and tokens per verified finding, sequential branches (concurrency 1) against
concurrent ones (--concurrency, default 3) over the same plan, median of --repeats runs, ratio in the same run.
Then the snapshot cost of a --snapshot-mb workspace (benchmarks/snapshot_cost.py's function; 0 skips it).

--embedded: the real thing on the embedded default model over a world's data room (built from a template):
evolution for --steps rounds, then backward synthesis of --tasks tasks with --samples teacher trajectories each;
prints verified-finding precision against the world's canonical truth, planted-effect recall, the validator's
verdict mix and the pass rate by evolution depth. Slow on 2 cores: the lead runs it.

    python benchmarks/evolve.py [--latency 0.05] [--repeats 3] [--concurrency 3] [--snapshot-mb 100]
    python benchmarks/evolve.py --embedded [--domain commercial_growth --rows 2000 --steps 2 --tasks 4 --samples 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from tests.evolution.evolve_kit import Player, make_data
from tests.fakes.fake_openai import FakeOpenAI
from worldsmith.app.evolve import run_evolution
from worldsmith.core.config import Settings
from worldsmith.core.evolution_schemas import EvolveBudget, EvolveConfig
from worldsmith.core.sandbox_config import SandboxConfig
from worldsmith.graphs.runtime import GraphRuntime
from worldsmith.llm import LLM, LLMConfig
from worldsmith.llm.providers.scripted import ScriptedRequest

QUESTIONS = [
    "Which region has the largest total amount?", "How many units does each sale carry on average?",
    "Is there a sale whose amount is an outlier?", "Do units and amount move together?",
    "What share of revenue comes from the east?", "How concentrated are sales across regions?",
    "Is the median sale below the mean sale?", "Which region sells the fewest units?",
    "How wide is the spread of sale amounts?",
]


def _plan(rounds: int, per_round: int) -> list[tuple[str, Any]]:
    qs = iter(QUESTIONS * 4)
    return [("expand", [("deepen", next(qs)) for _ in range(per_round)]) for _ in range(rounds)]


def _responder(player: Player):
    def answer(body: dict[str, Any]) -> str:
        req = ScriptedRequest(role="", messages=[{"role": m["role"], "content": str(m.get("content") or "")}
                                                 for m in body.get("messages", [])],
                              max_tokens=int(body.get("max_tokens") or 0), temperature=0.0, stop=[], schema=None,
                              seed=None)
        out = player(req)
        return out if isinstance(out, str) else json.dumps(out)
    return answer


async def fake_run(latency: float, concurrency: int, rounds: int, per_round: int, base: Path) -> dict[str, Any]:
    fake = FakeOpenAI(latency_s=latency).start()
    try:
        fake.responder = _responder(Player(_plan(rounds, per_round)))
        llm = LLM(LLMConfig(default=fake.endpoint(timeout_s=60.0), cache=False,
                            roles={"embed": {"provider": "scripted", "model": "bench-embed",
                                             "extra_body": {"embed_dim": 64}}}), home=base / "home")
        settings = Settings(runs_dir=base / "runs", home=base / "home",
                            sandbox=SandboxConfig(backend="process", preload=[], timeout_s=60, kill_grace_s=1.0))
        rt = GraphRuntime.from_settings(settings, llm=llm)
        cfg = EvolveConfig(budget=EvolveBudget(steps=rounds, max_depth=rounds + 1, max_nodes=rounds * per_round),
                           directions=per_round, concurrency=concurrency)
        t0 = time.perf_counter()
        _, s = await run_evolution(rt, make_data(base / "data"), config=cfg, out=base / "run")
        wall = time.perf_counter() - t0
        llm.close()
        return {"wall_s": wall, "nodes": s.nodes, "verified": s.verified, "tokens": s.tokens,
                "requests": fake.request_count, "max_in_flight": fake.max_in_flight,
                "nodes_per_hour": s.nodes / wall * 3600, "tokens_per_verified": s.tokens_per_verified}
    finally:
        fake.close()


def fake_benchmark(args: argparse.Namespace) -> None:
    print(f"workload: {args.rounds} director rounds x {args.per_round} deepen directions = "
          f"{args.rounds * args.per_round} nodes; fake endpoint latency {args.latency * 1000:.0f} ms/request; "
          f"process sandbox; median of {args.repeats} runs")
    results: dict[int, list[dict[str, Any]]] = {}
    for c in (1, args.concurrency):
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory(prefix="bench-evolve-") as tmp:
                results.setdefault(c, []).append(asyncio.run(fake_run(args.latency, c, args.rounds, args.per_round,
                                                                      Path(tmp))))
    med = {c: {k: statistics.median(r[k] for r in rs) for k in ("wall_s", "nodes_per_hour", "nodes", "verified",
                                                               "tokens", "requests", "max_in_flight")}
           | {"tokens_per_verified": statistics.median(r["tokens_per_verified"] or 0 for r in rs)}
           for c, rs in results.items()}
    print("| branches | wall (s) | nodes | verified | nodes/hour | tokens/verified | requests | max in flight |")
    print("|---|---|---|---|---|---|---|---|")
    for c, m in med.items():
        label = "sequential (1)" if c == 1 else f"concurrent ({c})"
        print(f"| {label} | {m['wall_s']:.1f} | {m['nodes']:.0f} | {m['verified']:.0f} | {m['nodes_per_hour']:.0f} "
              f"| {m['tokens_per_verified']:.0f} | {m['requests']:.0f} | {m['max_in_flight']:.0f} |")
    if args.concurrency != 1:
        print(f"concurrent / sequential throughput: x{med[args.concurrency]['nodes_per_hour'] / med[1]['nodes_per_hour']:.2f}")
    if args.snapshot_mb:
        from snapshot_cost import snapshot_cost

        cost = snapshot_cost(size_mb=args.snapshot_mb, repeats=3)
        print(f"snapshot cost ({args.snapshot_mb} MB workspace): {json.dumps(cost, default=str)}")


async def embedded_run(args: argparse.Namespace) -> None:
    from worldsmith.app.evolve_tasks import synthesize_tasks
    from worldsmith.app.runtime import make_runtime
    from worldsmith.core.config import load_settings
    from worldsmith.evolution.worlds import build_world, load_template

    base = Path(args.out or tempfile.mkdtemp(prefix="bench-evolve-embedded-"))
    world = base / "world"
    if not (world / "contract.json").is_file():
        build_world(load_template(args.domain, rows=args.rows), seed=args.seed, out_dir=world, produced_by="benchmark")
    rt = make_runtime(load_settings())
    cfg = EvolveConfig(budget=EvolveBudget(steps=args.steps, max_depth=3, max_nodes=2 * args.steps), directions=2,
                       concurrency=1)
    t0 = time.perf_counter()
    run, s = await run_evolution(rt, world, config=cfg, out=base / "run")
    evolve_s = time.perf_counter() - t0
    print(f"world {args.domain} (rows {args.rows}, seed {args.seed}); run {run.path}; {evolve_s:.0f} s")
    print(f"nodes {s.nodes}, verified {s.verified}, verdict mix {s.status_counts}, tokens {s.tokens} "
          f"({s.tokens_per_verified} per verified finding), stop: {s.stop}")
    if s.truth is not None:
        t = s.truth
        print(f"precision {t.precision if t.precision is None else f'{t.precision:.0%}'} ({t.correct} correct, "
              f"{t.wrong} wrong, {t.unchecked} unchecked); recall {t.recall if t.recall is None else f'{t.recall:.0%}'} "
              f"({', '.join(t.rediscovered) or 'none'} of {t.planted})")
    if args.tasks and s.verified:
        made = await synthesize_tasks(rt, run.path, n=args.tasks, samples=args.samples)
        written = [o for o in made.outcomes if o.status == "written"]
        print(f"tasks written {len(written)} of {len(made.outcomes)}; pass rate by depth {made.pass_rate_by_depth}")
        for o in made.outcomes:
            print(f"  node {o.node} depth {o.depth}: {o.status} {o.kind or ''} {o.reason[:160]}")
        for node, earlier in made.restated.items():
            print(f"  node {node}: no task, restates the numbers of {earlier}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.05, help="fake endpoint latency per request, seconds")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=3, help="branches at once in the concurrent runs")
    ap.add_argument("--rounds", type=int, default=2, help="director rounds (fake runs)")
    ap.add_argument("--per-round", type=int, default=3, help="directions per round (fake runs)")
    ap.add_argument("--snapshot-mb", type=int, default=100, help="workspace size for the snapshot cost; 0 skips")
    ap.add_argument("--embedded", action="store_true", help="run on the embedded model over a world data room")
    ap.add_argument("--domain", default="commercial_growth")
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--out", default=None, help="folder for the embedded run (default: a temporary one)")
    args = ap.parse_args()
    if args.embedded:
        asyncio.run(embedded_run(args))
    else:
        fake_benchmark(args)


if __name__ == "__main__":
    main()
