"""On-disk layout of a world and the small models written there.

<world>/
  contract.json        the contract (scaled to the rows built)
  manifest.json        sha256 of every file + provenance
  AUDIT.json, WORLD.md written by the auditor
  data/                the data room: observed files, memos/, README.md, data_dictionary.md
  .truth/              canonical/<entity>.parquet, ledger.json, phenomena.json  (never shown to solvers)
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from worldsmith.core.store import sha256_file
from worldsmith.core.world_contract_types import Tolerance

CONTRACT = "contract.json"
MANIFEST = "manifest.json"
AUDIT = "AUDIT.json"
WORLD_MD = "WORLD.md"
DATA = "data"
TRUTH = ".truth"
LEDGER = f"{TRUTH}/ledger.json"
PHENOMENA = f"{TRUTH}/phenomena.json"


class PhenomenonTruth(BaseModel):
    id: str
    value: float | str | None  # None: the recipe has no value on the canonical data (written as JSON null)
    tolerance: Tolerance
    statement: str  # rendered with the canonical value
    entity: str
    kind: str


class Manifest(BaseModel):
    schema_version: str
    engine_version: str
    world_id: str
    contract_sha256: str
    seed: int
    rows: int | None
    produced_by: str = Field(description="'template:<id>', 'random:<template>:<seed>', 'llm:<model>' or 'engine'")
    entity_rows: dict[str, int]
    files: dict[str, str]  # relative path -> sha256
    complete: bool = True


def file_hashes(root: Path, exclude: tuple[str, ...] = (MANIFEST,)) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and rel not in exclude:
            out[rel] = sha256_file(p)
    return out


def json_safe(data: Any) -> Any:
    """NaN and infinities as null: the JSON standard has no spelling for them (Python's `NaN` is not JSON)."""
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: json_safe(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [json_safe(v) for v in data]
    return data


def write_json(path: Path, data: Any) -> None:
    """Atomic, strictly valid JSON write (temp file + rename), stable key order; NaN is written as null."""
    tmp = path.with_name(path.name + ".tmp")
    text = json.dumps(json_safe(data), indent=2, sort_keys=True, default=str, allow_nan=False)
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, path)


def write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def render_statement(template: str, value: float | str) -> str:
    try:
        return template.format(value=value)
    except (ValueError, KeyError, IndexError):
        return template.replace("{value}", str(value))
