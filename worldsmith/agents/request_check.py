"""Deterministic checks of a stakeholder request: voice, target, files, leaked numbers, goal.

A request is what the stakeholder asks the analyst; it must fit what the task grades. Each check returns the
reason a request fails, so the writer can feed it back to the model or record it when it falls back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from worldsmith.core.answer_spec import AnswerFacets, is_data_file

# the analyst's own plan ("I will analyze…", "my analysis"), not a request to the analyst
_PLAN_RE = re.compile(
    r"\b(?:i|we)(?:'ll|\s+will|\s+am going to|\s+are going to|\s+plan to|\s+intend to|\s+shall)\s+"
    r"(?:first\s+|then\s+|now\s+)?(?:analy[sz]e|compute|calculate|examine|investigate|explore|look (?:into|at)|run|"
    r"check|model|regress|clean|merge|join|load|review|start|quantify|estimate|test|assess|build|fit|compare|"
    r"identify|determine|use the|break down|segment)\b"
    r"|\bmy (?:analysis|approach|plan|methodology)\b|\bour analysis will\b|\blet me\b|\bstep \d\b",
    re.IGNORECASE)
# a request that presupposes the finding ("why is churn higher", "how much did usage increase")
_PRESUPPOSE_RE = re.compile(
    r"\bwhy (?:is|are|was|were|did|does|do|has|have)?\s*(?:[\w'-]+\s+){0,6}?(?:higher|lower|up|down|increas\w*|"
    r"decreas\w*|rise|rose|risen|drop\w*|fall|fell|fallen|grew|grow\w*|improv\w*|worsen\w*)\b"
    r"|\bhow much (?:did|does|has|have|do)?\s*(?:[\w'-]+\s+){0,6}?(?:increas\w*|decreas\w*|rise|rose|risen|"
    r"drop\w*|fall|fell|fallen|grow|grew|improv\w*|worsen\w*|go up|go down)\b", re.IGNORECASE)
_ADDRESSED_RE = re.compile(r"\b(?:you|your|please|tell me|let me know|can we get|i need|we need)\b", re.IGNORECASE)
_FILE_RE = re.compile(r"[\w./-]+\.(?:csv\.gz|csv|xlsx|xls|parquet|jsonl|json|sqlite|db|md|txt|pdf|docx|tsv)\b",
                      re.IGNORECASE)
_NUMBER_RE = re.compile(r"(?<![\w.])[+-]?\d+(?:\.\d+)?(?![\w.])")
_MONEY_RE = re.compile(r"\b(?:cost|costs|roi|return on investment|profit|profits|savings|budget impact|"
                       r"revenue impact|dollar impact)\b", re.IGNORECASE)
_MONEY_UNITS = {"usd", "eur", "gbp", "$", "€", "£"}
# a variable asked for as a quantity: "price gap", "average price", "the price difference"
# ("price increase" / "price change" stay allowed: they describe the intervention, not a quantity asked for)
_ASKED_AFTER = r"(?:gaps?|differences?|differs?|levels?|uplift|slopes?|correlat\w*|trends?)"
_ASKED_BEFORE = r"(?:average|mean|median|typical|total|highest|lowest)"


def _words(text: str) -> set[str]:
    return {w for w in re.split(r"[_\W]+", text.lower()) if len(w) > 2}


def _mentions(low: str, words: set[str]) -> bool:
    """Any of the words appears, up to its ending ('churned' is named by 'churn', 'invoices' by 'invoice')."""
    return any((w[:5] if len(w) > 5 else w) in low for w in words if w not in _COMMON)


def leaked_numbers(text: str, values: Iterable[float]) -> list[str]:
    """Numbers in `text` equal to an expected value or its rounding (to the decimals the text shows)."""
    found = []
    values = [float(v) for v in values]
    for m in _NUMBER_RE.finditer(text):
        shown = m.group(0)
        decimals = len(shown.split(".")[1]) if "." in shown else 0
        x = float(shown)
        if decimals == 0 and abs(x) < 10:
            continue  # 'Q1', 'two files', '3 months' are no leak of a value like 2.7
        if any(abs(round(v, decimals) - x) < 1e-9 for v in values):
            found.append(shown)
    return found


def _measure_words(a: AnswerFacets) -> set[str]:
    return _words(a.measure.variable) | (_words(a.x.variable) if a.x else set())


def _asks_for(low: str, word: str) -> str | None:
    """The phrase in which `word` (up to its ending) is asked for as a quantity, if any."""
    w = re.escape(word[:5] if len(word) > 5 else word)
    m = re.search(rf"\b{w}\w*\s+(?:\w+\s+)?{_ASKED_AFTER}\b|\b{_ASKED_BEFORE}\s+(?:\w+\s+)?{w}\w*", low)
    return m.group(0) if m else None


def goal_problems(low: str, answers: Sequence[AnswerFacets], others: Sequence[AnswerFacets],
                  one_quantity: bool = False) -> list[str]:
    """A request asks for no quantity that only other tasks grade (`others`: e.g. the price gap beside the churn
    gap of the same price test); a closed-form task's request (`one_quantity`) also names its measure."""
    problems = []
    if one_quantity and answers and not _mentions(low, _measure_words(answers[0])):
        problems.append(f"the request must ask about the graded quantity ({quantity_name(answers[0])})")
    own = set().union(*(_measure_words(a) for a in answers)) if answers else set()
    for o in others:
        for w in sorted(_measure_words(o) - own - _COMMON):
            if phrase := _asks_for(low, w):
                problems.append(f"the request also asks for {phrase!r}, which this task does not grade; ask only "
                                "for " + ", ".join(quantity_name(a) for a in answers))
                break
    return problems


def quantity_name(a: AnswerFacets) -> str:
    """Short words for a graded quantity: its measure (and the variable it is set against)."""
    x = f" against {a.x.variable.replace('_', ' ')}" if a.x else ""
    return f"{a.quantity.replace('_', ' ')} of {a.measure.variable.replace('_', ' ')}{x}"


def request_problems(text: str, *, target: str, target_description: str, files: Sequence[str],
                     answers: Sequence[AnswerFacets], expected: Iterable[float] = (),
                     others: Sequence[AnswerFacets] = (), one_quantity: bool = False) -> list[str]:
    """Why a request is unusable (empty when it fits what is graded).

    `files`: the data room's files (world-relative); `answers`: the specs the request's tasks grade;
    `expected`: the graded values (in the recipe's and in the reported unit) that must not appear; `others`:
    quantities graded by other tasks, which the request must not ask for; `one_quantity`: a closed-form task's
    request, which must name the measure of its one answer."""
    problems: list[str] = []
    low = text.lower()
    if not 60 <= len(text) <= 1500:
        problems.append(f"the request must be 60-1500 characters (got {len(text)})")
    if m := _PLAN_RE.search(text):
        problems.append(f"write as the stakeholder asking the analyst, not as the analyst's plan (found {m.group(0)!r})")
    elif not _ADDRESSED_RE.search(text):
        problems.append("address the analyst directly (e.g. 'can you…', 'please…', 'I need you to…')")
    if m := _PRESUPPOSE_RE.search(text):
        problems.append(f"ask for the difference or effect whichever way it goes, not presuppose it (found {m.group(0)!r})")
    names = _words(target)
    measure_words = set().union(*(_words(a.measure.variable) | (_words(a.x.variable) if a.x else set())
                                  for a in answers)) if answers else set()
    if not _mentions(low, names | (_words(target_description) - _COMMON)):
        problems.append(f"the request must name what it is about ({target.replace('_', ' ')})")
    if answers and not _mentions(low, measure_words | names):
        problems.append("the request must ask about the graded quantity ("
                        + ", ".join(sorted({a.measure.variable.replace('_', ' ') for a in answers})) + ")")
    elif answers or others:
        problems += goal_problems(low, answers, others, one_quantity)
    basenames = {f.rsplit("/", 1)[-1].lower(): f for f in files}
    for ref in dict.fromkeys(m.group(0) for m in _FILE_RE.finditer(text)):
        base = ref.rsplit("/", 1)[-1].lower()
        if base not in basenames:
            problems.append(f"the request names {ref!r}, which is not in the data room")
        elif not is_data_file(basenames[base]):
            problems.append(f"the request names {ref!r} as data; it is documentation, not a data file")
    if leaks := leaked_numbers(text, expected):
        problems.append(f"the request must not state the numbers the analyst has to compute (found {', '.join(leaks)})")
    money = bool(answers) and not any((a.unit_label or "").split(" ")[0].split("/")[0].lower() in _MONEY_UNITS
                                      for a in answers)
    if money and (m := _MONEY_RE.search(text)):
        problems.append(f"the request asks for {m.group(0)!r}, which no graded quantity computes")
    return problems


_COMMON = {"the", "and", "for", "per", "with", "from", "this", "that", "rate", "number", "total", "value"}
