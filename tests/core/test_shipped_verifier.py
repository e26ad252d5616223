"""The verifier shipped inside task packages is core/grading.py itself, and it runs with the standard library only."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.golden import case_ids, golden_rows
from worldsmith.core import grading, harbor_layout


@pytest.fixture
def verifier(tmp_path: Path) -> Path:
    """A temp dir holding only the shipped grade.py."""
    d = tmp_path / "tests"
    d.mkdir()
    shutil.copyfile(harbor_layout.verifier_sources()["grade.py"], d / "grade.py")
    return d


def _isolated(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # -I: no PYTHONPATH, no user site, no cwd on sys.path; -S: no site-packages, where worldsmith is installed
    return subprocess.run([sys.executable, "-I", "-S", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_the_shipped_source_is_core_grading() -> None:
    assert Path(harbor_layout.verifier_sources()["grade.py"]).read_bytes() == Path(grading.__file__).read_bytes()


def test_worldsmith_is_not_importable_in_the_clean_interpreter(verifier: Path) -> None:
    r = _isolated("-c", "import worldsmith", cwd=verifier)
    assert r.returncode != 0 and "ModuleNotFoundError" in r.stderr


@pytest.mark.parametrize("row", golden_rows(), ids=case_ids())
def test_shipped_verifier_agrees_with_every_golden_line_in_a_clean_interpreter(verifier: Path, row: dict) -> None:
    """`python grade.py expected.json response.txt reward.txt`, as a package's test.sh runs it."""
    expected = [{"name": n, "value": v, "rule": "official"} for n, v in row["label"]]
    (verifier / "expected.json").write_text(json.dumps(expected))
    (verifier / "response.txt").write_text(row["response"], encoding="utf-8")
    r = _isolated(str(verifier / "grade.py"), str(verifier / "expected.json"), str(verifier / "response.txt"),
                  str(verifier / "reward.txt"), cwd=verifier)
    want = {k: (False if v is None else v) for k, v in row["official_correct"].items()}
    verdicts = {i["name"]: i["correct"] for i in json.loads(r.stdout)["items"]}
    assert verdicts == want
    assert r.returncode == (0 if all(want.values()) else 1), r.stderr
    assert float((verifier / "reward.txt").read_text()) == pytest.approx(sum(want.values()) / len(want))


def test_shipped_verifier_bad_usage_exits_2(verifier: Path) -> None:
    assert _isolated(str(verifier / "grade.py"), cwd=verifier).returncode == 2
    r = _isolated(str(verifier / "grade.py"), "missing.json", "r.txt", cwd=verifier)
    assert r.returncode == 2 and "missing.json" in r.stderr
