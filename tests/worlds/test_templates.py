"""Templates, personas and random variants; every template world builds and audits (slow)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from worldsmith.evolution.worlds import (Domain, build_world, load_template, parse_answer, personas, random_contract,
                                         read_audit, recoverable_phenomena, reference_solution_code)


def test_personas_per_domain():
    for d in Domain:
        assert len(personas(d.value)) >= 2, d
    assert len(personas()) >= 32


def test_load_by_domain_or_id_and_rows():
    a = load_template("finance")
    assert load_template("finance_branches").sha256() == a.sha256()
    assert load_template("finance", rows=28800).entity("branches").count == 800
    with pytest.raises(KeyError, match="no template"):
        load_template("astrology")


def test_random_contract_perturbs_deterministically():
    a, b = random_contract(1, "commercial_growth"), random_contract(2, "commercial_growth")
    assert a.sha256() == random_contract(1, "commercial_growth").sha256() and a.sha256() != b.sha256()
    base = load_template("commercial_growth")
    for e0, e1 in zip(base.edges, a.edges):
        m0, m1 = e0.mechanism.model_dump(), e1.mechanism.model_dump()
        for k in ("coef", "jump", "vmax", "amplitude"):
            if m0.get(k):
                assert m1[k] / m0[k] == pytest.approx(1, abs=0.26) and m1[k] * m0[k] > 0  # same sign
    assert a.id == "commercial_growth_retail~r1"
    picked = {random_contract(s).domain for s in range(40)}
    assert len(picked) >= 10
    exact = random_contract(3, "finance")
    assert all(e.mechanism.coef == 1.0 for e in exact.incoming("total_cost"))  # sum constraint kept exact


@pytest.mark.slow
@pytest.mark.parametrize("domain", [d.value for d in Domain])
def test_every_template_world_builds_and_audits(tmp_path, domain):
    res = build_world(load_template(domain, rows=3000), 1, tmp_path / "w", produced_by=f"template:{domain}")
    r = read_audit(tmp_path / "w")
    assert r.summary["edge"]["fail"] == 0, [(x.id, x.reason) for x in r.edges if x.status == "fail"]
    assert r.summary["invariant"]["fail"] == 0, [(x.id, x.reason) for x in r.invariants if x.status == "fail"]
    assert len(recoverable_phenomena(r)) >= 3 and res.recoverable
    for p in recoverable_phenomena(r):  # every emitted phenomenon has a working reference solution
        code = reference_solution_code(tmp_path / "w", p.id)
        out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path / "w", capture_output=True, text=True)
        value = parse_answer(out.stdout, p.id)
        assert value is not None, out.stderr[-1500:]
        if isinstance(p.observed, str):
            assert value == p.observed
        else:
            assert float(value) == pytest.approx(p.observed, rel=1e-9, abs=1e-12)


def test_random_contracts_draw_the_richer_mechanisms():
    """random_contract grafts new-language constructs onto template variants (for the audit-claims benchmark)."""
    drawn = set()
    for seed in range(24):
        c = random_contract(seed, rows=800)
        base = {e.id for e in load_template(c.domain.value).edges}
        for e in c.edges:
            if e.id not in base:
                drawn.add("gate" if e.gate else "moderators" if e.heterogeneity else e.mechanism.type)
        drawn |= {v.derive.op for v in c.variables if v.derive}
    assert {"power", "piecewise", "binned", "event_percent", "gate", "ratio", "aggregate", "balance"} <= drawn
    assert random_contract(5, rows=800).sha256() == random_contract(5, rows=800).sha256()
    plain = random_contract(5, rows=800, grafts=0)
    assert {e.id for e in plain.edges} == {e.id for e in load_template(plain.domain.value).edges}
    assert not any(v.derive for v in plain.variables)
