"""Deterministic world engine: contract + seed -> canonical truth -> imperfect observed files -> audit.

Typical use::

    from worldsmith.evolution.worlds import load_template, build_world, audit_world, recoverable_phenomena
    c = load_template("finance", rows=5000)
    result = build_world(c, seed=7, out_dir="worlds/finance-7", produced_by="template:finance")
    report = audit_world("worlds/finance-7")          # build_world already ran it; this re-runs it
    for r in recoverable_phenomena(report): ...      # only these may become tasks
    code = reference_solution_code("worlds/finance-7", r.id)
"""

from .audit import (AuditReport, PhenomenonReference, audit_world, compute_phenomenon, phenomenon_reference,
                    read_audit, reconciled_table, recoverable_phenomena)
from .audit_edges import CheckResult
from worldsmith.core.world_contract import (SCHEMA_VERSION, Domain, Edge, Entity, ObservationSystem, Persona,
                                            Phenomenon, Variable, WorldContract, contract_json_schema)
from .defects import LedgerEntry, Sabotage
from .engine import ENGINE_VERSION, CanonicalState, generate, scaled
from .integrity import ManifestProblem, WorldIntegrityError, require_intact_world, verify_manifest
from .problems import ContractError, ContractProblem, format_problems
from .render import ledger_table, render_dag_png
from .solution import parse_answer, reference_solution_code
from .templates import list_templates, load_template, personas, random_contract
from .validate import check_contract, parse_contract, validate_contract
from .world import LoadedWorld, WorldResult, build_world, load_world
from .worldmd import describe_edge

__all__ = [
    "AuditReport", "CanonicalState", "CheckResult", "ContractError", "ContractProblem", "Domain", "ENGINE_VERSION",
    "Edge", "Entity", "LedgerEntry", "LoadedWorld", "ManifestProblem", "ObservationSystem", "Persona", "Phenomenon",
    "PhenomenonReference", "SCHEMA_VERSION", "Sabotage", "Variable", "WorldContract", "WorldResult", "audit_world",
    "build_world", "check_contract", "compute_phenomenon", "contract_json_schema", "describe_edge",
    "format_problems", "generate", "ledger_table", "list_templates", "load_template", "load_world", "parse_answer",
    "parse_contract", "personas", "phenomenon_reference", "random_contract", "read_audit", "reconciled_table",
    "recoverable_phenomena", "reference_solution_code", "render_dag_png", "require_intact_world", "scaled",
    "validate_contract", "verify_manifest", "WorldIntegrityError",
]
