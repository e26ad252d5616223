"""Side by side: the DABench dev share and the generated benchmark (or any benchmarks), with their spread.

Each argument is a summary JSON (`--out` of dabench_dev.py / generated_bench.py) or an eval run directory.
Runs of the same benchmark (other seeds or thread counts) are pooled into one row: accuracy over all their
question-runs with a Wilson 95% interval, and the min-max of the runs' accuracies. Rows keep the order in
which benchmarks first appear; the gap line is first − second (put the dev share first).

    python benchmarks/compare.py dev.json gen.json [dev-threads1.json gen-threads1.json ...] [--md out.md]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from worldsmith.core.store import atomic_write_text
from worldsmith.training.bench_summary import compare_table, load_summary


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", type=Path, help="summary JSON files or eval run directories")
    ap.add_argument("--md", type=Path, default=None, help="also write the table to this Markdown file")
    args = ap.parse_args(argv)
    groups: dict[str, list[dict]] = {}
    for path in args.results:
        s = load_summary(path)
        groups.setdefault(s["benchmark"], []).append(s)
    table = compare_table(list(groups.values()))
    print(table)
    if args.md:
        atomic_write_text(args.md, table + "\n")
    return table


if __name__ == "__main__":
    main()
