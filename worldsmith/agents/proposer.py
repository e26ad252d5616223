"""The proposer agent: a direction (or composition) → a goal package an analyst can work on alone.

The goal must stand on its own (no 'the parent', 'the previous step'), depend only on verified findings it was
given, and its context summary may state only numbers those findings state.
"""

from __future__ import annotations

import re
from typing import Any

from worldsmith.agents.asking import Outcome, ask, versions
from worldsmith.core.answer_spec import is_data_file
from worldsmith.core.claim_numbers import named_numbers, printed_numbers, unbacked_numbers
from worldsmith.core.evolution_schemas import (
    Composition,
    Direction,
    GoalPackage,
    WorkspaceProfile,
    is_verified,
)
from worldsmith.core.schemas import Finding
from worldsmith.prompts import template
from worldsmith.tools.files.names import names_file

TEMPLATE = "evolve_proposer.md"
_DANGLING = re.compile(r"\b(?:the parent(?: node)?|previous (?:step|node|analysis)|as (?:above|before)|the above|"
                       r"that finding|this finding|node [\w-]+)\b", re.IGNORECASE)


def _files_named(text: str, files: list[str]) -> list[str]:
    """The workspace files a text names by their base name, or by their stem and the word table, file, sheet or data
    ("using the crm table as a join key": v15's proposer put crm.xlsx into a question on orders_2023.csv alone)."""
    names = {f.rsplit("/", 1)[-1] for f in files}
    return sorted(n for n in names if names_file(text, n) or (is_data_file(n) and _stem_named(text, n)))


#: the rest of a list of stems that ends in a word for tables: " and orders_2023 tables", ", orders tables"
_STEM_LIST_END = r"(?:\s*(?:,|\band\b|&)\s*[\w-]+)*\s+(?:tables?|files?|sheets?|data(?:sets?)?)\b"


def _stem_named(text: str, name: str) -> bool:
    """`name`'s stem written before a word for tables, alone or in a list ("the crm table", "using the crm and
    orders_2023 tables": v16's proposer goal, which sent the teacher merging crm into a one-file correlation)."""
    stem = name.split(".", 1)[0]
    return bool(stem) and re.search(rf"(?<![\w.-]){re.escape(stem)}{_STEM_LIST_END}", text,
                                    re.IGNORECASE) is not None


def goal_problems(goal: GoalPackage, findings: dict[str, Finding], required: list[str], *, question: str = "",
                  files: list[str] | None = None, inherited: str = "") -> list[str]:
    """Why a goal package is unusable; `required`: the findings the direction itself builds on. With the
    direction's `question` and the workspace's `files`: a goal naming files the question (which names some) does
    not — the 1.5B proposer turned "In orders_2024.csv, …" into "… using the crm.xlsx and orders_2024.csv files",
    and the executor merged on a key one table lacks, three times. `inherited`: the parent's goal, whose files a
    deeper question may use too (a question on a join of orders and crm.xlsx that names only the orders)."""
    problems = []
    asked = _files_named(question, files or [])
    if asked:
        asked = sorted({*asked, *_files_named(inherited, files or [])})
    if asked and (extra := [f for f in _files_named(goal.goal, files or []) if f not in asked]):
        problems.append(f"the question uses {', '.join(asked)} only; the goal also names {', '.join(extra)}: keep "
                        "to the question's files")
    if m := _DANGLING.search(goal.goal):
        problems.append(f"the goal must stand on its own; it refers to {m.group(0)!r}, which the analyst cannot see")
    unknown = [d for d in goal.depends_on if d not in findings]
    if unknown:
        problems.append(f"depends_on names {unknown}, which are not verified findings given to you "
                        f"({', '.join(findings) or 'none'})")
    if missing := [r for r in required if r in findings and r not in goal.depends_on]:
        problems.append(f"depends_on must include {missing}: the direction builds on them")
    known = [v for d in goal.depends_on if d in findings for v in printed_numbers(findings[d].statement)]
    # digits of the question and the file names are names, not claims: "orders_2024.csv" lets the summary say 2024
    known += named_numbers(question + " " + " ".join(files or []))
    if bad := unbacked_numbers(goal.context_summary, known):
        problems.append(f"the context summary states {', '.join(bad)}, which no finding in depends_on states")
    return problems


#: completion budget: a goal package runs ~150 tokens (the longest of 41 cached 1.5B replies that ended on their
#: own: 279), and 4 of 45 ran on to the default 1,024 (one proposal of embedded run v11 took 485 s that way)
MAX_TOKENS = 512


async def propose(llm: Any, direction: Direction | Composition, findings: list[Finding],
                  workspace: WorkspaceProfile, *, role: str = "teacher", retries: int = 2,
                  inherited: str = "") -> Outcome[GoalPackage]:
    """The goal package for `direction`; `findings` are the ones it may build on (unverified ones are ignored);
    `inherited`: the parent node's goal (its files may be named too)."""
    usable = {f.id: f for f in findings if is_verified(f)}
    if isinstance(direction, Composition):
        question, mode, work_mode = direction.objective, "compose", "joint analysis"
        required = list(direction.sources)
    else:
        question, mode, work_mode = direction.question, direction.mode, direction.work_mode
        required = [direction.depends_on]
    t = template(TEMPLATE)
    messages = [{"role": "system", "content": t.section("system")},
                {"role": "user", "content": t.section(
                    "user", overview=workspace.overview, files=", ".join(a.path for a in workspace.artifacts),
                    mode=mode, work_mode=work_mode, question=question, why=direction.why,
                    findings="\n".join(f"- {f.id}: {f.statement}" for f in usable.values()) or "(none yet)")}]
    files = [a.path for a in workspace.artifacts]
    out = await ask(llm, messages, GoalPackage, role=role, templates=versions(TEMPLATE),
                    check=lambda g: goal_problems(g, usable, required, question=question, files=files,
                                                  inherited=inherited), retries=retries, max_tokens=MAX_TOKENS)
    if out.value is None and out.calls:
        # every reply refused: the question itself, when it passes the same rules, is the goal (it names its
        # files; the 1.5B proposer widened it on every retry and two such rounds ended a run)
        plain = GoalPackage(goal=question, depends_on=[r for r in required if r in usable],
                            context_summary=" ".join(usable[r].statement for r in required if r in usable))
        if not goal_problems(plain, usable, required, question=question, files=files, inherited=inherited):
            out.value = plain
            out.errors.append("every reply was refused: the question is the goal")
    return out
