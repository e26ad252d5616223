"""The DABench grading golden table: made-up answer strings with the official script's verdict per answer name.

`official_correct` is what InfiAgent-DABench's eval_closed_form.py returns for each name (null for a response the
official script leaves out). A copy lives in tests/data so the table is checked without the shared folder.
"""

from __future__ import annotations

import json
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "dabench-grading-golden.jsonl"


def golden_rows() -> list[dict]:
    return [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line.strip()]


def case_ids() -> list[str]:
    return [r["case"] for r in golden_rows()]
