"""The independent auditor.

`audit_world` reads only the data room (observed files + memos), the contract (to know *what* to
check) and the canonical phenomenon values (`.truth/phenomena.json`, the answer key). It never
reads the canonical parquet or the ledger, and never modifies a file other than the two it writes:
AUDIT.json and WORLD.md (and their entries in the manifest, which it verifies first).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, Field

from .artifacts import AUDIT, CONTRACT, PHENOMENA, WORLD_MD, PhenomenonTruth, write_json, write_text
from .audit_checks import check_invariant, check_phenomenon, clipping_notes
from .audit_derived import check_exact_relations
from .relink import check_relinks
from .audit_edges import CheckResult, audit_edges
from .audit_effects import audit_claims
from .integrity import record_auditor_files, require_intact_world
from worldsmith.core.world_contract import WorldContract
from .recipes import evaluate
from .reconcile import Reconciled, reconcile


class AuditReport(BaseModel):
    world_id: str
    contract_sha256: str
    edges: list[CheckResult] = Field(default_factory=list)
    invariants: list[CheckResult] = Field(default_factory=list)
    phenomena: list[CheckResult] = Field(default_factory=list)
    claims: list[CheckResult] = Field(default_factory=list)  # no-effect and conditional claims (audit_effects)
    reconciliation: list[str] = Field(default_factory=list)
    issues: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)  # e.g. values clipped at a bound; not failures

    def counts(self, kind: str) -> dict[str, int]:
        items = getattr(self, {"edge": "edges", "invariant": "invariants", "phenomenon": "phenomena",
                               "claim": "claims"}[kind])
        return {s: sum(1 for r in items if r.status == s) for s in ("pass", "fail", "skip")}

    @property
    def summary(self) -> dict[str, dict[str, int]]:
        kinds = ("edge", "invariant", "phenomenon", *(("claim",) if self.claims else ()))
        return {k: self.counts(k) for k in kinds}

    @property
    def passed(self) -> bool:
        """Every declared claim holds: no edge, invariant or phenomenon failed, and something was judged.

        A skip (an edge or invariant whose columns no system observes) is not a failure; validation warns about
        such claims when the contract is written."""
        judged = self.edges + self.invariants + self.phenomena + self.claims
        return all(r.status != "fail" for r in judged) and any(r.passed for r in judged)

    def failures(self) -> list[CheckResult]:
        return [r for r in self.edges + self.invariants + self.phenomena + self.claims if r.status == "fail"]


def load_contract(world_dir: Path) -> WorldContract:
    return WorldContract.model_validate_json((world_dir / CONTRACT).read_text(encoding="utf-8"))


def load_phenomena_truth(world_dir: Path) -> dict[str, PhenomenonTruth]:
    data = json.loads((world_dir / PHENOMENA).read_text(encoding="utf-8"))
    return {p["id"]: PhenomenonTruth.model_validate(p) for p in data["phenomena"]}


def _reconciliation_log(c: WorldContract, rec: Reconciled) -> list[str]:
    log = list(rec.plan.log)
    for src in rec.plan.sources:
        rec.table(src.entity)
        if rec.removed.get(src.system):
            keys = " + ".join(rec.plan.keys[src.entity])
            log.append(f"{src.system}: {rec.removed[src.system]} repeated record(s) dropped (same {keys})")
        df = rec.by_system.get(src.system)
        for v in c.system(src.system).variables:
            if df is not None and v in df.columns and df[v].isna().any():
                log.append(f"{src.system}: `{v}` blank in {df[v].isna().mean():.1%} of rows")
    for src in rec.plan.sources:
        spellings = {st.kwargs["column"] for st in src.steps if st.fn == "normalise_ids"}
        if spellings:
            log.append(f"{src.system}: id spellings normalised in {sorted(spellings)}")
    return log


def audit_world(world_dir: str | Path, write: bool = True, verify: bool = True) -> AuditReport:
    """Recompute every edge, invariant and phenomenon from the observed files; pass/fail each.

    `verify` (the default) refuses a world that no longer matches its manifest (`WorldIntegrityError`); only the
    build itself audits with verify=False, before it writes the manifest."""
    world_dir = Path(world_dir)
    if verify:
        require_intact_world(world_dir)
    c = load_contract(world_dir)
    truth = load_phenomena_truth(world_dir)
    rec = reconcile(world_dir, c)
    report = AuditReport(world_id=c.id, contract_sha256=c.sha256())
    report.edges = audit_edges(c, rec)
    report.invariants = [check_invariant(c, inv, rec) for inv in c.invariants] + check_exact_relations(c, rec) \
        + check_relinks(c, world_dir)
    by_edge = {r.id: r for r in report.edges}
    report.phenomena = [check_phenomenon(c, p.id, rec, truth[p.id].value, by_edge) for p in c.phenomena]
    report.claims = audit_claims(c, rec)
    report.reconciliation = _reconciliation_log(c, rec)
    report.issues = list(rec.plan.issues)
    report.warnings = clipping_notes(c, rec)
    if write:
        from .worldmd import world_markdown

        write_json(world_dir / AUDIT, report.model_dump(mode="json"))
        write_text(world_dir / WORLD_MD, world_markdown(c, report, truth, world_dir))
        if verify:
            record_auditor_files(world_dir)
    return report


def read_audit(world_dir: str | Path) -> AuditReport:
    return AuditReport.model_validate_json((Path(world_dir) / AUDIT).read_text(encoding="utf-8"))


def recoverable_phenomena(report: AuditReport) -> list[CheckResult]:
    """Phenomena whose recipe on reconciled observed data matched the canonical value and whose claimed edges the
    edge audit confirmed: only these may become tasks."""
    return [r for r in report.phenomena if r.passed]


class PhenomenonReference(BaseModel):
    """What a task writer needs about one phenomenon."""

    id: str
    statement: str
    canonical_value: float | str | None
    tolerance: dict[str, float]
    entity: str
    kind: str
    recoverable: bool | None = None


def phenomenon_reference(world_dir: str | Path, phenomenon_id: str) -> PhenomenonReference:
    world_dir = Path(world_dir)
    t = load_phenomena_truth(world_dir)[phenomenon_id]
    rec = None
    if (world_dir / AUDIT).exists():
        rec = any(r.id == phenomenon_id and r.passed for r in read_audit(world_dir).phenomena)
    return PhenomenonReference(id=t.id, statement=t.statement, canonical_value=t.value,
                               tolerance=t.tolerance.model_dump(), entity=t.entity, kind=t.kind, recoverable=rec)


def reconciled_table(world_dir: str | Path, entity: str) -> pd.DataFrame | None:
    """The auditor's reconciled wide table of an entity, from observed files only."""
    world_dir = Path(world_dir)
    return reconcile(world_dir, load_contract(world_dir)).wide(entity)


def compute_phenomenon(world_dir: str | Path, phenomenon_id: str, wide: pd.DataFrame) -> Any:
    """Evaluate a phenomenon's recipe on a reconciled observed (wide) DataFrame."""
    c = load_contract(Path(world_dir))
    return evaluate(c, c.phenomenon(phenomenon_id).recipe, wide)
