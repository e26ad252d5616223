"""Backward task synthesis, the deterministic part (issue 13, item 5): choose target nodes (shallow and deep),
trace each one's path to the root, turn the path's dependencies into task requirements, choose the deliverable,
export the root workspace (the only files a task ships: every intermediate artifact is withheld), write the
chained reference solution, and map a validated rubric onto the grader's four sections.

The model-facing parts (answer specs, dual evidence, rubric validation, rejection sampling) are in
``worldsmith.app.evolve_tasks``; this module decides nothing a model could change.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from worldsmith.core.answer_spec import is_data_file
from worldsmith.core.claim_numbers import RESULT_PATTERN
from worldsmith.core.code_text import without_comments
from worldsmith.core.evolution_schemas import NodeRun, RubricCriterion, RubricValidation
from worldsmith.core.schemas import Criterion, Rubric, RubricSection, Tolerance
from worldsmith.core.store import atomic_write_bytes
from worldsmith.core.workspace_types import Node
from worldsmith.evolution.workspace import SOURCES, WorkspaceStore
from worldsmith.prompts import template
from worldsmith.tools.files.join_code import plan_join
from worldsmith.tools.files.models import TableProfile, WorkspaceProfile
from worldsmith.tools.files.names import names_file

TASK_TEMPLATE = "evolve_task.md"
DATA = "data"  # the package's environment/data/ holds the root workspace's files, nothing else
Deliverable = Literal["answer_tags", "markdown", "json", "xlsx"]
REPORT_FORMATS: tuple[Deliverable, ...] = ("markdown", "json", "xlsx")
REPORT_FILES = {"markdown": "answer.md", "json": "answer.json", "xlsx": "answer.xlsx"}
DEFAULT_REL_TOLERANCE = 0.01


class Requirement(BaseModel):
    kind: Literal["prerequisite", "retrieval", "decomposition", "composition"]
    node: int
    text: str
    sources: list[str] = Field(default_factory=list)


def pick_targets(nodes: list[Node], n: int) -> list[Node]:
    """Up to ``n`` verified non-root nodes, alternating the shallowest and the deepest left (so both ends of the
    depth range are represented), ties by id."""
    pool = sorted((x for x in nodes if x.mode != "root" and x.verified and x.conclusion.strip()),
                  key=lambda x: (x.depth, x.id))
    out: list[Node] = []
    while pool and len(out) < n:
        out.append(pool.pop(0))
        if pool and len(out) < n:
            out.append(pool.pop())
    return sorted(out, key=lambda x: (x.depth, x.id))


def _decimals(x: float) -> int:
    """Decimal places ``x`` was written with (``0.4672`` → 4, ``3.2`` → 1, ``2000.0`` → 0), at most 6."""
    text = format(x, ".6f").rstrip("0")
    return len(text.split(".")[1]) if "." in text else 0


def _same_number(a: float, b: float) -> bool:
    """Equal at the precision of the less precise of the two (0.83 is 0.8294 written with two decimals)."""
    d = min(_decimals(a), _decimals(b))
    return abs(a - b) <= 0.5 * 10.0 ** -d + 1e-12


def restated(nodes: list[Node], numbers: dict[int, dict[str, float]]) -> dict[int, list[int]]:
    """Verified nodes whose finding states no number of its own: every number its script printed as a RESULT line
    is one its ancestors' findings stated already, or one an earlier verified node (shallower, or as deep with a
    smaller id) stated. A task built on such a node asks again what the earlier one asks (v13's depth-3 node 5
    recomputed its parent's amount–income r 0.4672 and its grandparent's basket–amount r, and became a second task
    asking for that r in other words). Maps each to the nodes whose numbers cover it; a node with no number is
    never a repeat."""
    by_id = {x.id: x for x in nodes}
    verified = sorted((x for x in nodes if x.mode != "root" and x.verified), key=lambda x: (x.depth, x.id))
    out: dict[int, list[int]] = {}
    for i, x in enumerate(verified):
        own = list(numbers.get(x.id, {}).values())
        if not own:
            continue
        ancestors: list[int] = []
        todo, seen = list(x.parents), set()
        while todo:
            a = todo.pop()
            if a in seen or a not in by_id:
                continue
            seen.add(a)
            if a in numbers:
                ancestors.append(a)
            todo.extend(by_id[a].parents)
        pooled = [v for a in ancestors for v in numbers[a].values()]
        if all(any(_same_number(v, w) for w in pooled) for v in own):
            out[x.id] = sorted(a for a in ancestors
                               if any(_same_number(v, w) for v in own for w in numbers[a].values()))
            continue
        for y in verified[:i]:
            theirs = list(numbers.get(y.id, {}).values())
            if theirs and all(any(_same_number(v, w) for w in theirs) for v in own):
                out[x.id] = [y.id]
                break
    return out


def requirements(path: list[Node], runs: dict[int, NodeRun]) -> list[Requirement]:
    """What the path asks of a solver who starts from the root: each ancestor's analysis becomes a prerequisite
    (deepen), a retrieval (search), an isolated part (decompose) or a combination (compose); the target's own
    mode shapes it too (a search target still needs its retrieval)."""
    out = []
    target = path[-1]
    for node in path:
        if node.mode == "root":
            continue
        run = runs.get(node.id)
        question = run.question if run else node.goal
        if node.mode == "search":
            # the target's own retrieval is about the task's question, which the instruction already states
            out.append(Requirement(kind="retrieval", node=node.id, text="" if node.id == target.id else question,
                                   sources=[s for s in (run.retrieved if run else []) if not s.startswith("f")]))
        elif node.id == target.id:
            continue
        elif node.mode == "deepen":
            out.append(Requirement(kind="prerequisite", node=node.id, text=question))
        elif node.mode == "decompose":
            out.append(Requirement(kind="decomposition", node=node.id, text=question))
        else:
            out.append(Requirement(kind="composition", node=node.id, text=question))
    return out


def choose_deliverable(index: int, numbers: dict[str, float]) -> Deliverable:
    """Alternate closed form and reports (a closed form needs a printed number); reports rotate Markdown, JSON,
    xlsx."""
    if index % 2 == 0 and numbers:
        return "answer_tags"
    return REPORT_FORMATS[(index // 2) % len(REPORT_FORMATS)]


#: code that drops repeated records or converts a column's unit: a path whose scripts have neither computed its
#: numbers over the rows as recorded
_DEDUPES = re.compile(r"\bdrop_duplicates\s*\(|\bduplicated\s*\(")
#: the lookup side of the generated join (prompts/join_code.md) keeps one row per key: v11's paths all had it, and
#: their tasks lost the "as recorded" wording
_JOIN_KEY_DEDUPE = re.compile(r"""\.drop_duplicates\(\s*['"]_key['"]\s*\)""")
_CONVERTS = re.compile(r"[*/]\s*(?:100|1000|1e2|1e3|100\.0|1000\.0)\b")


def as_recorded(scripts: list[str]) -> bool:
    """Whether the path's scripts computed over every row as recorded (no repeated record dropped, no value
    converted by a factor of 100 or 1,000), the reading a report task's rubric numbers then assume. A blind solve of
    embedded run v9's report found the other one: its memo says a repeated order id counts once, and dropping the
    20 repeats moved the correlation from -0.1950 to -0.2062, outside the rubric's 2%."""
    code = "\n".join(without_comments(script) for script in scripts)
    code = _JOIN_KEY_DEDUPE.sub("", code)  # the join code's own one-row-per-key lookup, not a record dropped
    return not _DEDUPES.search(code) and not _CONVERTS.search(code)


#: statistical methods a script's calls name, as a deliverable would name them (pandas' `.corr(` defaults to Pearson)
_METHODS: list[tuple[str, re.Pattern[str]]] = [
    ("Pearson correlation", re.compile(r"\.corr\((?![^)]*method\s*=\s*['\"](?:spearman|kendall))|\bpearsonr\(")),
    ("Spearman rank correlation", re.compile(r"method\s*=\s*['\"]spearman|\bspearmanr\(")),
    ("Kendall rank correlation", re.compile(r"method\s*=\s*['\"]kendall|\bkendalltau\(")),
    ("least-squares linear regression", re.compile(r"\b(?:linregress|polyfit|OLS|ols|LinearRegression|lstsq)\(")),
    ("t-test", re.compile(r"\bttest_\w+\(")),
    ("chi-squared test", re.compile(r"\bchi2_contingency\(")),
    ("Mann-Whitney U test", re.compile(r"\bmannwhitneyu\(")),
]


def methods_in(script: str) -> list[str]:
    """The statistical methods `script` calls (comments ignored), by name: what an evidence card records as a
    solver's method, and a rubric may ask a deliverable to name."""
    code = without_comments(script)
    return [name for name, pattern in _METHODS if pattern.search(code)]


def _table_words(t: TableProfile) -> str:
    where = f"`{DATA}/{t.file}`"
    return f"{where} (table `{t.table}`)" if t.table else where


def task_question(goal: str) -> str:
    """The goal as the task's question: a proposer's "To compute the correlation … ." is asked as "Compute the
    correlation … ." (v9's report opened with "Question: To compute …")."""
    text = goal.strip()
    m = re.match(r"(?i)to\s+(\w)", text)
    if m is None:
        return text
    rest = text[m.start(1):]
    return rest[0].upper() + rest[1:]


#: a text a script writes in quotes ('orders_2023.csv', "data/crm.xlsx"): a data file when `is_data_file` says so
_QUOTED = re.compile(r"""['"]([^'"\n]+)['"]""")


def _reads_intermediate(ws: WorkspaceProfile, script: str) -> bool:
    """Whether `script` reads a data file that is none of the root's tables (one a parent node wrote)."""
    root = {Path(t.file).name for t in ws.tables}
    return any(is_data_file(f) and Path(f).name not in root for f in _QUOTED.findall(script))


def link_line(ws: WorkspaceProfile, scripts: list[str]) -> str:
    """How the two tables the path joins link, when its scripts read exactly two tables the profile links by a key
    unique on one side or by an id and a date together (`tools/files/join_code.plan_join`, the join the executor
    wrote for the node): the key columns, and that ids spelled differently match by their number. '' when the
    path joins no two tables. A join task that leaves the key to the solver has a reading per key a solver can
    guess (v9's join matched `order_id` with `order_id`, one written `O-00017`, the other `17`)."""
    # the target's own script first: a prerequisite's script names its own files (v12: node 9's link named the
    # prerequisite's orders_2023.csv beside the question's orders_2024.csv, and the solvers stacked both years)
    # The path's scripts together only when the target reads a file a parent wrote (the join may be upstream of
    # it): v15's node 6 read orders_2023.csv alone below a crm question, and its task said how orders link to crm,
    # so the solvers joined a table the question does not need
    plan = (plan_join(ws, scripts[-1]) if scripts else None) or (
        plan_join(ws, "\n".join(scripts)) if scripts and _reads_intermediate(ws, scripts[-1]) else None)
    if plan is None:
        return ""
    t = template(TASK_TEMPLATE)
    facts = " and ".join(_table_words(x) for x in plan.facts_tables)
    lookup = _table_words(plan.lookup)
    line = t.section("link number" if plan.spelled else "link text", facts=facts, lookup=lookup, fkey=plan.fkey,
                     lkey=plan.lkey)
    if plan.dated:  # one row per id and period on each side: the id alone matches a row to many
        line += " " + t.section("link dated", lookup=lookup, fwhen=plan.fwhen, lwhen=plan.lwhen)
    return line


def data_line(ws: WorkspaceProfile, goal: str, script: str) -> str:
    """The data files the target's script reads, as a line of a report task whose question does not name them
    all: the solvers are shown and joined the files their task names (`executor.execute(scope=…)`), and every
    table when it names none. v12's node 13 asked "… in the 2023 orders", which names no file; a solver shown every
    table merged the returns log and grouped by a `region` no order has. '' when the question names every file the
    script reads, or the script names no table of the workspace."""
    code = without_comments(script)
    files = sorted({t.file for t in ws.tables if names_file(code, Path(t.file).name)})
    if not files or all(names_file(goal, Path(f).name) for f in files):
        return ""
    return template(TASK_TEMPLATE).section("data", files=" and ".join(f"`{DATA}/{f}`" for f in files))


def instruction(goal: str, reqs: list[Requirement], deliverable: Deliverable, answer_block: str = "",
                recorded: bool = False, link: str = "", methods: list[str] | None = None,
                format_line: bool = True, data: str = "") -> str:
    """The task's instruction. A closed form's answer block pins its own population; a report whose numbers were
    computed over the rows as recorded (`recorded`) says so (and for both, a retrieval requirement then asks to
    mention what the documents say, not to use it), or a solver who follows a document's cleaning rule
    computes other numbers than its rubric expects; and it names the statistical methods of the target's script
    (`methods`, from `methods_in`): a blind solve of v11's discount-amount report read "the correlation" as
    Spearman's, -0.2126 against the rubric's -0.1950 ± 2%. `link` (from `link_line`) says how two joined tables
    link. `data` (from `data_line`) names the files a report's numbers come from. `format_line=False` leaves out
    how a report is written (the dual-evidence solvers print their numbers as RESULT lines instead; told to write
    answer.md, one of v11's solvers printed none in three attempts)."""
    t = template(TASK_TEMPLATE)
    parts = [t.section("opening", goal=task_question(goal))]
    if reqs:
        # over the rows as recorded, "find and use what the documents say" reads as "apply the memo's cleaning
        # rule" (v12's closed forms: the memo's "the first row counts" moves mean_business from 3.20 to 3.22)
        lines = [t.section((r.kind if r.text else f"{r.kind} of the question")
                           + (" recorded" if recorded and r.kind == "retrieval" else ""), question=r.text,
                           sources=", ".join(f"`{DATA}/{s}`" for s in r.sources) or "the memos and notes")
                 for r in reqs]
        parts.append(t.section("requirements", requirements="\n".join(lines)))
    parts += [data, link]
    if deliverable == "answer_tags":
        parts.append(answer_block)
    else:
        parts += [t.section("as recorded") if recorded else "",
                  t.section("methods", methods=" and ".join(methods)) if methods else "",
                  t.section(f"report {deliverable}") if format_line else ""]
    return "\n\n".join(p.strip() for p in parts if p.strip())


def export_root(store: WorkspaceStore, root: int, dest: Path) -> list[str]:
    """The root workspace's files under ``dest/data/`` (copies, so a package build never touches the store);
    returns their dest-relative paths. Nothing generated by any node is exported."""
    files = []
    for path, _ in sorted(store.manifest(root).files.items()):
        if not path.startswith(f"{SOURCES}/"):
            continue
        rel = f"{DATA}/{path[len(SOURCES) + 1:]}"
        target = dest / rel
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(target, store.read_bytes(root, path))
        files.append(rel)
    return files


_SOLVE = '''"""Reference solution: replays the evolution path's scripts in order from the task's data alone (every
intermediate file is regenerated, none is shipped), then prints the answer tag. Standard library only; the
scripts run in this process (runpy), in a scratch folder beside data/."""
import contextlib, io, os, re, runpy

SCRIPTS = {scripts}
NAME, TAG, FACTOR, DECIMALS = {name!r}, {tag!r}, {factor!r}, {decimals!r}
RESULT = re.compile({pattern!r}, re.MULTILINE)

data = os.path.abspath("{data}")
work = os.path.abspath("_replay")
os.makedirs(work, exist_ok=True)
for entry in os.listdir(data):
    if not os.path.lexists(os.path.join(work, entry)):
        os.symlink(os.path.join(data, entry), os.path.join(work, entry))
home, out = os.getcwd(), ""
os.chdir(work)
try:
    for name, code in SCRIPTS:
        with open(name, "w", encoding="utf-8") as fh:
            fh.write(code)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            runpy.run_path(name, run_name="__main__")
        out = buf.getvalue()
finally:
    os.chdir(home)
values = [float(v) for k, v in RESULT.findall(out) if k == NAME]
if not values:
    raise SystemExit(f"the last script printed no RESULT {{NAME}}")
value = values[-1] * FACTOR
print(f"@{{TAG}}[{{round(value, DECIMALS) if DECIMALS is not None else value}}]")
'''


def answer_tag(name: str) -> str:
    """The answer tag of a RESULT name: a tag is a word (`@name[value]`), a RESULT name may hold dashes or dots
    (v15's `mean_2023-01` crashed the synthesis of a run)."""
    return re.sub(r"\W+", "_", name).strip("_") or "value"


def solution_code(scripts: list[tuple[str, str]], name: str, factor: float = 1.0, decimals: int | None = None) -> str:
    """solve.py: the path's scripts (root first, target last) replayed in one folder over ``data/``; it prints the
    last script's RESULT `name` as the answer tag (`answer_tag`)."""
    return _SOLVE.format(scripts=json.dumps(scripts, indent=1), name=name, tag=answer_tag(name), factor=factor,
                         decimals=decimals, pattern=RESULT_PATTERN, data=DATA)


# --------------------------------------------------------------------------------------------- rubric mapping

_SECTION_WORDS: list[tuple[RubricSection, tuple[str, ...]]] = [
    ("presentation", ("present", "format", "clar", "structur", "communic", "readab", "deliverable", "writing")),
    ("method", ("method", "approach", "clean", "process", "assumption", "robust", "procedure", "reproduc", "valid")),
    ("insight", ("insight", "interpret", "conclu", "finding", "implication", "explan", "reasoning", "context")),
    ("computation", ("comput", "calcul", "accura", "number", "value", "quantit", "statistic", "metric", "correct")),
]


def section_of(dimension: str, criterion: RubricCriterion) -> RubricSection:
    """A free dimension name onto the grader's four sections by its words; otherwise a criterion with an expected
    value is computation and anything else insight."""
    low = dimension.lower()
    for section, words in _SECTION_WORDS:
        if any(w in low for w in words):
            return section
    return "computation" if criterion.expected_value is not None else "insight"


def to_rubric(validated: RubricValidation, *, note: str = "") -> Rubric:
    """The criteria the criterion validator kept (revised text included) as the grader's Rubric: filters weigh 2,
    preferences 1; a number without its own tolerance gets 1% relative. A number the ground truth states (a `gt`
    criterion with an expected value) is a filter whatever the draft said: the finding's own number is what the
    question asks, and a report that gets it wrong fails. v13's amount–income rubric had it as one preference of
    three, so a report with a wrong r that named its files and method scored 2/3, over the 0.6 pass mark."""
    revised = {v.criterion for v in validated.verdicts if v.action == "revise"}
    items = []
    for c in validated.criteria:
        if c.provenance == "gt" and c.expected_value is not None:
            c = c.model_copy(update={"type": "filter"})
        tol = None
        if c.expected_value is not None:
            tol = Tolerance(rel=c.tolerance if c.tolerance is not None else DEFAULT_REL_TOLERANCE)
        items.append(Criterion(id=c.id, section=section_of(c.dimension, c), type=c.type, observable=c.text,
                               satisfy=c.text, violate=f"the deliverable does not meet: {c.text}",
                               expected_value=c.expected_value, tolerance=tol, names=c.names, source=c.provenance,
                               confidence=0.8 if c.id in revised else 1.0, weight=2.0 if c.type == "filter" else 1.0))
    return Rubric(criteria=items, notes=note)
