"""Side by side: the DABench dev share and the generated benchmark (or any benchmarks), with their spread.

Each argument is a summary JSON (`--out` of dabench_dev.py / generated_bench.py) or an eval run directory.
Runs of the same benchmark (other seeds or thread counts) are pooled into one row: accuracy over all their
question-runs with a Wilson 95% interval, and the min-max of the runs' accuracies. Rows keep the order in
which benchmarks first appear; the gap line is first − second (put the dev share first).

    python benchmarks/compare.py dev.json gen.json [dev-threads1.json gen-threads1.json ...] [--md out.md]
        [--by-files benchmarks/data/generated-v4/tasks.jsonl]

--by-files splits the questions of that task set into those whose answer needs one data file (as a DABench
question does) and those that need several (a join, parts of one table), pooled the same way, with the first
benchmark's gap to each: how much of the gap is the task set's harder shape.

A run directory that stopped before its end (killed, or still running) counts the questions whose every sample is
graded, read against the task set it names (or --tasks DIR), and its row says "(run stopped)". --detail prints
each run's summary too; with several samples: the first sample alone, the vote, and any sample (pass@k):

    python benchmarks/compare.py RUN_DIR --detail
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from worldsmith.core.store import atomic_write_text
from worldsmith.training.bench_summary import compare_table, file_strata, load_summary, print_summary


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", type=Path, help="summary JSON files or eval run directories")
    ap.add_argument("--md", type=Path, default=None, help="also write the table to this Markdown file")
    ap.add_argument("--by-files", type=Path, default=None, metavar="TASKS_JSONL",
                    help="split that task set's questions by the number of data files their answers need")
    ap.add_argument("--tasks", type=Path, default=None, metavar="DIR",
                    help="the task set a stopped run directory is read against (default: the folder it names)")
    ap.add_argument("--detail", action="store_true", help="also print each run's own summary (levels, vote, times)")
    args = ap.parse_args(argv)
    if args.by_files is not None and not args.by_files.is_file():
        ap.error(f"--by-files {args.by_files}: no such file (the task set's tasks.jsonl, e.g. "
                 "benchmarks/data/generated-v4/tasks.jsonl)")
    groups: dict[str, list[dict]] = {}
    for path in args.results:
        s = load_summary(path, tasks=args.tasks)
        groups.setdefault(s["benchmark"], []).append(s)
        if args.detail:
            print_summary(s)
            print()
    table = compare_table(list(groups.values()), file_strata(args.by_files) if args.by_files else None)
    print(table)
    if args.md:
        atomic_write_text(args.md, table + "\n")
    return table


if __name__ == "__main__":
    main()
