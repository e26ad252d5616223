"""The profiler agent: deterministic file profiles → workspace profile + domain profile.

The file tools (`tools/files/profile.py`) measure; the model only reads their rendering and describes. Its answer
is checked against the profiles: every artifact must be a profiled file, every relation must name profiled files.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from worldsmith.agents.asking import Outcome, ask, versions
from worldsmith.core.evolution_schemas import ProfilerOutput
from worldsmith.prompts import template
from worldsmith.tools.files.models import WorkspaceProfile as FileProfiles

TEMPLATE = "evolve_profiler.md"


def profiled_files(files: FileProfiles) -> set[str]:
    """Paths the deterministic profile knows (tables, memos, other files)."""
    return ({t.file for t in files.tables} | {t.label for t in files.tables} | {d.file for d in files.documents}
            | {o.file for o in files.other_files})


def _file_of(ref: str, known: set[str]) -> str | None:
    """The profiled file a 'file.column' reference names (the longest matching path), or None. The file may be
    named without its extension ('crm.customer_id' for crm.xlsx) when that names exactly one profiled file."""
    hits = [p for p in known if ref == p or ref.startswith((p + ".", p + ":"))]
    if hits:
        return max(hits, key=len)
    stems: dict[str, set[str]] = {}
    for p in known:
        base = re.split(r"[\[:]", p, maxsplit=1)[0]  # a sheet label 'crm.xlsx[crm]' is the file crm.xlsx
        stems.setdefault(str(PurePosixPath(base).with_suffix("")), set()).add(base)
    hits = [s for s, files in stems.items() if len(files) == 1 and ref.startswith((s + ".", s + ":"))]
    return next(iter(stems[max(hits, key=len)])) if hits else None


def profile_problems(out: ProfilerOutput, known: set[str]) -> list[str]:
    problems = [f"artifact {a.path!r} is not one of the profiled files ({', '.join(sorted(known))})"
                for a in out.workspace.artifacts if a.path not in known]
    for r in out.workspace.relations:
        problems += [f"relation side {side!r} does not name a profiled file as 'file.column'"
                     for side in (r.left, r.right) if _file_of(side, known) is None]
    return problems


#: completion budget: a profile of a dozen files runs past the endpoint's default of 1,024 tokens
MAX_TOKENS = 1536


async def profile(llm: Any, files: FileProfiles, *, role: str = "teacher", retries: int = 2,
                  max_chars: int = 8000) -> Outcome[ProfilerOutput]:
    """The workspace and domain profile of a folder whose files `files` profiles."""
    if not files.tables:
        return Outcome(None, errors=["the workspace has no readable table to profile"
                                     + (f" ({len(files.failures)} files failed to read)" if files.failures else "")])
    t = template(TEMPLATE)
    messages = [{"role": "system", "content": t.section("system")},
                {"role": "user", "content": t.section("user", profiles=files.to_prompt(max_chars))}]
    known = profiled_files(files)
    return await ask(llm, messages, ProfilerOutput, role=role, templates=versions(TEMPLATE),
                     check=lambda out: profile_problems(out, known), retries=retries, max_tokens=MAX_TOKENS)
