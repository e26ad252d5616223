#!/usr/bin/env bash
# GPU check of the SFT half (see benchmarks/gpu_check_sft.py). The lent H200 lacks trl, datasets, dill, multiprocess,
# pydantic (+ pydantic-core, annotated-types, typing-inspection): carry their cp312 wheels in build/gpu-wheels
# (git-ignored), fetched as in benchmarks/gpu_check.sh's header with those names added. With the device tool:
#   run(command="bash benchmarks/gpu_check_sft.sh", carry=["build/gpu-wheels"])
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
missing=$("$PY" - <<'PY'
import importlib.util
need = {"trl": "trl", "datasets": "datasets", "dill": "dill", "multiprocess": "multiprocess", "pydantic": "pydantic",
        "pydantic_core": "pydantic_core", "annotated_types": "annotated_types", "typing_inspection": "typing_inspection",
        "matplotlib": "matplotlib", "contourpy": "contourpy", "cycler": "cycler", "fontTools": "fonttools",
        "kiwisolver": "kiwisolver", "pyparsing": "pyparsing", "PIL": "pillow"}
print(" ".join(d for m, d in need.items() if importlib.util.find_spec(m) is None))
PY
)
echo "missing: $missing"
if [ -n "$missing" ]; then
  "$PY" -m pip install --quiet --no-index --no-deps --find-links build/gpu-wheels --target build/gpu-site $missing
fi
export PYTHONPATH="$PWD/build/gpu-site:$PWD"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
"$PY" benchmarks/gpu_check_sft.py 2>&1 | grep -v "it/s\]\|examples/s\]\|Warning\|warnings.warn\|super().__init__"
