"""Guards on the analyst's final answer: pure checks over the answer, the requested names, the code cells so far
and facts about the data (column names, observed ranges). graphs/analyst.py's check node runs them, re-asks at
most once per kind, and records every firing on the trajectory (core/schemas.py GuardFiring).

Kinds, in the order the check node acts on them:
- no_evidence: files were given, yet no code cell that ran without an error touched them (read a file, or used a
  variable an earlier file-reading cell made) — the answer is a guess;
- example_copy: the answer repeats the worked example (its unrequested names, its sentence, or its values where no
  output of this conversation shows them), or gives the example value of the question's answer line ("e.g. 0.43")
  that no output shows;
- names: the answer writes @names nobody requested, other than the example's (missing ones are the format
  check's, agents/analyst.py);
- self_correlation: a correlation question answered with the very column it correlates against;
- out_of_range: a location statistic of a column (mean, median, min, max, …, per the answer's name or the
  question) outside the column's observed range;
- unshown: a number the answer gives that no output of a cell that ran shows, at the precision the answer writes
  it (core/claim_numbers.py's rule; a percentage may be printed as a fraction, small whole numbers are not
  checked), or a named value (letters, no digits; not yes/no and not a choice the question writes) no output
  shows — made up, or taken from the prompt's sample rows;
- report_sources: a Markdown report, asked to explain how it computed its numbers, that names none of the data
  files its code read (v13's teacher reports stated the right r in one sentence and failed their rubrics on the
  files and the method).
The first two block: still firing once their re-ask is spent, they make the trajectory `unsupported`.
The checks are pure; `profile_facts` reads the data facts the last two need, only when a question calls for them.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from worldsmith.core.claim_numbers import printed_numbers, unbacked_numbers
from worldsmith.core.grading import extract_answers, normalise_text, parse_number
from worldsmith.core.schemas import BLOCKING_GUARDS, GuardFiring, GuardKind
from worldsmith.prompts import template

EXAMPLE_TEMPLATE = "analyst_example.json"
FEEDBACK_TEMPLATE = "analyst_feedback.md"
#: the order the check node acts on them; the first three come before the format check, the rest after it
ORDER: tuple[GuardKind, ...] = ("no_evidence", "example_copy", "names", "self_correlation", "out_of_range",
                                "unshown", "report_sources")
BEFORE_FORMAT: frozenset[GuardKind] = frozenset({"no_evidence", "example_copy", "names"})


@dataclass(frozen=True)
class Finding:
    kind: GuardKind
    detail: str  # what fired, in words the feedback shows the model


@dataclass(frozen=True)
class Cell:
    """One executed code cell of the conversation (any question of a chat thread)."""

    code: str
    ok: bool
    observation: str = ""


@dataclass(frozen=True)
class DataFacts:
    """What the guards need from the data profile: every column name, and the observed (min, max) of numeric
    columns profiled on every row (a sampled table's extremes are not the column's, so it gives none)."""

    columns: tuple[str, ...] = ()
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    loads: dict[str, str] = field(default_factory=dict)  # file (and its alias) as mounted → its exact load call
    tables: dict[str, tuple[str, ...]] = field(default_factory=dict)  # table as the profile lists it → its columns
    # an id column some tables spell differently (P-00001 / PAT_1 / p1) → how each table spells it, in words
    respelled: dict[str, str] = field(default_factory=dict)
    # a text column whose every value the profile lists (read on every row) → those values, over all its tables
    values: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # a document (memo, notes) → its list items as the profile read them ("The column `amount_due` holds `bill_usd`.")
    documents: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # a key column → the columns of other names in other tables that hold the same ids (crm's `customer_id` is the
    # orders' `acct_ref`), as (table, column)
    links: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)

    @classmethod
    def from_profile(cls, ws: Any) -> DataFacts:
        """From a tools.files WorkspaceProfile."""
        from worldsmith.tools.files.names import complete_values, list_items

        columns: dict[str, None] = {}
        ranges: dict[str, tuple[float, float]] = {}
        unknown: set[str] = set()
        loads: dict[str, str] = {}
        tables: dict[str, tuple[str, ...]] = {}
        values: dict[str, dict[str, None]] = {}
        partial: set[str] = set()
        for table in ws.tables:
            tables[table.label] = tuple(c.name for c in table.columns)
            if getattr(table, "load", None):
                loads.setdefault(table.file, table.load)
            if getattr(table, "alias", None) and getattr(table, "alias_load", None):
                loads.setdefault(table.alias, table.alias_load)
            for c in table.columns:
                columns[c.name] = None
                if c.semantic_type in ("categorical", "bool", "text"):
                    known = complete_values(table, c.name)
                    if known is None:
                        partial.add(c.name)
                    else:
                        values.setdefault(c.name, {}).update(dict.fromkeys(known))
                if c.semantic_type != "numeric":
                    continue
                lo, hi = c.min, c.max
                if table.sampled or not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)):
                    unknown.add(c.name)
                    continue
                old = ranges.get(c.name, (lo, hi))
                ranges[c.name] = (min(old[0], float(lo)), max(old[1], float(hi)))
        documents = {d.file: tuple(list_items(d.first_lines)) for d in getattr(ws, "documents", [])}
        return cls(tuple(columns), {k: v for k, v in ranges.items() if k not in unknown}, loads, tables,
                   _respelled(getattr(ws, "joins", [])),
                   {k: tuple(v) for k, v in values.items() if k not in partial},
                   {k: v for k, v in documents.items() if v}, _links(getattr(ws, "joins", [])))

    def to_state(self) -> dict[str, Any]:
        return {"columns": list(self.columns), "ranges": {k: list(v) for k, v in self.ranges.items()},
                "loads": dict(self.loads), "tables": {k: list(v) for k, v in self.tables.items()},
                "respelled": dict(self.respelled), "values": {k: list(v) for k, v in self.values.items()},
                "documents": {k: list(v) for k, v in self.documents.items()},
                "links": {k: [list(x) for x in v] for k, v in self.links.items()}}

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> DataFacts:
        return cls(tuple(data.get("columns") or ()), {k: (v[0], v[1]) for k, v in (data.get("ranges") or {}).items()},
                   dict(data.get("loads") or {}), {k: tuple(v) for k, v in (data.get("tables") or {}).items()},
                   dict(data.get("respelled") or {}),
                   {k: tuple(v) for k, v in (data.get("values") or {}).items()},
                   {k: tuple(v) for k, v in (data.get("documents") or {}).items()},
                   {k: tuple((x[0], x[1]) for x in v) for k, v in (data.get("links") or {}).items()})


def documented_columns(key: str, facts: DataFacts) -> list[str]:
    """'FILE says: ITEM' for each document item that writes `key` in backticks next to a column of the data in
    backticks: a column a memo says holds the quantity under another name ("The column `amount_due` holds
    `bill_usd`."). The task turn quotes it; the 1.5B model still looked `bill_usd` up three times."""
    pattern = re.compile(rf"`{re.escape(key)}`")
    known = set(facts.columns) - {key}
    return [f"{file} says: {item}" for file, items in facts.documents.items() for item in items
            if pattern.search(item) and any(f"`{c}`" in item for c in known)]


def _links(joins: Sequence[Any]) -> dict[str, tuple[tuple[str, str], ...]]:
    """{column: ((table, column of another name), …)} for each join the profile found between two columns of
    different names whose values overlap (at least half of the smaller side's distinct ids)."""
    out: dict[str, dict[tuple[str, str], None]] = {}
    for j in joins:
        if j.left.column == j.right.column or (j.overlap_ratio or 0) < 0.5:
            continue
        for ref, other in ((j.left, j.right), (j.right, j.left)):
            out.setdefault(ref.column, {})[(other.table_label, other.column)] = None
    return {k: tuple(v) for k, v in out.items()}


def _respelled(joins: Sequence[Any]) -> dict[str, str]:
    """{column: "table 'spelling', table 'spelling', …"} for each column of a join whose sides spell the same ids
    differently (tools.files CandidateJoin.spellings)."""
    seen: dict[str, dict[str, str]] = {}
    for j in joins:
        if getattr(j, "spellings", None) is None:
            continue
        for ref, example in ((j.left, j.spellings[0]), (j.right, j.spellings[1])):
            seen.setdefault(ref.column, {}).setdefault(ref.table_label, example)
    return {col: ", ".join(f"{t} {ex!r}" for t, ex in where.items()) for col, where in seen.items()}


def profile_facts(files: Sequence[str]) -> DataFacts:
    """The data facts of the question's inputs, from the file profiler. Samples of one task share their files:
    plain files unchanged since (same size and mtime) are not profiled again; a folder's contents can change
    unseen, so folders always are."""
    paths = [Path(f) for f in files]
    if all(p.is_file() for p in paths):
        return _facts_of_files(tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in paths))
    return _facts_of(paths)


@lru_cache(maxsize=32)
def _facts_of_files(key: tuple[tuple[str, int, int], ...]) -> DataFacts:
    return _facts_of([Path(path) for path, _, _ in key])


def _facts_of(paths: list[Path]) -> DataFacts:
    from worldsmith.tools.files import profile_workspace  # the profiler's readers load only when a guard needs them

    return DataFacts.from_profile(profile_workspace(paths, as_mounted=True))


# --------------------------------------------------------------------------------------------- the checks


def check_answer(answer: str, question: str, names: Sequence[str], cells: Sequence[Cell], files: Sequence[str],
                 facts: DataFacts | None = None) -> list[Finding]:
    """Every guard that fires on this final answer, in ORDER. `cells`: the conversation's executed cells so far;
    `files`: the question's inputs (no files: nothing to touch); `facts`: None skips the data-dependent guards."""
    found = [no_evidence(cells, files), example_copy(answer, names, cells) or format_example_copy(answer, question,
                                                                                              names, cells),
             extra_names(answer, names)]
    if facts is not None:
        found += [self_correlation(answer, question, names, facts), out_of_range(answer, question, names, facts)]
    if files and not any(found):  # an answer already re-asked about, or a guess, needs no second message on its numbers
        found.append(unshown(answer, names, cells, question))
    found.append(report_sources(answer, question, names, cells, files))
    return [f for f in found if f is not None]


#: a request for a written Markdown report that explains how its numbers were computed (evolution and world
#: report tasks: prompts/evolve_task.md, prompts/world_messages.md)
_REPORT = re.compile(r"\bMarkdown report\b", re.I)
_EXPLAIN = re.compile(r"\bhow you computed\b", re.I)


def report_sources(answer: str, question: str, names: Sequence[str], cells: Sequence[Cell],
                   files: Sequence[str]) -> Finding | None:
    """A Markdown report (no @names asked) that names none of the data files the code that ran read, though the
    request asks it to explain how it computed its numbers. Its detail names those files."""
    if names or not files or not (_REPORT.search(question) and _EXPLAIN.search(question)):
        return None
    ran = " ".join(c.code for c in cells if c.ok)
    # a task's inputs are its workspace's top-level entries: the files inside a folder (`data/`) are what is read
    inside = [q.name for f in files for q in (sorted(p for p in Path(f).rglob("*") if p.is_file())
                                              if Path(f).is_dir() else [Path(f)])]
    read = [n for n in dict.fromkeys(inside) if n and n in ran]
    if not read:
        return None  # no cell that ran read a file by name: no_evidence's, or nothing to name
    low = answer.lower()
    if any(n.lower() in low or Path(n).stem.lower() in low for n in read):
        return None
    return Finding("report_sources", ", ".join(read))


def unshown(answer: str, names: Sequence[str], cells: Sequence[Cell], question: str = "") -> Finding | None:
    """The requested answers whose number, or named value, no output of a cell that ran shows (see the module's
    note). `question`: a name it offers as a choice ("'Normal' or 'Not Normal'") is not checked."""
    ran = [c.observation for c in cells if c.ok]
    printed = [x for text in ran for x in printed_numbers(text)]
    got = {n: v.strip() for n, v in extract_answers(answer).items()}
    missing = []
    for n in names:
        if n not in got:
            continue
        if parse_number(got[n]) is not None:
            # read as a percentage, so a fraction printed for it backs it too (claim_numbers.backs)
            if unbacked_numbers(got[n] if got[n].endswith("%") else got[n] + "%", printed):
                missing.append(f"@{n}[{got[n]}]" + _misrounded(got[n], printed))
        elif _unshown_name(got[n], question, ran):
            missing.append(f"@{n}[{got[n]}]")
    if not missing:
        return None
    return Finding("unshown", ", ".join(missing))


#: answers a question asks as a judgement, which code shows as a test's outcome rather than as the word
_JUDGEMENTS = frozenset({"yes", "no", "true", "false", "none", "null", "nan", "n/a", "na"})


def _unshown_name(value: str, question: str, outputs: Sequence[str]) -> bool:
    """A named answer (a country, a category, a column: letters, no digits) that neither the question offers nor
    any output shows, part by part for a list ("Japan, China"). The 0.5B student answered dabench-252's "which
    country" with the first country of the prompt's sample rows, no cell having looked at a country."""
    parts = [p for p in (normalise_text(x) for x in re.split(r"[,;]", value)) if p]
    if not parts or any(not re.search(r"[^\W\d_]", p) or re.search(r"\d", p) for p in parts):
        return False  # a number, a date or a mixed value: the number check's, or not checked
    checked = [p for p in parts if p not in _JUDGEMENTS and len(p) >= 2]
    if not checked:
        return False
    shown = " ".join(normalise_text(t) for t in (question, *outputs))
    return not _has_words(shown, normalise_text(value)) and any(not _has_words(shown, p) for p in checked)


def _has_words(text: str, words: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(words) + r"(?!\w)", text) is not None


def _misrounded(text: str, printed: Sequence[float]) -> str:
    """' (the printed P rounds to R)' when the answer is a printed number cut, not rounded, to its decimals (v15's
    teacher printed r = 0.8462576 and answered 0.84 three times); '' otherwise."""
    value = parse_number(text)
    if value is None or text.endswith("%"):
        return ""
    places = len(text.split(".")[1]) if "." in text else 0
    for p in printed:
        if abs(p - value) < 10 ** -places and round(p, places) != round(value, places):
            return f" (the printed {p} rounds to {round(p, places):.{places}f} at {places} decimal places)"
    return ""


def needs_facts(question: str, names: Sequence[str]) -> bool:
    """Whether a data-dependent guard could fire, so the caller profiles the data only when it matters."""
    return bool(_CORRELATION.search(question)) or (
        not _TRANSFORM.search(question) and (bool(_LOCATION_WORD.search(question))
                                             or any(set(_tokens(n)) & _LOCATION for n in names)))


def no_evidence(cells: Sequence[Cell], files: Sequence[str]) -> Finding | None:
    if not files or touched_data(cells, files):
        return None
    if not cells:
        why = "no code has run"
    elif not any(c.ok for c in cells):
        why = "every code cell failed"
    else:
        why = "no code cell that ran read the data files"
    return Finding("no_evidence", why)


def touched_data(cells: Sequence[Cell], files: Sequence[str]) -> bool:
    """Whether a cell that ran without an error read a file or used a variable a file-reading cell made. A failed
    cell still taints what it assigned: its lines before the error ran (`df = pd.read_csv(…)` then a KeyError)."""
    file_names = {Path(f).name for f in files if Path(f).name}
    data_names: set[str] = set()
    for cell in cells:
        try:
            tree = ast.parse(cell.code)
        except SyntaxError:
            continue  # it cannot have run
        nodes = list(ast.walk(tree))
        loads = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        touches = _reads_a_file(nodes, file_names) or bool(loads & data_names)
        if touches and cell.ok:
            return True
        if touches:
            data_names |= {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return False


_READERS = re.compile(r"^(read_\w+|read|open|connect|load|loadtxt|genfromtxt|fromfile|ExcelFile|load_workbook|"
                      r"profile)$")


def _reads_a_file(nodes: Iterable[ast.AST], file_names: set[str]) -> bool:
    for n in nodes:
        if isinstance(n, ast.Call):
            f = n.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if _READERS.match(name):
                return True
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and any(x in n.value for x in file_names):
            return True
    return False


@dataclass(frozen=True)
class WorkedExample:
    names: dict[str, str]  # its final answer's @name[value] pairs
    sentence: str  # its final answer without the tags


@lru_cache(maxsize=None)
def worked_example() -> WorkedExample:
    answers = [t["answer"] for t in json.loads(template(EXAMPLE_TEMPLATE).text) if "answer" in t]
    text = answers[-1] if answers else ""
    sentence = " ".join(line.strip() for line in text.splitlines() if line.strip() and "@" not in line)
    return WorkedExample(extract_answers(text), sentence)


def example_copy(answer: str, names: Sequence[str], cells: Sequence[Cell],
                 example: WorkedExample | None = None) -> Finding | None:
    ex = example or worked_example()
    got = extract_answers(answer)
    borrowed = [n for n in got if n in ex.names and n not in names]
    if borrowed:
        return Finding("example_copy", "it uses " + ", ".join(f"@{n}" for n in borrowed))
    if ex.sentence and normalise_text(ex.sentence) in normalise_text(answer):
        return Finding("example_copy", f"it repeats the sentence {ex.sentence!r}")
    seen = "\n".join(c.observation for c in cells)
    values = set(ex.names.values())
    copied = [f"@{n}[{v}]" for n, v in got.items() if v in values and not _shows_number(seen, v)]
    if copied:
        return Finding("example_copy", f"{', '.join(copied)} is the example's value, and no output of your code "
                                       "shows it")
    return None


def format_example_copy(answer: str, question: str, names: Sequence[str], cells: Sequence[Cell]) -> Finding | None:
    """An answer whose value is the example the question's answer line gives for it ("@r[value …, e.g. 0.43]"
    answered @r[0.43]) while no output of this conversation shows it: a copied placeholder, not a result."""
    seen = "\n".join(c.observation for c in cells)
    got = extract_answers(answer)
    copied, described = [], []
    for n in names:
        line = re.search(rf"@{re.escape(n)}\[([^\]]+)\]", question)
        if line and n in got and _placeholder(got[n], line.group(1)):
            described.append(f"@{n}")
            continue
        m = re.search(rf"@{re.escape(n)}\[[^\]]*?\be\.g\.\s*([-+]?[\d.,]+%?)", question)
        if m is None or n not in got:
            continue
        example, value = parse_number(m.group(1).rstrip(".,")), parse_number(got[n])
        if example is not None and value == example and not _shows_number(seen, got[n].strip()):
            copied.append(f"@{n}[{got[n].strip()}]")
    if described:
        return Finding("example_copy", f"{', '.join(described)} repeats the answer line's description of the value "
                                       "instead of giving the value your code computed")
    if not copied:
        return None
    return Finding("example_copy", f"{', '.join(copied)} is the example value of the answer line, and no output "
                                   "of your code shows it")


def _placeholder(value: str, description: str) -> bool:
    """Whether an answer's value is the answer line's own description ("value as a correlation coefficient
    (unitless, between -1 and 1), e.g. 0.432") rather than a result: it holds the description's first five words,
    or all of a shorter one (a bare "value" is the template's word, not a description)."""
    words = normalise_text(description).split()
    if len(words) < 2:
        return False
    return " ".join(words[:5]) in normalise_text(value)


def _shows_number(text: str, value: str) -> bool:
    return re.search(rf"(?<![\d.]){re.escape(value)}(?!\d)", text) is not None


def extra_names(answer: str, names: Sequence[str], example: WorkedExample | None = None) -> Finding | None:
    """Unrequested names, except the worked example's (those are example_copy's: one message per rule)."""
    if not names:
        return None  # nothing was requested: any names the model chooses are its own
    borrowed = (example or worked_example()).names
    extra = [n for n in extract_answers(answer) if n not in names and n not in borrowed]
    if not extra:
        return None
    return Finding("names", f"{', '.join(f'@{n}' for n in extra)}, which the question did not ask for")


_CORRELATION = re.compile(r"correlat|associat|relationship", re.I)


def self_correlation(answer: str, question: str, names: Sequence[str], facts: DataFacts) -> Finding | None:
    if not _CORRELATION.search(question):
        return None
    targets = correlation_targets(question, facts.columns)
    got = extract_answers(answer)
    for n in names:
        for item in re.split(r"[,;]", got.get(n, "")):
            hit = next((t for t in targets if normalise_text(item) == normalise_text(t)), None)
            if hit is not None:
                return Finding("self_correlation", f"@{n}[{got[n]}] names {hit}, the column the question "
                                                   "correlates the others with")
    return None


def correlation_targets(question: str, columns: Sequence[str]) -> list[str]:
    """Columns a correlation question correlates others with: named after 'with'/'to'/'against', or the only
    column the question names."""
    named = [c for c in columns if _mentions(question, c)]
    lead = r"\b(?:with|to|against)\s+(?:the\s+)?(?:(?:column|variable|feature|attribute)\s+)?[\"'`]?"
    after = [c for c in named if re.search(lead + re.escape(c) + r"(?!\w)", question, re.I)]
    return after or (named if len(named) == 1 else [])


def _mentions(text: str, column: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(column)}(?!\w)", text, re.I) is not None


_LOCATION = frozenset({"mean", "average", "avg", "median", "min", "minimum", "max", "maximum", "mode", "percentile",
                       "quantile", "quartile", "q1", "q3"})
_LOCATION_WORD = re.compile(r"\b(?:mean|average|median|minimum|maximum|min|max|mode|percentile|quantile|quartile)\b",
                            re.I)
# a quantity derived from a column (not one of its values) may lie anywhere: no range check when a question names one
_TRANSFORM = re.compile(r"normali[sz]|standardi[sz]|scal(?:e|ed|ing)\b|\blog|transform|z-?score|differen|change|"
                        r"growth|percent|%|ratio|\bper\b|squar|sqrt|root|\bsum\b|total|cumulative|\brate\b|"
                        r"thousand|million|billion|convert|new (?:column|feature)|multipl|divid|weighted|encod|"
                        r"residual|predict|coefficient|slope|\bstd\b|standard deviation|varian|skew|kurtos|count|"
                        r"\btimes\b|twice|double|\bhalf\b|\bplus\b|\bminus\b|[*/+]",
                        re.I)
_DERIVED_TOKENS = frozenset({"diff", "change", "ratio", "std", "var", "sum", "total", "count", "log", "pct",
                             "percent", "rate", "per", "norm", "normalized", "scaled", "z", "zscore", "growth", "sd"})


def out_of_range(answer: str, question: str, names: Sequence[str], facts: DataFacts) -> Finding | None:
    if _TRANSFORM.search(question) or not facts.ranges:
        return None
    got = extract_answers(answer)
    for n in names:
        column = location_column(n, question, names, facts)
        value = got.get(n, "")
        number = parse_number(value)
        if column is None or number is None or "%" in value:
            continue
        lo, hi = facts.ranges[column]
        slack = _half_last_place(value) + 1e-9 * max(abs(lo), abs(hi), 1.0)
        if number < lo - slack or number > hi + slack:
            return Finding("out_of_range", f"@{n}[{value}] lies outside the observed range of {column} "
                                           f"({_fmt(lo)} to {_fmt(hi)})")
    return None


def location_column(name: str, question: str, names: Sequence[str], facts: DataFacts) -> str | None:
    """The numeric column whose location statistic (mean, median, min, max, …) answer `name` reports: from the
    name itself (`mean_fare` → Fare), else from a one-answer question naming one numeric column and such a
    statistic. None when it reports anything else."""
    tokens = _tokens(name)
    if set(tokens) & _DERIVED_TOKENS:
        return None
    if set(tokens) & _LOCATION:
        matches = [c for c in facts.ranges if _contains(tokens, _tokens(c))]
        if matches:
            return max(matches, key=lambda c: len(_tokens(c)))
    if len(names) == 1 and _LOCATION_WORD.search(question):
        named = [c for c in facts.ranges if _mentions(question, c)]
        if len(named) == 1 and sum(_mentions(question, c) for c in facts.columns) == 1:
            return named[0]
    return None


def _tokens(text: str) -> list[str]:
    return [t for t in re.split(r"[^a-z0-9]+", text.lower()) if t]


def _contains(seq: list[str], sub: list[str]) -> bool:
    return bool(sub) and any(seq[i:i + len(sub)] == sub for i in range(len(seq) - len(sub) + 1))


def _half_last_place(value: str) -> float:
    digits = re.search(r"\.(\d+)", value)
    return 0.5 * 10 ** -(len(digits.group(1)) if digits else 0)


def _fmt(x: float) -> str:
    return f"{x:g}"


# --------------------------------------------------------------------------------------------- the check node's rule


def pick_reask(findings: Sequence[Finding], reasked: set[str], *, format_first: bool) -> Finding | None:
    """The finding to re-ask about now: the first in ORDER whose kind has not used its one re-ask. With
    `format_first` (the answer has format problems and format re-asks left), only the kinds that come before the
    format check may take the turn."""
    for f in sorted(findings, key=lambda f: ORDER.index(f.kind)):
        if f.kind in reasked or (format_first and f.kind not in BEFORE_FORMAT):
            continue
        return f
    return None


def record(findings: Sequence[Finding], step: int, reasked: Finding | None) -> list[GuardFiring]:
    return [GuardFiring(kind=f.kind, step=step, detail=f.detail, reasked=f is reasked) for f in findings]


def blocks(kinds: Iterable[str]) -> bool:
    """Whether an answer on which guards of these kinds fired is unsupported."""
    return any(k in BLOCKING_GUARDS for k in kinds)


def feedback(finding: Finding, names: Sequence[str]) -> str:
    """The re-ask message (a section of analyst_feedback.md)."""
    tags = " ".join(f"@{n}[value]" for n in names) or "your answer"
    return template(FEEDBACK_TEMPLATE).section(f"guard {finding.kind}", detail=finding.detail, tags=tags)


def cells(steps: Sequence[dict[str, Any]], setup: str = "") -> list[Cell]:
    """The executed code cells among recorded steps (Step dicts), after `setup` (code the session ran before the
    model's first cell, without an error: the join that makes `df` reads the data)."""
    first = [Cell(code=setup, ok=True, observation="")] if setup else []
    return first + [Cell(code=s["action"]["content"], ok=bool((s.get("execution") or {}).get("ok")),
                         observation=s.get("observation") or "")
                    for s in steps if (s.get("action") or {}).get("kind") == "code" and s.get("execution") is not None]
