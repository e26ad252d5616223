#!/usr/bin/env bash
# GPU check of the SFT half (see benchmarks/gpu_check_sft.py). benchmarks/gpu_env.sh installs what the lent machine
# lacks from the wheels carried in build/gpu-wheels. With the device tool:
#   run(command="bash benchmarks/gpu_check_sft.sh", carry=["build/gpu-wheels"])
set -uo pipefail
cd "$(dirname "$0")/.."
. benchmarks/gpu_env.sh || exit 2
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
"${PYTHON:-python3}" benchmarks/gpu_check_sft.py 2>&1 | grep -v "it/s\]\|examples/s\]\|Warning\|warnings.warn\|super().__init__"
