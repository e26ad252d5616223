"""Emitted world task packages are Harbor-runnable (issue 10, item 5): Harbor's own task models load them and its
lint finds nothing; the oracle runs through our sandbox with the package's paths and the verifier grades it.

Harbor needs Python >= 3.12, so it lives in .venv-harbor (scripts/setup.sh --dev) and runs as a subprocess
(tests/harbor/harbor_check.py); worldsmith never imports it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.worldtasks.tasks_script import main as write_tasks
from worldsmith.core import harbor_layout
from worldsmith.core.taskpkg import TaskCollection, read_task_package, solution_code
from worldsmith.evolution.worlds.templates import list_templates, load_template
from worldsmith.evolution.worlds.world import build_world
from worldsmith.tools.sandbox import SandboxConfig, open_sandbox

ROOT = Path(__file__).resolve().parents[2]
HARBOR_PYTHON = ROOT / ".venv-harbor" / "bin" / "python"  # made by scripts/setup.sh --dev

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _emit(world: Path, base: Path) -> list[Path]:
    """The world's tasks as the pipeline emits them (template requests, reference solutions verified)."""
    with pytest.MonkeyPatch.context() as mp:  # module scope runs before conftest's per-test env isolation
        for name in [n for n in os.environ if n.startswith("WORLDSMITH_")]:
            mp.delenv(name)
        ids, _ = asyncio.run(write_tasks(world, base / "tasks", base / "storage", base / "runs"))
    assert ids, f"{world}: the world produced no tasks"
    coll = TaskCollection(base / "tasks")
    return [coll.root / e.path for e in coll.entries()]


@pytest.fixture(scope="module")
def packages(world: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return _emit(world, tmp_path_factory.mktemp("harbor"))


@pytest.fixture(scope="module")
def every_template_packages(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Four tasks from a small world of every template (~4 s a template on 2 cores)."""
    out = []
    for info in list_templates():
        base = tmp_path_factory.mktemp(info.id)
        build_world(load_template(info.id, rows=1500), 3, base / "world")
        out += _emit(base / "world", base)
    return out


def test_every_package_loads_with_harbors_models_and_lints_clean(every_template_packages: list[Path]) -> None:
    packages = every_template_packages
    if not HARBOR_PYTHON.is_file():
        pytest.skip(f"no Harbor venv at {HARBOR_PYTHON}: run scripts/setup.sh --dev (needs Python >= 3.12)")
    host_env = {k: v for k, v in os.environ.items() if not k.startswith("WORLDSMITH_")}  # no judge configured
    r = subprocess.run([str(HARBOR_PYTHON), str(ROOT / "tests" / "harbor" / "harbor_check.py"),
                        *map(str, packages)], capture_output=True, text=True, timeout=300, env=host_env)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout)
    assert len(report) == len(packages)
    kinds = set()
    for pkg in packages:
        got = report[str(pkg.resolve())]
        assert got["errors"] == [] and got["valid"], (pkg.name, got)
        assert got["lint"] == [], (pkg.name, got["lint"])
        assert (got["schema_version"], got["verifier_mode"], got["network_mode"], got["workdir"]) == (
            harbor_layout.SCHEMA_VERSION, "separate", "no-network", "/workspace"), pkg.name
        assert got["reward_path"] == "/logs/verifier/reward.txt"  # where test.sh writes by default
        assert "/logs/verifier/reward.txt" in (pkg / "tests" / "test.sh").read_text()
        kind = read_task_package(pkg, verify=False).kind
        kinds.add(kind)
        # report verifiers get the judge endpoint from the host; unset, it resolves empty (deterministic items only)
        assert got["verifier_env"] == ({k: "" for k in harbor_layout.JUDGE_ENV} if kind == "report" else {})
    assert kinds == {"closed_form", "report"}


def test_dockerfile_puts_every_task_file_at_the_workdir_with_a_pinned_stack(every_template_packages: list[Path]) -> None:
    packages = every_template_packages
    for pkg in packages:
        task = read_task_package(pkg)
        docker = (pkg / "environment" / "Dockerfile").read_text()
        assert "WORKDIR /workspace" in docker
        for top in {f.path.split("/", 1)[0] for f in task.workspace.files}:
            assert f'["{top}", "/workspace/{top}"]' in docker, (pkg.name, top)
            assert (pkg / "environment" / top).exists()
        answer = f"/workspace/{harbor_layout.answer_file(task)}"  # where the agent is told to save, and test.sh reads
        assert f"`{answer}`" in (pkg / "instruction.md").read_text() and answer in (pkg / "tests" / "test.sh").read_text()
        pins = docker.split("pip install --no-cache-dir ", 1)[1].split("\n", 1)[0].split()
        assert {p.split("==")[0] for p in pins} >= {"pandas", "numpy", "scipy", "statsmodels", "scikit-learn",
                                                   "openpyxl", "pyarrow"}
        assert all("==" in p for p in pins), pins


async def test_oracle_through_our_sandbox_with_the_packages_paths_earns_full_reward(packages: list[Path],
                                                                                    tmp_path: Path) -> None:
    """Without Docker: solve.sh's semantics (solve.py in the workspace, stdout to WORKSPACE/<answer file>) through the
    local sandbox, whose cwd is /workspace as in the image; then test.sh grades in a clean interpreter. A report's
    oracle answers its computation items with tags; without a judge the rest is listed as ungraded."""
    shim_dir = tmp_path / "bin"
    shim_dir.mkdir()
    (shim_dir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    (shim_dir / "python3").chmod(0o755)
    cfg = SandboxConfig(backend="local" if shutil.which("bwrap") else "process", preload=[], timeout_s=120)
    solved = [p for p in packages if solution_code(p)]
    assert {read_task_package(p, verify=False).kind for p in solved} == {"closed_form", "report"}
    for pkg in solved:
        task = read_task_package(pkg, verify=False)
        workspace = tmp_path / pkg.name / "workspace"
        workspace.mkdir(parents=True)
        inputs = [p for p in sorted((pkg / "environment").iterdir())
                  if p.name not in harbor_layout.RESERVED_ENVIRONMENT_NAMES]
        async with open_sandbox(cfg, workspace, inputs) as sb:
            result = await sb.run(solution_code(pkg) or "")
        assert result.ok, (pkg.name, result.to_observation(2000))
        answer = workspace / harbor_layout.answer_file(task)
        answer.write_text(result.stdout)
        reward = tmp_path / pkg.name / "logs" / "verifier" / "reward.txt"
        r = subprocess.run(["bash", str(pkg / "tests" / "test.sh")], cwd=tmp_path, capture_output=True, text=True,
                           env={**os.environ, "PATH": f"{shim_dir}{os.pathsep}{os.environ['PATH']}",
                                "ANSWER_FILE": str(answer), "REWARD_FILE": str(reward)}, timeout=60)
        assert r.returncode == 0, (pkg.name, r.stdout[-2000:], r.stderr[-2000:])
        assert float(reward.read_text()) == 1.0, pkg.name
        if task.kind == "report":
            verdicts = json.loads((reward.parent / "grade.json").read_text())
            judged = [c.id for c in task.rubric.criteria if not c.deterministic]
            assert verdicts["ungraded"] == judged and judged, pkg.name
