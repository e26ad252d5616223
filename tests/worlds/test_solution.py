"""Reference solutions: standalone scripts that read data/ and reproduce the auditor's value."""

from __future__ import annotations

import subprocess
import sys

import pytest

from worldsmith.evolution.worlds import load_world, parse_answer, read_audit, reference_solution_code


def run_solution(world, pid) -> str:
    code = reference_solution_code(world, pid)
    assert "import worldsmith" not in code and ".truth" not in code
    out = subprocess.run([sys.executable, "-c", code], cwd=world, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    value = parse_answer(out.stdout, pid)
    assert value is not None, out.stdout
    return value


@pytest.mark.parametrize("pid", ["business_order_gap", "campaign_uplift", "web_return_rate", "value_per_item",
                                 "active_customers", "north_income"])
def test_reference_solution_reproduces_the_value(commercial_world, pid):
    value = run_solution(commercial_world, pid)
    audited = {r.id: r for r in read_audit(commercial_world).phenomena}[pid]
    truth = {p.id: p for p in load_world(commercial_world).phenomena()}[pid]
    assert float(value) == pytest.approx(float(audited.observed), rel=1e-9, abs=1e-12)
    assert truth.tolerance.allows(float(value), float(truth.value))


def test_reference_solution_on_panel_and_label_answers(panel_world, tmp_path):
    value = run_solution(panel_world, "marketing_lag_corr")
    truth = {p.id: p for p in load_world(panel_world).phenomena()}["marketing_lag_corr"]
    assert truth.tolerance.allows(float(value), float(truth.value))


def test_label_answer(tmp_path):
    from worldsmith.evolution.worlds import build_world, load_template

    build_world(load_template("customer_pricing", rows=3000), 1, tmp_path / "w")
    assert run_solution(tmp_path / "w", "priciest_tier") == "enterprise"
