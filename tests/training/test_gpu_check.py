"""The GPU check script's CPU path (`--device cpu --tiny`): it trains and prints the figures it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_cpu_path_on_the_tiny_model() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TQDM_DISABLE": "1"}
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--device", "cpu", "--tiny",
                        "--steps", "2", "--prompts", "2", "--generations", "2", "--completion-tokens", "8"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert "== gpu_check: tiny model" in out and "steps 2;" in out
    assert "step time median" in out and "tokens/s" in out
    assert out.count("  step ") == 2 and "γ 0.900" in out and "γ 0.050" in out
