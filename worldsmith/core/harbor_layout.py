"""What makes a task package Harbor-runnable: task.toml (current schema), environment/Dockerfile, the verifier
and oracle scripts. taskpkg.py writes the files; this module says what they contain.

Conventions (Harbor's): the agent works in /workspace (the image's WORKDIR, the task's files copied there, the
"working directory" the instruction names); `/tests` and `/solution` are copied in by Harbor; the verifier
writes /logs/verifier/reward.txt. The verifier runs in a separate container built from the same image, with the
agent's /workspace carried over as an artifact, so nothing the agent leaves behind can tamper with grading.
Every script resolves its own folder, so it also runs from any cwd outside a container, with arguments or
ANSWER_FILE / WORKSPACE / REWARD_FILE in place of Harbor's paths.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from worldsmith.core.schemas import Task
from worldsmith.core.store import ArtifactError
from worldsmith.prompts import load_prompt, template

SCHEMA_VERSION = "1.4"
WORKDIR = "/workspace"
DEFAULT_ANSWER_FILE = "answer.md"
AGENT_USER = "analyst"
BASE_IMAGE = "python:3.11-slim"
#: The analysis stack every task image carries, pinned so a task grades the same a year from now.
ANALYSIS_STACK = ("pandas==2.2.3", "numpy==2.1.3", "scipy==1.14.1", "statsmodels==0.14.4", "scikit-learn==1.5.2",
                  "openpyxl==3.1.5", "pyarrow==18.1.0")
JUDGE_ENV = ("WORLDSMITH_JUDGE_BASE_URL", "WORLDSMITH_JUDGE_MODEL", "WORLDSMITH_JUDGE_API_KEY")
JUDGE_PROMPTS = ("judge_system.md", "judge_task.md", "judge_request.md")
#: Files the packaging writes into environment/ beside the task's own files.
RESERVED_ENVIRONMENT_NAMES = ("Dockerfile", ".dockerignore")

_SCRIPT_HEAD = """#!/usr/bin/env bash
{comment}
set -u
here="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
answer="${{1:-${{ANSWER_FILE:-{workdir}/{answer}}}}}"
reward="${{2:-${{REWARD_FILE:-/logs/verifier/reward.txt}}}}"
workspace="${{WORKSPACE:-$(dirname "$answer")}}"
logs="$(dirname "$reward")"
mkdir -p "$logs"
"""
_CLOSED_FORM_BODY = """if [ ! -f "$answer" ]; then
  echo "test.sh: no answer file at $answer (the agent must write its @name[value] answers there)" >&2
  echo "0.000000" > "$reward"
  exit 1
fi
python3 "$here/grade.py" "$here/expected.json" "$answer" "$reward" | tee "$logs/grade.json"
exit "${PIPESTATUS[0]}"
"""
_REPORT_BODY = """python3 "$here/grade_report.py" "$here/rubric.json" "$answer" "$reward" --workspace "$workspace" \\
  --instruction "$here/instruction.md" --json "$logs/grade.json"
"""
SOLVE_SH = """#!/usr/bin/env bash
# Oracle: runs the reference solution in the task's workspace and writes its answer where the verifier reads it.
# Usage: solve.sh [WORKSPACE] (default $WORKSPACE or {workdir}); the answer goes to $ANSWER_FILE or WORKSPACE/{answer}.
set -euo pipefail
here="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
workspace="${{1:-${{WORKSPACE:-{workdir}}}}}"
answer="${{ANSWER_FILE:-$workspace/{answer}}}"
cd "$workspace"
python3 "$here/solve.py" | tee "$answer"
"""


def answer_file(task: Task) -> str:
    """Where the agent writes its answer, relative to the workdir: the deliverable's file, else answer.md."""
    return task.deliverable.filename or DEFAULT_ANSWER_FILE


def instruction_md(task: Task) -> str:
    """instruction.md: the task's instruction plus where to save the answer (a Harbor agent is graded on files)."""
    graded = template("package_graded.md").section("closed form" if task.kind == "closed_form" else "report")
    delivery = load_prompt("package_delivery.md").strip().format(workdir=WORKDIR, graded=graded.strip(),
                                                                 answer_path=f"{WORKDIR}/{answer_file(task)}")
    return f"{task.instruction.rstrip()}\n\n{delivery}\n"


def test_sh(task: Task) -> str:
    """tests/test.sh: `test.sh [ANSWER [REWARD]]`; closed form runs grade.py, a report grade_report.py."""
    kind = "closed-form answers against expected.json" if task.kind == "closed_form" else "the report against rubric.json"
    head = _SCRIPT_HEAD.format(
        comment=f"# Verifier: grades {kind} and writes the reward (Harbor: /logs/verifier/reward.txt).\n"
                "# Usage: test.sh [ANSWER [REWARD]]; defaults $ANSWER_FILE / $REWARD_FILE, else Harbor's paths.",
        workdir=WORKDIR, answer=answer_file(task))
    return head + (_CLOSED_FORM_BODY if task.kind == "closed_form" else _REPORT_BODY)


def solve_sh(task: Task) -> str:
    return SOLVE_SH.format(workdir=WORKDIR, answer=answer_file(task))


def dockerfile(task: Task) -> str:
    """environment/Dockerfile: the pinned analysis stack, a non-root analyst, the task's files at the workdir."""
    tops = list(dict.fromkeys(f.path.split("/", 1)[0] for f in task.workspace.files))
    clash = sorted(set(tops) & set(RESERVED_ENVIRONMENT_NAMES))
    if clash:
        raise ArtifactError(f"task {task.id}: workspace entries {clash} clash with the Harbor environment's own files")
    lines = [
        "# Harbor environment for worldsmith task " + task.id + ": the pinned analysis stack and the task's files",
        f"# at {WORKDIR}, the working directory the instruction names. Written by worldsmith; do not edit.",
        f"FROM {BASE_IMAGE}",
        "RUN pip install --no-cache-dir " + " ".join(ANALYSIS_STACK),
        f"RUN useradd --create-home --uid 1000 {AGENT_USER} && mkdir -p {WORKDIR} && chown {AGENT_USER} {WORKDIR}",
        f"WORKDIR {WORKDIR}",
    ]
    lines += [f"COPY --chown={AGENT_USER}:{AGENT_USER} {json.dumps([t, f'{WORKDIR}/{t}'])}" for t in tops]
    return "\n".join(lines) + "\n"


def task_toml(task: Task) -> dict[str, Any]:
    """task.toml (Harbor schema 1.4) with worldsmith's readable metadata."""
    meta: dict[str, Any] = {
        "id": task.id,
        "kind": task.kind,
        "source": task.provenance.source,
        "tags": task.tags,
        "produced_by": task.provenance.produced_by,
        "workspace_hash": task.workspace.content_hash,
        "answer_file": f"{WORKDIR}/{answer_file(task)}",
    }
    for key, value in (("category", task.category), ("difficulty", task.difficulty.level), ("split", task.split),
                       ("world_id", task.provenance.world_id)):
        if value is not None:
            meta[key] = value
    if task.difficulty.evolution_depth is not None:
        meta["evolution_depth"] = task.difficulty.evolution_depth
    if task.provenance.evolution_path:
        meta["evolution_path"] = task.provenance.evolution_path
    if isinstance(task.metadata.get("evolution"), dict):  # evidence of a task synthesised from an evolution path
        meta["evolution"] = {k: v for k, v in task.metadata["evolution"].items() if v is not None}
    report = task.kind == "report"
    verifier: dict[str, Any] = {"timeout_sec": 300.0 if report else 60.0, "environment_mode": "separate"}
    if report:  # judge items call the endpoint the host names; without one the verifier grades what it can
        verifier["network_mode"] = "public"
        verifier["env"] = {name: f"${{{name}:-}}" for name in JUDGE_ENV}
    return {
        "schema_version": SCHEMA_VERSION,
        "artifacts": [WORKDIR],
        "metadata": meta,
        "verifier": verifier,
        "agent": {"timeout_sec": 1800.0, "user": AGENT_USER},
        "environment": {"build_timeout_sec": 900.0, "cpus": 1, "memory_mb": 2048, "storage_mb": 4096,
                        "network_mode": "no-network", "workdir": WORKDIR},
    }


def judge_prompt_texts() -> dict[str, str]:
    """The judge templates shipped in report packages (the same files training/judge.py loads)."""
    base = resources.files("worldsmith.prompts")
    return {name: base.joinpath(name).read_text(encoding="utf-8") for name in JUDGE_PROMPTS}


def verifier_sources() -> dict[str, Path]:
    """{name in tests/: source module}: the shipped verifiers are worldsmith's own graders, verbatim."""
    here = Path(__file__).parent
    return {"grade.py": here / "grading.py", "grade_report.py": here / "rubric_grading.py"}
