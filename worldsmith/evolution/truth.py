"""Scoring evolution against a world's canonical truth (issue 13, item 8): a deterministic matcher over what a
verified finding names (the world's variables), the direction it states and the numbers it gives.

A finding is checked against
- a planted phenomenon when it names the phenomenon's measure and states a number within the phenomenon's
  tolerance of the canonical value (a fraction written as a percent counts): correct, and the phenomenon counts as
  rediscovered;
- a planted edge when it names the edge's target and one of its sources: correct when it states no direction, or
  the edge's direction (see :func:`direction`; without a direction word, the sign of a correlation coefficient it
  gives, see :func:`coefficient_sign`), and the edge counts as rediscovered when it states that
  direction; wrong when it states the opposite direction (or any direction for an edge with none).
Anything else is unchecked: the matcher does not guess, and precision is over the checked findings only (the
report says how many were unchecked). A finding that names a phenomenon's measure and a number but misses its
value is not called wrong either: it may be another quantity on the same measure.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from worldsmith.core.claim_numbers import printed_numbers
from worldsmith.core.grading import Tolerant

DEFAULT_REL = 0.02  # a phenomenon without its own tolerance: 2% relative
_UP = re.compile(r"\b(increas\w*|higher|more|positive(?:ly)?|rais\w*|grow\w*|rises?|rising|boost\w*|greater|larger|"
                 r"up)\b", re.IGNORECASE)
_DOWN = re.compile(r"\b(decreas\w*|lower|less|fewer|negative(?:ly)?|reduc\w*|drops?|dropping|falls?|falling|"
                   r"declin\w*|smaller|inverse(?:ly)?|down)\b", re.IGNORECASE)


class PlantedEdge(BaseModel):
    id: str
    sources: list[str]
    target: str
    sign: int = Field(description="+1: the target rises with the source; -1: falls; 0: no single direction")


class PlantedPhenomenon(BaseModel):
    id: str
    variables: list[str] = Field(description="its measure first, then the other variables it involves")
    value: float
    abs: float | None = None
    rel: float | None = None
    group: list[str] = Field(default_factory=list, description="a group value the phenomenon is about and the codes "
                                                               "the observed files write it as ('north', 'N'); a "
                                                               "statement must name one of them")


class TruthSheet(BaseModel):
    """What evolution may rediscover in a world: its variables, edges and numeric phenomena."""

    variables: list[str]
    edges: list[PlantedEdge] = Field(default_factory=list)
    phenomena: list[PlantedPhenomenon] = Field(default_factory=list)
    aliases: dict[str, list[str]] = Field(default_factory=dict, description="variable → the other names the "
                                          "observed files give it (a column renamed in later files: amount → amt)")


class TruthMatch(BaseModel):
    finding: str
    verdict: Literal["correct", "wrong", "unchecked"]
    matched: str | None = None
    reason: str = ""


class TruthScore(BaseModel):
    checked: int
    correct: int
    wrong: int
    unchecked: int
    precision: float | None = Field(description="correct / checked (None when nothing could be checked)")
    planted: int = Field(description="edges with a source plus numeric phenomena")
    rediscovered: list[str]
    recall: float | None
    matches: list[TruthMatch]


def _names(text: str, variable: str) -> bool:
    """`units_sold` is named as 'units_sold' or 'units sold' (whole words, any case)."""
    words = [re.escape(w) for w in variable.lower().split("_") if w]
    return bool(words) and re.search(r"\b" + r"[\s_-]+".join(words) + r"\b", text.lower()) is not None


def direction(text: str) -> int:
    """The relation's sign a statement states: one variable up and the other down ('falls as X rises', 'higher
    discount, lower amount') or a single down word ('amount drops with discount') is -1; only up words, or two
    or more down words ('lower X, lower Y'), is +1; no direction word is 0."""
    up, down = len(_UP.findall(text)), len(_DOWN.findall(text))
    if up and down:
        return -1
    if down:
        return -1 if down == 1 else 1
    return 1 if up else 0


_CORRELATION = re.compile(r"\b(?:correlat\w*|pearson|spearman)\b", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])([-−]?(?:\d+\.\d+|\.\d+|\d+))(?![\w.])")


def coefficient_sign(text: str) -> int:
    """The sign of the first correlation coefficient a statement gives after the word ('the correlation between
    basket_size and amount in the 2023 orders is 0.83' is +1): the first number in (-1, 1), other than 0, in
    the same sentence. 0 when there is none."""
    for m in _CORRELATION.finditer(text):
        clause = re.split(r"[.;](?!\d)", text[m.end():], maxsplit=1)[0]
        for raw in _NUMBER.findall(clause):
            value = float(raw.replace("−", "-"))
            if 0 < abs(value) < 1:
                return 1 if value > 0 else -1
    return 0


def _near(value: float, numbers: list[float], p: PlantedPhenomenon, percent: bool = False) -> bool:
    """Whether a stated number is the phenomenon's value; read as a percentage only when the statement writes one
    (v9: "the mean discount_pct across returned orders is 18.82" had passed for a 19.4% return rate)."""
    rule = Tolerant(abs=p.abs, rel=p.rel if (p.rel or p.abs) else DEFAULT_REL)
    return any(rule.numbers(value, n) or (percent and rule.numbers(value * 100, n)) for n in numbers)


#: a calendar date (a window the validator stated: "over the rows dated from 2023-07-01 to 2023-12-31 only")
_DATE = re.compile(r"\b\d{4}-\d{2}(?:-\d{2})?(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b")


def _names_group(text: str, p: PlantedPhenomenon) -> bool:
    """Whether a statement names the phenomenon's group, if it has one: v10's "the average income by region is
    48616.22, 47885.11, 54265.65 and 49965.90" names no region, yet one of its numbers lies within 2% of the north's
    mean. A label is matched as a word in any case; a code of one or two letters ('N') only as written."""
    if not p.group:
        return True
    for label in p.group:
        flags = 0 if len(label) <= 2 else re.IGNORECASE
        if re.search(rf"(?<![\w'\"]){re.escape(label)}(?![\w'\"])|['\"]{re.escape(label)}['\"]", text, flags):
            return True
    return False


def match_finding(finding_id: str, statement: str, sheet: TruthSheet) -> TruthMatch:
    numbers = printed_numbers(_DATE.sub(" ", statement))  # a date's parts are no stated values (12 for December)
    percent = re.search(r"%|\bper ?cent\b", statement, re.IGNORECASE) is not None

    def _mentions(text: str, variable: str) -> bool:
        return any(_names(text, v) for v in [variable, *sheet.aliases.get(variable, [])])

    for p in sheet.phenomena:
        if _mentions(statement, p.variables[0]) and _near(p.value, numbers, p, percent) and _names_group(statement, p):
            return TruthMatch(finding=finding_id, verdict="correct", matched=p.id,
                              reason=f"states {p.id} = {p.value:g} within tolerance")
    said = direction(statement) or coefficient_sign(statement)
    for e in sheet.edges:
        if not (_mentions(statement, e.target) and any(_mentions(statement, s) for s in e.sources)):
            continue
        if said == 0:
            return TruthMatch(finding=finding_id, verdict="correct", matched=None,
                              reason=f"names the planted relation {e.id} without a direction to check")
        if e.sign == 0:  # a level effect (categories, seasons) has no single direction to state
            return TruthMatch(finding=finding_id, verdict="correct", matched=None,
                              reason=f"names the planted relation {e.id}, which has no single direction")
        if said == e.sign:
            return TruthMatch(finding=finding_id, verdict="correct", matched=e.id,
                              reason=f"states the direction of {e.id}")
        return TruthMatch(finding=finding_id, verdict="wrong", matched=e.id,
                          reason=f"states the opposite direction of {e.id}")
    return TruthMatch(finding=finding_id, verdict="unchecked", reason="names no planted relation or value")


def score_findings(findings: list[tuple[str, str]], sheet: TruthSheet) -> TruthScore:
    """Precision over the checked findings ((id, statement) pairs) and recall of the planted effects."""
    matches = [match_finding(fid, text, sheet) for fid, text in findings]
    correct = sum(m.verdict == "correct" for m in matches)
    wrong = sum(m.verdict == "wrong" for m in matches)
    planted = {e.id for e in sheet.edges if e.sources} | {p.id for p in sheet.phenomena}
    found = sorted({m.matched for m in matches if m.verdict == "correct" and m.matched in planted})
    return TruthScore(checked=correct + wrong, correct=correct, wrong=wrong, unchecked=len(matches) - correct - wrong,
                      precision=correct / (correct + wrong) if correct + wrong else None, planted=len(planted),
                      rediscovered=found, recall=len(found) / len(planted) if planted else None, matches=matches)


# --------------------------------------------------------------------------------------------- from a world


def edge_sign(mechanism: Any) -> int:
    """The direction a mechanism moves its target as its source rises (0 when it has none: levels, seasons)."""
    kind = mechanism.type
    if kind in ("linear", "logistic", "multiplicative", "lag", "interaction"):
        coef = float(getattr(mechanism, "coef", 0.0) or 0.0)
        return 0 if coef == 0 or getattr(mechanism, "levels", None) else int(math.copysign(1, coef))
    if kind == "threshold":
        return int(math.copysign(1, mechanism.jump)) * (1 if mechanism.direction == "above" else -1)
    if kind == "saturating":
        return int(math.copysign(1, mechanism.vmax))
    return 0


def _recipe_variables(recipe: Any) -> list[str]:
    names = [getattr(recipe, k, None) for k in ("variable", "y", "x", "by")]
    return [n for n in names if isinstance(n, str)]


def truth_sheet(world_dir: str | Path) -> TruthSheet:
    """The world's variables, edges (with directions) and numeric phenomena (with canonical values)."""
    from worldsmith.evolution.worlds.audit import load_contract, load_phenomena_truth

    world_dir = Path(world_dir)
    contract = load_contract(world_dir)
    truth = load_phenomena_truth(world_dir)
    variables = [v.name for v in contract.variables] + [a.name for e in contract.entities
                                                        for a in getattr(e, "attributes", [])]
    edges = [PlantedEdge(id=e.id or e.default_id(), sources=list(e.sources), target=e.target,
                         sign=edge_sign(e.mechanism)) for e in contract.edges]
    aliases: dict[str, list[str]] = {}
    codes: dict[str, dict[str, list[str]]] = {}  # variable -> value -> the codes observed files write it as
    for system in getattr(contract, "systems", []):
        for d in system.defects:
            if d.type == "rename" and d.new_name not in aliases.get(d.column, []):
                aliases.setdefault(d.column, []).append(d.new_name)
            if d.type == "recode":
                for value, code in (getattr(d, "mapping", None) or {}).items():
                    codes.setdefault(d.variable, {}).setdefault(str(value), []).append(str(code))
    phenomena = []
    for p in contract.phenomena:
        t = truth.get(p.id)
        if t is None or not isinstance(t.value, (int, float)) or isinstance(t.value, bool):
            continue
        group, by = getattr(p.recipe, "group", None), getattr(p.recipe, "by", None)
        labels = [str(group), *codes.get(str(by), {}).get(str(group), [])] if group is not None else []
        phenomena.append(PlantedPhenomenon(id=p.id, variables=_recipe_variables(p.recipe) or [p.id],
                                           value=float(t.value), abs=t.tolerance.abs, rel=t.tolerance.rel,
                                           group=list(dict.fromkeys(labels))))
    return TruthSheet(variables=variables, edges=edges, phenomena=phenomena, aliases=aliases)
