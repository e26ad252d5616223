#!/usr/bin/env bash
# GPU check for the SFT+RL trainer: a few steps on a ~0.5B-shaped model, printing step time, tokens/s, peak memory.
#
# The lent GPU machine (checked 2026-11-30: Python 3.12 in /opt/torch/.venv, torch 2.11, transformers 5.17, peft 0.21,
# accelerate 1.15, pandas 3.0.6, pyarrow 25.0.1, huggingface-hub 1.33, fsspec 2026.7, xxhash, requests, psutil) lacks
# trl, datasets, dill and multiprocess and has no network. Carry their wheels (1.8 MB) in build/gpu-wheels
# (git-ignored), fetched on a networked machine with:
#
#   python -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
#     -d build/gpu-wheels trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
#
# A barer machine also needs pyarrow>=24 pandas python-dateutil xxhash fsspec requests psutil (add them to the list;
# pyarrow alone is 55 MB of the 64 MiB a device run may carry). Only the packages the machine cannot import are
# installed, into build/gpu-site (prepended to PYTHONPATH), so the machine's own packages are never replaced.
# With the device tool: run(command="bash benchmarks/gpu_check.sh", carry=["build/gpu-wheels"]).
#
#   bash benchmarks/gpu_check.sh                       # cuda, 0.5B shape, 5 steps (about 2-3 minutes on one H200)
#   bash benchmarks/gpu_check.sh --device cpu --tiny   # the CPU path, tiny model
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WHEELS=build/gpu-wheels
SITE=build/gpu-site
missing=$("$PY" - <<'PY'
import importlib.util
need = {"trl": "trl", "datasets": "datasets", "pyarrow": "pyarrow", "pandas": "pandas", "dateutil": "python-dateutil",
        "six": "six", "dill": "dill", "multiprocess": "multiprocess", "xxhash": "xxhash", "fsspec": "fsspec",
        "requests": "requests", "urllib3": "urllib3", "idna": "idna", "charset_normalizer": "charset-normalizer",
        "certifi": "certifi", "psutil": "psutil"}
print(" ".join(dist for mod, dist in need.items() if importlib.util.find_spec(mod) is None))
PY
)
if [ -n "$missing" ]; then
  if [ ! -d "$WHEELS" ]; then
    echo "gpu_check: missing $missing and no $WHEELS folder; download the wheels listed in this script's header" >&2
    exit 2
  fi
  echo "gpu_check: installing from $WHEELS into $SITE: $missing"
  "$PY" -m pip install --quiet --no-index --no-deps --find-links "$WHEELS" --target "$SITE" $missing
  export PYTHONPATH="$PWD/$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if command -v nvidia-smi >/dev/null; then nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; fi
"$PY" -c "import torch, transformers, trl, peft; print('torch', torch.__version__, '| transformers', transformers.__version__, '| trl', trl.__version__, '| peft', peft.__version__)"
exec "$PY" benchmarks/gpu_check.py "$@"
