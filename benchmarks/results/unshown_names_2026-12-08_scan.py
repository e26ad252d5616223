"""Replays the named-value check of guard `unshown` (agents/answer_guards.py) over the trajectories archived here:
on which recorded answers would it have fired, and were they passing?

    .venv/bin/python benchmarks/results/unshown_names_2026-12-08_scan.py

Reads the final answers, the question (the user prompt's `# Task` section) and the outputs of the cells that ran;
numbers are the older numeric check's and are skipped.
"""

from __future__ import annotations

import json
import re
import tarfile
import tempfile
from pathlib import Path

from worldsmith.agents.answer_guards import _unshown_name
from worldsmith.core.grading import extract_answers, parse_number

HERE = Path(__file__).parent
ARCHIVES = ("student_qwen05_2026-12-07_all65_eval.tgz", "dabench_dev_2026-12-06_s3_full_run.tgz",
            "generated_v2_2026-12-06_s3_full_run.tgz", "student_qwen05_2026-12-07_genv2_eval.tgz",
            "student_qwen05_2026-12-07_rerun_base_check.tgz", "analyst_notes_2026-12-06_runs.tgz")


def section(prompt: str, head: str) -> str:
    m = re.search(rf"^# {head}\n(.*?)(?=^# |\Z)", prompt, re.S | re.M)
    return m.group(1) if m else ""


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in ARCHIVES:
            dest = Path(tmp) / name
            with tarfile.open(HERE / name) as tar:
                tar.extractall(dest, filter="data")
            for p in sorted(dest.rglob("trajectories/*/*.json")):
                t = json.loads(p.read_text(encoding="utf-8"))
                if not t.get("final_answer"):
                    continue
                question = section(t["user_prompt"], "Task")
                names = re.findall(r"@(\w+)\[", section(t["user_prompt"], "Answer format"))
                got = extract_answers(t["final_answer"])
                outs = [s.get("observation") or "" for s in t["steps"]
                        if (s.get("action") or {}).get("kind") == "code" and (s.get("execution") or {}).get("ok")]
                passed = any(g.get("passed") for g in t.get("grades") or [])
                for n in names:
                    v = (got.get(n) or "").strip()
                    if v and parse_number(v) is None:
                        rows.append((name, t["task_id"], p.stem, n, v, passed, _unshown_name(v, question, outs)))
    fires = [r for r in rows if r[-1]]
    print(f"named answers: {len(rows)} ({sum(r[5] for r in rows)} passing); the check fires on {len(fires)} "
          f"({sum(r[5] for r in fires)} passing)")
    for r in fires:
        print("  fires:", *r[:5], "passed" if r[5] else "failed")


if __name__ == "__main__":
    main()
