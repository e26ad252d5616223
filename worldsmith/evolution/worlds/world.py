"""A world on disk: build (atomically, resumably) and load.

`build_world` writes into a temporary sibling directory and renames it into place when complete,
so a killed build leaves no half world. A directory whose manifest already records the same
contract hash, seed, rows and engine version, and whose files still match it, is reused as is (its
stored audit reported); one whose files do not is refused unless `overwrite` replaces it.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from .artifacts import (AUDIT, CONTRACT, DATA, LEDGER, MANIFEST, PHENOMENA, TRUTH, Manifest, PhenomenonTruth,
                        file_hashes, render_statement, write_json)
from worldsmith.core.store import public_mode, remove_stale_temps
from worldsmith.core.world_contract import WorldContract
from .coherence import IncoherentWorld, coherence_problems
from .dataroom import write_documents
from .defects import LedgerEntry, Sabotage
from .engine import ENGINE_VERSION, CanonicalState, generate, scaled
from .integrity import WorldIntegrityError, verify_manifest
from .observe import kept_rows, project, unrecorded_cells
from .recipes import recipe_entity
from .relink import write_link_tables
from .writers import FileRecord, write_observed

Progress = Callable[[str, float], None]


class WorldResult(BaseModel):
    world_dir: str
    world_id: str
    contract_sha256: str
    seed: int
    entity_rows: dict[str, int]
    files: list[FileRecord] = Field(default_factory=list)
    skipped: bool = False  # an identical complete world already existed
    audit_summary: dict[str, dict[str, int]] | None = None
    recoverable: list[str] = Field(default_factory=list)
    timings: dict[str, float] = Field(default_factory=dict)


def _existing(out_dir: Path, sha: str, seed: int, rows: int | None) -> Manifest | None:
    path = out_dir / MANIFEST
    if not path.exists():
        return None
    try:
        m = Manifest.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError:
        return None
    same = (m.complete and m.contract_sha256 == sha and m.seed == seed and m.rows == rows
            and m.engine_version == ENGINE_VERSION)
    return m if same else None


def _reused(out_dir: Path, manifest: Manifest, world_id: str) -> WorldResult:
    """The result of a build that found an identical, intact world in place: its stored audit, reported as is."""
    result = WorldResult(world_dir=str(out_dir), world_id=world_id, contract_sha256=manifest.contract_sha256,
                         seed=manifest.seed, entity_rows=manifest.entity_rows, skipped=True)
    if (out_dir / AUDIT).is_file():
        from .audit import read_audit, recoverable_phenomena

        report = read_audit(out_dir)
        result.audit_summary = report.summary
        result.recoverable = [r.id for r in recoverable_phenomena(report)]
    return result


def _check_replaceable(out_dir: Path, overwrite: bool) -> None:
    """Refuse to build over anything but an empty folder, or (with overwrite) over a world."""
    if not out_dir.exists() or not any(out_dir.iterdir()):
        return
    is_world = (out_dir / MANIFEST).exists() or (out_dir / CONTRACT).exists()
    if overwrite and is_world:
        return
    if not is_world:  # never replace a folder of someone's own files, even with overwrite
        raise FileExistsError(f"{out_dir} holds files that are not a complete world (no {MANIFEST} or {CONTRACT}); "
                              f"choose another folder or empty this one")
    what = ("a different complete world (other contract/seed/rows, or an unreadable manifest)"
            if (out_dir / MANIFEST).exists() else "an incomplete world (no manifest)")
    raise FileExistsError(f"{out_dir} holds {what}; replace it with `worldsmith world new {out_dir} --overwrite` "
                          f"(overwrite=True in Python; the old world stays until the new one is complete) "
                          f"or choose another folder")


def _write_truth(state: CanonicalState, ledger: list[LedgerEntry], root: Path,
                 kept: dict[str, np.ndarray] | None = None,
                 unrecorded: dict[str, np.ndarray] | None = None) -> None:
    """Canonical tables, the ledger and the answer key. Phenomenon values leave out the cells no system recorded
    (`observe.unrecorded_cells`): a value nobody can read back is no part of what an analysis can be graded on, and
    with it the key would move with the luck of which rows went blank (and with a MAR defect's bias)."""
    canon = root / TRUTH / "canonical"
    canon.mkdir(parents=True, exist_ok=True)
    for name, table in state.tables.items():
        table.to_parquet(canon / f"{name}.parquet", index=False, compression="snappy")
    write_json(root / LEDGER, {"entries": [e.model_dump(mode="json") for e in ledger]})
    c = state.contract
    values = state.without(unrecorded or {}).phenomenon_values(kept)
    items = [PhenomenonTruth(id=p.id, value=values[p.id], tolerance=p.tolerance, kind=p.kind,
                             statement=render_statement(p.statement, values[p.id]), entity=recipe_entity(c, p.recipe))
             for p in c.phenomena]
    write_json(root / PHENOMENA, {"phenomena": [x.model_dump(mode="json") for x in items]})


def build_world(contract: WorldContract, seed: int, out_dir: str | Path, rows: int | None = None,
                progress: Progress | None = None, produced_by: str = "engine", audit: bool = True,
                sabotage: list[Sabotage] | None = None, overwrite: bool = False,
                generated_from: WorldContract | None = None) -> WorldResult:
    """contract + seed -> a world directory (data room, truth, manifest, and by default the audit).

    `generated_from` (negative control, e.g. `audit_claims.zero_effect_twin`): the canonical state is drawn from this
    contract while `contract.json` and the documents keep `contract`'s claims, so the audit must find them false."""
    out_dir = Path(out_dir)
    note = progress or (lambda stage, frac: None)
    full = scaled(contract, rows)
    source = full if generated_from is None else scaled(generated_from, rows)
    if sabotage:
        produced_by += "+sabotage:" + ",".join(f"{s.kind}:{s.variable}" for s in sabotage)
    sha = full.sha256() if not sabotage else f"{full.sha256()}+{sabotage[0].model_dump_json()}"
    if generated_from is not None:
        produced_by += "+generated_from:" + source.sha256()[:12]
        sha += f"+generated_from:{source.sha256()}"
    _finish_interrupted_swap(out_dir)
    done = _existing(out_dir, sha, seed, rows)
    if done is not None:
        problems = verify_manifest(out_dir)
        if not problems:
            note("skipped", 1.0)
            return _reused(out_dir, done, full.id)
        if not overwrite:  # an identical manifest over altered files is no world to reuse
            raise WorldIntegrityError(out_dir, problems)
    _check_replaceable(out_dir, overwrite)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(out_dir.parent, out_dir.name)  # a killed `world new` of this folder left its temp behind
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    public_mode(tmp, directory=True)
    timings: dict[str, float] = {}
    try:
        t0 = time.perf_counter()
        note("generate", 0.0)
        state = generate(source, seed)
        if generated_from is None and (incoherent := coherence_problems(state)):
            raise IncoherentWorld(full.id, incoherent)  # a twin is meant to break its contract's claims
        timings["generate"] = time.perf_counter() - t0
        note("project", 0.3)
        t0 = time.perf_counter()
        observed = project(state, sabotage)
        timings["project"] = time.perf_counter() - t0
        note("write", 0.5)
        t0 = time.perf_counter()
        records = write_observed(observed, tmp / DATA) + write_link_tables(state, tmp / DATA)
        write_documents(full, observed, records, tmp / DATA)
        (tmp / CONTRACT).write_text(json.dumps(full.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
        ledger = [e for o in observed for e in o.entries]
        _write_truth(state, ledger, tmp, kept_rows(observed, source), unrecorded_cells(state.contract, observed))
        timings["write"] = time.perf_counter() - t0
        result = WorldResult(world_dir=str(out_dir), world_id=full.id, contract_sha256=sha, seed=seed,
                             entity_rows={k: len(v) for k, v in state.tables.items()}, files=records)
        del state, observed
        if audit:
            note("audit", 0.7)
            t0 = time.perf_counter()
            from .audit import audit_world, recoverable_phenomena

            report = audit_world(tmp, verify=False)  # the manifest, written next, will cover what it reads
            timings["audit"] = time.perf_counter() - t0
            result.audit_summary = report.summary
            result.recoverable = [r.id for r in recoverable_phenomena(report)]
        manifest = Manifest(schema_version=full.schema_version, engine_version=ENGINE_VERSION, world_id=full.id,
                            contract_sha256=sha, seed=seed, rows=rows, produced_by=produced_by,
                            entity_rows=result.entity_rows, files=file_hashes(tmp))
        write_json(tmp / MANIFEST, manifest.model_dump(mode="json"))
        _swap_into_place(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    result.timings = timings
    note("done", 1.0)
    return result


def _finish_interrupted_swap(out_dir: Path) -> None:
    """A replacing build killed between moving the old world aside and moving the new one in left the old world in
    `.NAME.old-*/world` and nothing at NAME: put it back; then drop whatever a swap left behind."""
    for old in sorted(out_dir.parent.glob(f".{glob.escape(out_dir.name)}.old-*")):
        if not out_dir.exists() and (old / "world").is_dir():
            os.replace(old / "world", out_dir)
        shutil.rmtree(old, ignore_errors=True)


def _swap_into_place(tmp: Path, out_dir: Path) -> None:
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
    if out_dir.exists():
        os.replace(out_dir, old / "world")
    os.replace(tmp, out_dir)
    shutil.rmtree(old, ignore_errors=True)


@dataclass
class LoadedWorld:
    """Read access to a built world (truth included: for the task writer, not for solvers)."""

    path: Path
    contract: WorldContract
    manifest: Manifest

    def canonical(self, entity: str) -> pd.DataFrame:
        return pd.read_parquet(self.path / TRUTH / "canonical" / f"{entity}.parquet")

    def ledger(self) -> list[LedgerEntry]:
        data = json.loads((self.path / LEDGER).read_text(encoding="utf-8"))
        return [LedgerEntry.model_validate(e) for e in data["entries"]]

    def phenomena(self) -> list[PhenomenonTruth]:
        data = json.loads((self.path / PHENOMENA).read_text(encoding="utf-8"))
        return [PhenomenonTruth.model_validate(p) for p in data["phenomena"]]

    def audit(self):  # -> AuditReport | None
        from .audit import read_audit

        return read_audit(self.path) if (self.path / AUDIT).exists() else None

    @property
    def data_dir(self) -> Path:
        return self.path / DATA

    def verify(self) -> list[str]:
        """Files that no longer match the manifest: missing, modified or added to data/ (empty list = intact)."""
        return [p.path for p in verify_manifest(self.path)]


def load_world(world_dir: str | Path) -> LoadedWorld:
    path = Path(world_dir)
    if not (path / MANIFEST).exists():
        raise FileNotFoundError(f"{path}: no {MANIFEST}; not a complete world (build_world writes it last)")
    manifest = Manifest.model_validate_json((path / MANIFEST).read_text(encoding="utf-8"))
    contract = WorldContract.model_validate_json((path / CONTRACT).read_text(encoding="utf-8"))
    return LoadedWorld(path=path, contract=contract, manifest=manifest)
