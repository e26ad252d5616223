#!/usr/bin/env bash
# GPU check for the SFT+RL trainer: a few steps on a ~0.5B-shaped model, printing step time, tokens/s, peak memory.
#
# The lent GPU machine lacks trl, datasets and a few of their needs, and has no network: benchmarks/gpu_env.sh
# installs them from wheels carried in build/gpu-wheels (its header says which and how to fetch them).
# With the device tool: run(command="bash benchmarks/gpu_check.sh", carry=["build/gpu-wheels"]);
# benchmarks/gpu_check_all.sh runs this and the SFT half in one call.
#
#   bash benchmarks/gpu_check.sh                       # cuda, 0.5B shape, 5 steps (about 2-3 minutes on one H200)
#   bash benchmarks/gpu_check.sh --device cpu --tiny   # the CPU path, tiny model
set -uo pipefail
cd "$(dirname "$0")/.."
. benchmarks/gpu_env.sh || exit 2
if command -v nvidia-smi >/dev/null; then nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; fi
exec "${PYTHON:-python3}" benchmarks/gpu_check.py "$@"
