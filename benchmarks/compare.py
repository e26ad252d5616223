"""Side by side: the DABench dev share and the generated benchmark (or any benchmarks), with their spread.

Each argument is a summary JSON (`--out` of dabench_dev.py / generated_bench.py) or an eval run directory.
Runs of the same benchmark (other seeds or thread counts) are pooled into one row: accuracy over all their
question-runs with a Wilson 95% interval, and the min-max of the runs' accuracies. Rows keep the order in
which benchmarks first appear; the gap line is first − second (put the dev share first).

    python benchmarks/compare.py dev.json gen.json [dev-threads1.json gen-threads1.json ...] [--md out.md]
        [--by-files benchmarks/data/generated-v2/tasks.jsonl]

--by-files splits the questions of that task set into those whose answer needs one data file (as a DABench
question does) and those that need several (a join, parts of one table), pooled the same way, with the first
benchmark's gap to each: how much of the gap is the task set's harder shape.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from worldsmith.core.store import atomic_write_text
from worldsmith.training.bench_summary import compare_table, file_strata, load_summary


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", type=Path, help="summary JSON files or eval run directories")
    ap.add_argument("--md", type=Path, default=None, help="also write the table to this Markdown file")
    ap.add_argument("--by-files", type=Path, default=None, metavar="TASKS_JSONL",
                    help="split that task set's questions by the number of data files their answers need")
    args = ap.parse_args(argv)
    if args.by_files is not None and not args.by_files.is_file():
        ap.error(f"--by-files {args.by_files}: no such file (the task set's tasks.jsonl, e.g. "
                 "benchmarks/data/generated-v2/tasks.jsonl)")
    groups: dict[str, list[dict]] = {}
    for path in args.results:
        s = load_summary(path)
        groups.setdefault(s["benchmark"], []).append(s)
    table = compare_table(list(groups.values()), file_strata(args.by_files) if args.by_files else None)
    print(table)
    if args.md:
        atomic_write_text(args.md, table + "\n")
    return table


if __name__ == "__main__":
    main()
