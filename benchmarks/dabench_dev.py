"""DABench dev share (65 questions, read in place) with the analyst on an embedded model.

Prints the workload, the three official accuracies over ALL questions (unanswered = wrong), pass@1 per level,
and the median wall time per question. Reference point (not re-measured here, it costs a second full run):
a crude ReAct loop without few-shot, format help or error recovery solved 3/12 of the first questions (25%)
on the same model (DESIGN.md).

    python benchmarks/dabench_dev.py [--model qwen2.5-coder-1.5b] [--max-turns 6] [--limit N] [--samples 1]
                                     [--threads N] [--out summary.json] [--resume RUN_DIR] [--cache]

Turns default to 6, not the analyst's 10: on 2 CPU cores a question that never converges costs ~25 s a turn,
and few right answers come after the fourth turn (the README gives the turn histogram of the last full run). The LLM response cache is off unless --cache, so
the times are real generation times. --out writes the run's summary (accuracy, Wilson interval inputs, times,
guard counts) for benchmarks/compare.py, which sets it beside benchmarks/generated_bench.py's.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import Counter
from pathlib import Path

from worldsmith.app.eval import evaluate_path
from worldsmith.app.runtime import make_runtime
from worldsmith.commands.evaluate import progress_reporter
from worldsmith.core.config import load_settings
from worldsmith.core.schemas import Trajectory
from worldsmith.training.bench_summary import summary_from_run_dir, write_summary
from worldsmith.training.evaluate import primary_grade

DABENCH = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "dabench-dev"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--data", type=Path, default=DABENCH)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--resume", type=Path, default=None)
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp CPU threads (default: every CPU)")
    ap.add_argument("--out", type=Path, default=None, help="write the summary JSON here (for compare.py)")
    ap.add_argument("--cache", action="store_true", help="reuse cached LLM responses (times are then not real)")
    args = ap.parse_args()
    default = {"provider": "embedded", "model": args.model, **({"n_threads": args.threads} if args.threads else {})}
    settings = load_settings(overrides={"llm": {"default": default, "cache": args.cache},
                                        "analyst": {"max_turns": args.max_turns}})
    rt = make_runtime(settings)
    t0 = time.monotonic()
    progress, on_progress = progress_reporter(show=True)
    with progress:
        result = asyncio.run(evaluate_path(rt, args.data, samples=args.samples, limit=args.limit,
                                           run_path=args.resume, progress=on_progress))
    wall = time.monotonic() - t0
    run = Path(result["run_dir"])
    trajs = [Trajectory.model_validate_json(p.read_text()) for p in (run / "trajectories").rglob("*.json")]
    times = [t.time_s for t in trajs]
    right_turns = Counter(len(t.steps) for t in trajs if (g := primary_grade(t)) is not None and g.passed)
    o = result["overall"]
    print(f"workload: {o['n_tasks']} DABench dev questions × {o['samples']} sample(s), model {args.model}, "
          f"{settings.analyst.max_turns} turns max")
    print(f"{o['n_empty']} empty responses; official denominators leave them out, conservative ones count them wrong")
    print("                         official  conservative")
    for key, label in (("accuracy_by_question", "accuracy by question"),
                       ("accuracy_by_sub_question", "accuracy by sub-question"),
                       ("proportional_accuracy", "proportional accuracy")):
        print(f"{label:<25}{o['official_' + key]:>8.1%}  {o[key]:>12.1%}")
    print(f"pass@1                   {o['pass_at_1']:.1%}")
    for level, m in sorted(result["by_level"].items()):
        print(f"  {level:<7} pass@1 {m['pass_at_1']:.1%} over {m['n_tasks']} questions")
    if times:
        print(f"time per question: median {statistics.median(times):.1f} s (wall for the run {wall / 60:.1f} min)")
    print("turns taken by right answers: " + ", ".join(f"{k}: {v}" for k, v in sorted(right_turns.items())))
    guards = ", ".join(f"{kind} {t['fired']} (re-asked {t['reasked']}, in {t['trajectories']} trajectories)"
                       for kind, t in o.get("guards", {}).items())
    print(f"answer guards: {guards or 'none fired'}; unsupported answers (graded wrong): {o.get('n_unsupported', 0)}")
    print(f"report: {result['report']}")
    if args.out:
        summary = summary_from_run_dir(run, benchmark="dabench-dev", model=args.model, threads=args.threads,
                                       max_turns=settings.analyst.max_turns)
        write_summary(args.out, summary)
        print(f"summary: {args.out}")


if __name__ == "__main__":
    main()
