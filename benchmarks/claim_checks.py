"""The validator's deterministic claim checks, replayed over the verified findings of finished evolution runs.

For each verified node: what `claim_numbers.misreadings` (a change read the wrong way, a number put in the wrong
month), `claim_numbers.unnumbered_comparisons` (a comparison stated without a number), `validator.unread_columns` on the goal (a column the goal asks about that the script never reads),
`validator.outlier_clause` (rows dropped as outliers, unsaid) and `validator.unrecorded_issues` say of it today.
No model call: it shows which findings of an earlier run the current checks would have sent back or revised, and
that they leave the others alone.

    python benchmarks/claim_checks.py RUN_DIR [RUN_DIR ...]     # RUN_DIR/.. holds world/data (benchmarks/evolve.py --out)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from worldsmith.agents.validator import outlier_clause, unread_columns, unrecorded_issues  # noqa: E402
from worldsmith.app.evolve_tasks import open_store, read_node_run, read_result  # noqa: E402
from worldsmith.core.claim_numbers import misreadings, unnumbered_comparisons  # noqa: E402
from worldsmith.core.workspace_types import script_name  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="evolution run directories (benchmarks/evolve.py --out X: X/run)")
    args = ap.parse_args()
    fired = total = 0
    for run in args.runs:
        data = run.parent / "world" / "data"
        if not data.is_dir():
            print(f"{run}: no world data room at {data}", file=sys.stderr)
            return 2
        store, inputs = open_store(run), sorted(data.iterdir())
        for node in store.graph.nodes():
            if node.mode == "root" or not node.verified or (result := read_result(store, node.id)) is None:
                continue
            script = store.read_bytes(node.id, script_name(node.id)).decode("utf-8")
            nr = read_node_run(run, node.id)
            found = {"misread": misreadings(result.conclusion, result.numbers),
                     "comparison without numbers": unnumbered_comparisons(result.conclusion),
                     "goal column unread": unread_columns(nr.goal.goal if nr else node.goal, script, inputs),
                     "outliers unsaid": outlier_clause(node.conclusion, script),
                     "unrecorded": unrecorded_issues(result)}
            found = {k: v for k, v in found.items() if v}
            total += 1
            fired += bool(found)
            print(f"{run.parent.name} node {node.id}: {found or 'nothing'}  | {node.conclusion[:100]}")
    print(f"{fired} of {total} verified findings flagged")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
