"""Property tests over random template variants: invariants hold on canonical state, and the audit
recovers the planted effects from the observed files."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worldsmith.evolution.worlds import Domain, build_world, generate, random_contract, read_audit

DOMAINS = sorted(d.value for d in Domain)
SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow])


def check_invariants(state) -> None:
    c = state.contract
    for inv in c.invariants:
        if inv.kind == "unique_ids":
            t = state.tables[inv.entity]
            assert t[c.entity(inv.entity).key].is_unique
        elif inv.kind == "foreign_key":
            e = c.entity(inv.entity)
            key = c.entity(e.parent).key
            assert state.tables[inv.entity][key].isin(set(state.tables[e.parent][key])).all()
        elif inv.kind in ("non_negative", "bounds"):
            n = c.node(inv.variable)
            v = state.tables[n.entity][inv.variable]
            lo = 0 if inv.kind == "non_negative" else n.bounds.lower
            hi = None if inv.kind == "non_negative" else n.bounds.upper
            assert lo is None or v.min() >= lo
            assert hi is None or v.max() <= hi
        elif inv.kind == "sum":
            t = state.tables[c.node(inv.total).entity]
            assert np.allclose(t[inv.total], t[inv.parts].sum(axis=1))
    for e in c.entities:  # structural invariants of every table
        t = state.tables[e.name]
        if e.kind == "panel":
            assert len(t) == len(state.tables[e.parent]) * len(c.timeline.periods())
        if e.time_column:
            assert t[e.time_column].between(pd.Timestamp(c.timeline.start), pd.Timestamp(c.timeline.end)).all()
    for name, n in c.nodes().items():
        col = state.tables[n.entity][name]
        if n.kind == "binary":
            assert set(np.unique(col)) <= {0, 1}
        if n.kind == "categorical":
            assert set(col.astype(str)) <= set(n.distribution.categories)


@settings(max_examples=16, **SETTINGS)
@given(seed=st.integers(0, 10_000), domain=st.sampled_from(DOMAINS))
def test_invariants_hold_on_canonical_state(seed, domain):
    c = random_contract(seed, domain, rows=800)
    assert random_contract(seed, domain, rows=800).sha256() == c.sha256()  # variants are deterministic
    check_invariants(generate(c, seed))


@settings(max_examples=8, **SETTINGS)
@given(seed=st.integers(0, 10_000), domain=st.sampled_from(
    ["commercial_growth", "people", "bioinformatics", "epidemiology", "public_policy", "social_science_survey",
     "operations_supply_chain", "transportation"]))
def test_audit_recovers_planted_effects(tmp_path_factory, seed, domain):
    c = random_contract(seed, domain, rows=3000)
    out = tmp_path_factory.mktemp("prop")
    build_world(c, seed, out / "w")
    r = read_audit(out / "w")
    failed = [(x.id, x.reason) for x in r.edges if x.status == "fail"]
    assert not failed
    assert r.summary["invariant"]["fail"] == 0, [x.reason for x in r.invariants if not x.passed]
    assert r.summary["phenomenon"]["pass"] >= len(c.phenomena) - 1


@pytest.mark.slow
@settings(max_examples=20, **SETTINGS)
@given(seed=st.integers(0, 100_000), domain=st.sampled_from(DOMAINS))
def test_audit_recovers_planted_effects_all_domains(tmp_path_factory, seed, domain):
    c = random_contract(seed, domain, rows=4000)
    out = tmp_path_factory.mktemp("prop")
    build_world(c, seed, out / "w")
    r = read_audit(out / "w")
    assert r.summary["edge"]["fail"] == 0, [(x.id, x.reason) for x in r.edges if x.status == "fail"]
    assert r.summary["invariant"]["fail"] == 0
