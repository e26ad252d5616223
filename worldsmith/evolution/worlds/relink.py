"""Links that change at a date: a static entity's parent revised mid-timeline for a share of its rows.

Engine: the skeleton keeps the original parent of every row and the revised one; a dated row below the relinked
entity (an order of a moved store) belongs to the parent valid on its date (`parent_step`). Undated tables keep the
original link. Data room: the mapping table `<file>.csv` (id, parent id, valid_from, valid_to; one row per
validity interval). Audit: the mapping table must show the contract's share of moved rows (`relink:<entity>`); the
reconciliation joins dated rows to their parent as of their date (`kernels.asof_parent`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from worldsmith.core.world_contract import Entity, WorldContract

from . import kernels as K

LINKS_CSV = "csv"


def link_file(c: WorldContract, e: Entity) -> str:
    """Path of an entity's mapping table relative to the data directory."""
    assert e.relink is not None
    return f"{e.relink.file or f'{e.name}_{e.parent}_links'}.{LINKS_CSV}"


def relink_day(c: WorldContract, e: Entity) -> float:
    return float((e.relink.date - c.timeline.start).days)  # type: ignore[union-attr]


def revised_parents(parent_idx: np.ndarray, n_parents: int, share: float, rng: np.random.Generator) -> np.ndarray:
    """The parent of each row after the revision: `share` of rows move to a different, uniformly drawn parent."""
    after = parent_idx.copy()
    moved = rng.random(len(after)) < share
    if n_parents > 1 and moved.any():
        after[moved] = (after[moved] + 1 + rng.integers(0, n_parents - 1, int(moved.sum()))) % n_parents
    return after


def parent_step(sk: Any, idx: np.ndarray, days: np.ndarray | None) -> np.ndarray:
    """Parent row of rows `idx` of a skeleton; dated rows on/after a revision follow the revised link."""
    before = sk.parent_idx[idx]
    if getattr(sk, "parent_after", None) is None or days is None:
        return before
    return np.where(days >= sk.relink_day, sk.parent_after[idx], before)


def link_table(c: WorldContract, e: Entity, before: np.ndarray, after: np.ndarray, n_parents: int) -> pd.DataFrame:
    """The observed mapping table: one row per (id, parent) validity interval, ids spelled canonically."""
    from .engine import format_ids, id_width

    p = c.entity(str(e.parent))
    ids = format_ids(str(e.id_prefix), np.arange(1, len(before) + 1), id_width(len(before)))
    width = id_width(n_parents)
    moved = before != after
    date, start = e.relink.date.isoformat(), c.timeline.start.isoformat()  # type: ignore[union-attr]
    rows = {str(e.key): np.concatenate([ids, ids[moved]]),
            str(p.key): np.concatenate([format_ids(str(p.id_prefix), before + 1, width),
                                        format_ids(str(p.id_prefix), after[moved] + 1, width)]),
            "valid_from": [start] * len(ids) + [date] * int(moved.sum()),
            "valid_to": [date if m else "" for m in moved] + [""] * int(moved.sum())}
    return pd.DataFrame(rows).sort_values([str(e.key), "valid_from"], kind="stable").reset_index(drop=True)


def write_link_tables(state: Any, data_dir: Path) -> list[Any]:
    """Write every relinked entity's mapping table; FileRecords for the data room's README."""
    from .writers import FileRecord

    out = []
    c = state.contract
    for e in c.entities:
        sk = state.skeletons[e.name]
        if e.relink is None or getattr(sk, "parent_after", None) is None:
            continue
        df = link_table(c, e, sk.parent_idx, sk.parent_after, state.skeletons[str(e.parent)].n)
        rel = link_file(c, e)
        tmp = data_dir / f".{rel}.tmp"
        df.to_csv(tmp, index=False)
        tmp.replace(data_dir / rel)
        out.append(FileRecord(path=rel, format="csv", system=link_system(e), rows=len(df), columns=list(df.columns)))
    return out


def link_system(e: Entity) -> str:
    return f"{e.name}.links"


def link_descriptions(c: WorldContract) -> dict[str, str]:
    return {link_system(e): f"which {e.parent[:-1] if e.parent and e.parent.endswith('s') else e.parent} each "
            f"{e.name.removesuffix('s')} belongs to, with validity dates (valid_to blank: "
            "still valid)" for e in c.entities if e.relink is not None}


def read_links(world_dir: Path, c: WorldContract, e: Entity) -> pd.DataFrame | None:
    """The mapping table with ids normalised as the reconciliation spells them; None when it is missing."""
    path = Path(world_dir) / "data" / link_file(c, e)
    if not path.exists():
        return None
    p = c.entity(str(e.parent))
    return K.read_links(str(path), str(e.key), str(p.key), (str(e.id_prefix), str(e.alias)),
                        (str(p.id_prefix), str(p.alias)))


def check_relinks(c: WorldContract, world_dir: Path) -> list[Any]:
    """The mapping table shows the contract's share of moved rows, each moved on the contract's date."""
    from .audit_edges import CheckResult

    out = []
    for e in c.entities:
        if e.relink is None:
            continue
        cid = f"relink:{e.name}"
        links = read_links(world_dir, c, e)
        if links is None:
            out.append(CheckResult(kind="invariant", id=cid, status="fail",
                                   reason=f"mapping table {link_file(c, e)} is missing"))
            continue
        key = str(e.key)
        n = links[key].nunique()
        starts = links.loc[links["valid_from"] > pd.Timestamp(c.timeline.start), "valid_from"]
        moved = links.loc[links["valid_from"] > pd.Timestamp(c.timeline.start), key].nunique()
        share, want = moved / max(n, 1), e.relink.share
        tol = max(4 * math.sqrt(want * (1 - want) / max(n, 1)), 1.5 / max(n, 1))
        on_date = bool((starts == pd.Timestamp(e.relink.date)).all())
        ok = abs(share - want) <= tol and on_date and (moved > 0 or want == 0)
        out.append(CheckResult(kind="invariant", id=cid, status="pass" if ok else "fail", observed=share,
                               expected=want, reason=f"{moved} of {n} {e.name} change parent "
                               f"({share:.1%} vs {want:.1%} ± {tol:.1%})" + ("" if on_date else
                                                                           f", not all on {e.relink.date}")))
    return out
