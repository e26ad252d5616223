"""The data room's documents: README.md (what files exist), data_dictionary.md and memos/.

These are what an analyst receives with the files. They describe the exports, never the truth:
no ledger, no rates, no causal structure.
"""

from __future__ import annotations

from pathlib import Path

from worldsmith.core.world_contract import ObservationSystem, WorldContract
from .relink import link_descriptions
from .memos import events_memo, system_memo
from .observe import ObservedSystem
from .writers import FileRecord


def _column_help(c: WorldContract, s: ObservationSystem, column: str) -> str:
    e = c.entity(s.entity)
    if column == e.key:
        return f"identifier of the {e.name} record"
    if e.parent and column == c.entity(e.parent).key:
        return f"identifier of the {e.parent} record it belongs to"
    if column == "date":
        return "date of the record"
    if column == "period":
        return f"start of the {c.timeline.grain}"
    for d in s.defects:
        if d.type == "unlabeled_fk" and column == d.new_name:
            return "internal reference code"
        if d.type == "split_column" and column in d.into:
            return f"{'first' if column == d.into[0] else 'last'} part of {d.column}"
        if d.type == "rename" and column == d.new_name:
            column = d.column
    nodes = c.nodes()
    if column in nodes:
        n = nodes[column]
        unit = f" ({n.unit})" if n.unit else ""
        return (n.description or column.replace("_", " ")) + unit
    return column.replace("_", " ")


def data_dictionary(c: WorldContract, records: list[FileRecord]) -> str:
    lines = ["# Data dictionary", "", "Column meanings as supplied by the system owners. Not every export is covered.",
             ""]
    for s in c.systems:
        if not s.dictionary:
            continue
        recs = [r for r in records if r.system == s.name]
        cols = list(dict.fromkeys(col for r in recs for col in r.columns))
        where = ", ".join(sorted({f"`{r.path}`" + (f" ({r.part})" if r.part else "") for r in recs}))
        lines += [f"## {s.name}", "", f"Files: {where}", "", "| column | meaning |", "| --- | --- |"]
        lines += [f"| `{col}` | {_column_help(c, s, col)} |" for col in cols]
        lines.append("")
    return "\n".join(lines)


def readme(c: WorldContract, records: list[FileRecord], memo_files: list[str]) -> str:
    p = c.persona
    lines = [f"# Data room: {c.title}", "", f"Prepared for {p.name} ({p.role}, {p.organisation}).", "",
             "| file | format | sheet/table | rows | description |", "| --- | --- | --- | --- | --- |"]
    desc = {s.name: s.description or f"{s.name} export of {s.entity}" for s in c.systems} | link_descriptions(c)
    for r in sorted(records, key=lambda r: (r.path, r.part or "")):
        lines.append(f"| `{r.path}` | {r.format} | {r.part or ''} | {r.rows} | {desc[r.system]} |")
    lines += ["", "Other documents:", "", "- `data_dictionary.md`: column meanings (partial)."]
    lines += [f"- `{m}`: notes from the data owners." for m in memo_files]
    return "\n".join(lines) + "\n"


def write_documents(c: WorldContract, observed: list[ObservedSystem], records: list[FileRecord],
                    data_dir: Path) -> list[str]:
    """Write memos, the dictionary and the README; return their paths relative to data_dir."""
    memo_dir = data_dir / "memos"
    memo_files: list[str] = []
    for obs in observed:
        files = sorted({r.path + (f" ({r.part})" if r.part else "") for r in records if r.system == obs.system.name})
        text = system_memo(obs.system, obs.entries, c, files)
        if text:
            memo_dir.mkdir(parents=True, exist_ok=True)
            (memo_dir / f"{obs.system.name}.md").write_text(text, encoding="utf-8")
            memo_files.append(f"memos/{obs.system.name}.md")
    text = events_memo(c)
    if text:
        memo_dir.mkdir(parents=True, exist_ok=True)
        (memo_dir / "events.md").write_text(text, encoding="utf-8")
        memo_files.append("memos/events.md")
    (data_dir / "data_dictionary.md").write_text(data_dictionary(c, records), encoding="utf-8")
    (data_dir / "README.md").write_text(readme(c, records, memo_files), encoding="utf-8")
    return [*memo_files, "data_dictionary.md", "README.md"]
