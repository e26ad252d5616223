"""Tables that are parts of one table: yearly files (`orders_2023.csv`, `orders_2024.csv`) or sheets of one workbook
with the same columns. They are stacked, never merged side by side; a column renamed in later parts (`amount` →
`amt`, same position) is renamed back before stacking. The profile shows each group with the exact `pd.concat`
call (`render.py`, wording in `prompts/profile_notes.md`) and drops the join hints between its parts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from worldsmith.tools.files.models import TableProfile

#: share of column positions that must carry the same name for two tables to be parts of one (one renamed column
#: is always allowed from three columns on)
SAME_COLUMNS = 0.8
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class TableParts:
    tables: tuple[TableProfile, ...]
    renames: dict[str, dict[str, str]]  # table label → {its column: the first part's name at that position}

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(t.label for t in self.tables)

    def concat(self) -> str | None:
        """`pd.concat([...], ignore_index=True)` of the parts' load calls (renames applied); None without calls."""
        calls = []
        for t in self.tables:
            if not t.load:
                return None
            mapping = self.renames.get(t.label)
            calls.append(t.load + (f".rename(columns={mapping!r})" if mapping else ""))
        return "pd.concat([" + ", ".join(calls) + "], ignore_index=True)"


def _family(t: TableProfile) -> tuple[str, ...]:
    """Tables of one family: sheets/tables of one file, or files whose names differ only in their digits."""
    if t.table is not None:
        return ("file", t.file, _DIGITS.sub("#", t.table) if _DIGITS.search(t.table) else "")
    p = PurePosixPath(t.file)
    stem = _DIGITS.sub("#", p.name)
    return ("name", str(p.parent), stem) if stem != p.name else ("single", t.file)


def _aligned(a: TableProfile, b: TableProfile) -> dict[str, str] | None:
    """b's renames against a ({b's name: a's name}) when the two have the same number of columns and nearly all
    positions carry the same name; None when they are not parts of one table."""
    ca, cb = [c.name for c in a.columns], [c.name for c in b.columns]
    if len(ca) != len(cb) or len(ca) < 2:
        return None
    differ = sum(x != y for x, y in zip(ca, cb))
    if differ > (max(1, int(len(ca) * (1 - SAME_COLUMNS))) if len(ca) >= 3 else 0):
        return None
    return {y: x for x, y in zip(ca, cb) if x != y and y not in ca}


def table_parts(tables: list[TableProfile]) -> list[TableParts]:
    """Groups of two or more tables that are parts of one table, in profile order."""
    families: dict[tuple[str, ...], list[TableProfile]] = {}
    for t in tables:
        fam = _family(t)
        if fam[0] != "single":
            families.setdefault(fam, []).append(t)
    out = []
    for members in families.values():
        if len(members) < 2:
            continue
        first, renames, kept = members[0], {}, [members[0]]
        for t in members[1:]:
            mapping = _aligned(first, t)
            if mapping is None:
                continue
            kept.append(t)
            if mapping:
                renames[t.label] = mapping
        if len(kept) >= 2:
            out.append(TableParts(tuple(kept), renames))
    return out
