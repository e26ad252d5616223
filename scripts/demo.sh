#!/usr/bin/env bash
# The main job on the embedded default model, end to end and offline:
# a world (contract → files → audit) → tasks with verified reference solutions → the analyst solves two of them
# → evaluation report. Everything lands under runs/demo-<stamp>/.
set -euo pipefail
cd "$(dirname "$0")/.."
WS=.venv/bin/worldsmith
OUT="runs/demo-$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"
echo "== 1/4 world: generate and audit ($OUT/world)"
$WS world new "$OUT/world" --topic "customer churn" --seed 7 --rows 20000   # → the customer_pricing template
$WS world audit "$OUT/world" > "$OUT/audit.txt" && tail -n 1 "$OUT/audit.txt"
echo "== 2/4 tasks: stakeholder requests, rubrics, reference solutions verified in the sandbox"
$WS world tasks "$OUT/world" --out "$OUT/tasks" --max-tasks 4 --topic "customer churn"
echo "== 3/4 analyst: one question about one of the world's files"
$WS ask "What is the average price for each plan tier in crm.csv?" "$OUT/world/data/crm.csv"
echo "== 4/4 eval: the analyst on the first generated task (multi-file, with data defects: hard for a 1.5B model)"
$WS eval --tasks "$OUT/tasks" --limit 1
echo "done: see $OUT and the run directories under runs/"
