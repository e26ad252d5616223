#!/usr/bin/env bash
# The whole GPU check in one call (device time is scarce: one machine start, every part, logs kept per part):
#   1. SFT+RL, DAPO, full fine-tuning, Qwen2.5-0.5B-shaped random model, 5 steps   (benchmarks/gpu_check.py)
#   2. SFT+RL, GSPO + LoRA, same model, 3 steps of completions <= 256 tokens
#   3. the SFT half: bf16 autodetect, SmolLM2-135M-shaped SFT steps, LoRA merge, the hf provider on cuda
#      (benchmarks/gpu_check_sft.py)
# A part that fails is reported and the next still runs. Logs go to $OUT (the device tool's folder) when set, else
# to build/gpu-check/. With the device tool:
#   run(command="bash benchmarks/gpu_check_all.sh", carry=["build/gpu-wheels"], timeout_s=480)
# (2026-12-04 on one H200: about 6 minutes of command, 7 of device time with the start)
cd "$(dirname "$0")/.."
LOGS=${OUT:-build/gpu-check}
mkdir -p "$LOGS"
export PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1 TOKENIZERS_PARALLELISM=false
. benchmarks/gpu_env.sh > >(tee "$LOGS/env.log") 2>&1 || { sleep 1; echo "gpu_check_all: environment failed"; exit 2; }
sleep 1  # let tee flush the environment's lines first
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
filter() { grep --line-buffered -v "it/s\]\|s/it\]\|examples/s\]\|warnings.warn\|super().__init__"; }
rc=0
part() {  # part NAME SECONDS COMMAND...
  local name=$1 limit=$2; shift 2
  echo "== $name"
  local t=$SECONDS
  timeout "$limit" "$@" 2>&1 | filter | tee "$LOGS/$name.log"
  local r=${PIPESTATUS[0]}
  echo "== $name: rc $r, $((SECONDS - t)) s"
  [ "$r" = 0 ] || rc=1
}
part rl_dapo 200 "${PYTHON:-python3}" benchmarks/gpu_check.py --steps 5
part rl_gspo_lora 200 "${PYTHON:-python3}" benchmarks/gpu_check.py --steps 3 --gspo --lora --completion-tokens 256
part sft 120 "${PYTHON:-python3}" benchmarks/gpu_check_sft.py
nvidia-smi --query-gpu=memory.used --format=csv,noheader 2>/dev/null || true
exit $rc
