"""Deterministic evidence for rubric items with a numeric expected value.

A criterion such as "reports the Premium churn rate (expected 0.125)" is checked without an LLM:

1. `@name[value]` tags whose name matches the criterion id are authoritative: if any is present, only tags count.
2. Otherwise the response is cut into sentences (lines, sentence ends, Markdown table rows with their header);
   sentences that mention enough of the criterion's key terms (from `observable`, falling back to `satisfy`)
   are searched for numbers, and the item is met when any of them is within tolerance.

Percentages: '12.5%' also stands for 0.125; when the criterion itself talks about percent, a bare 0.125
matches an expected 12.5 and vice versa. Without an explicit tolerance a number matches when it is the
expected value rounded to the precision the response wrote (so '0.21' matches 0.2134), within 5% relative.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from worldsmith.core.schemas import Criterion, Tolerance
from worldsmith.core.grading import TAG_RE

_NUM_RE = re.compile(
    r"(?<![\w.])([-+−]?)(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE]([-+]?\d+))?(\s*%|\s*percent\b)?",
    re.IGNORECASE,
)
_WORD_RE = re.compile(r"[a-z][a-z0-9]+")
_SENT_SPLIT_RE = re.compile(r"(?<=[.!?;])\s+(?=[A-Z(\"'*_`-])")
_PERCENT_RE = re.compile(r"%|\bpercent|\bpercentage", re.IGNORECASE)
_STOPWORDS = frozenset("""
a an the of in on at to for from by with and or not no is are was were be been being it its this that these those
as into than then there their which who whom whose what when where how why all any each per over under between
about after before during response report reports reported states stated state mentions mention gives give given
value values number numbers figure correct correctly approximately approx around roughly least most should must
does do did has have had shows show shown says say claim claims answer answers computed compute computes
""".split())
DEFAULT_REL_GUARD = 0.05  # rounding-aware default tolerance never accepts more than 5% relative error


@dataclass(frozen=True)
class NumberMention:
    value: float
    decimals: int  # digits after the decimal point as written (for rounding-aware matching)
    percent: bool
    text: str


@dataclass(frozen=True)
class NumericCheck:
    """Outcome of a deterministic check. `met` is None when no evidence was found either way."""

    met: bool | None
    method: Literal["tag", "numeric", "none"]
    evidence: str
    candidates: tuple[float, ...] = ()


def find_numbers(text: str) -> list[NumberMention]:
    out = []
    for m in _NUM_RE.finditer(text):
        sign, digits, exp, pct = m.groups()
        try:
            value = float(digits.replace(",", ""))
        except ValueError:  # pragma: no cover - the regex only admits digits
            continue
        decimals = len(digits.split(".", 1)[1]) if "." in digits else 0
        if exp:
            value *= 10.0 ** int(exp)
            decimals = max(0, decimals - int(exp))
        if sign in ("-", "−"):
            value = -value
        out.append(NumberMention(value, decimals, bool(pct), m.group(0).strip()))
    return out


def _stem(word: str) -> str:
    w = word.lower()
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    return w[:7]


def key_terms(criterion: Criterion) -> list[str]:
    """Content words of the observable (or satisfy text) as stems, in order, without duplicates."""
    for source in (criterion.observable, criterion.satisfy, criterion.id.replace("_", " ")):
        terms: list[str] = []
        for w in _WORD_RE.findall(source.lower()):
            if w in _STOPWORDS or w.isdigit():
                continue
            s = _stem(w)
            if s not in terms:
                terms.append(s)
        if terms:
            return terms
    return []


def split_sentences(text: str) -> list[str]:
    """Sentences and lines; a Markdown table row carries its header so column names count as context."""
    out: list[str] = []
    header: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            header = None
            continue
        if stripped.startswith("|"):
            if re.fullmatch(r"\|?[\s:|-]+\|?", stripped):  # the |---|---| separator
                continue
            if header is None:
                header = stripped
                out.append(stripped)
            else:
                out.append(f"{header} {stripped}")
            continue
        header = None
        out.extend(p for p in _SENT_SPLIT_RE.split(stripped) if p.strip())
    return out


def _required_hits(n_terms: int) -> int:
    return max(1, min(3, math.ceil(n_terms / 2)))


def relevant_sentences(text: str, terms: list[str]) -> list[str]:
    """Sentences mentioning enough key terms, best first."""
    if not terms:
        return []
    need = _required_hits(len(terms))
    scored = []
    for i, sent in enumerate(split_sentences(text)):
        stems = {_stem(w) for w in _WORD_RE.findall(sent.lower())}
        hits = sum(1 for t in terms if t in stems)
        if hits >= need:
            scored.append((-hits, i, sent))
    return [s for _, _, s in sorted(scored)]


def _close(expected: float, got: float, tol: Tolerance | None, decimals: int) -> bool:
    if math.isnan(expected) or math.isnan(got):
        return False
    if tol is not None and (tol.abs is not None or tol.rel is not None):
        return tol.accepts(expected, got)
    diff = abs(expected - got)
    if diff <= 1e-9:
        return True
    if decimals < 0:
        return False
    within_rounding = diff <= 0.5 * 10.0 ** (-decimals) + 1e-12
    within_guard = expected != 0 and diff <= DEFAULT_REL_GUARD * abs(expected) + 1e-12
    return within_rounding and within_guard


def _interpretations(n: NumberMention, percent_context: bool) -> list[tuple[float, int]]:
    """(value, decimals) readings of a number: as written, as a fraction of a percent, as a percentage."""
    out = [(n.value, n.decimals)]
    if n.percent:
        out.append((n.value / 100.0, n.decimals + 2))
    elif percent_context:
        out.append((n.value / 100.0, n.decimals + 2))
        out.append((n.value * 100.0, max(0, n.decimals - 2)))
    return out


def _matches(expected: float, mention: NumberMention, tol: Tolerance | None, percent_context: bool) -> bool:
    return any(_close(expected, v, tol, d) for v, d in _interpretations(mention, percent_context))


def _norm_name(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def check_numeric(criterion: Criterion, text: str) -> NumericCheck:
    """Deterministic check of a criterion with a numeric expected value against a response text."""
    if not criterion.deterministic:
        raise ValueError(f"criterion {criterion.id!r} has no numeric expected_value; it needs the judge")
    expected = float(criterion.expected_value)  # type: ignore[arg-type]
    tol = criterion.tolerance
    crit_text = f"{criterion.observable} {criterion.satisfy}"
    percent_context = bool(_PERCENT_RE.search(crit_text))

    tags = [raw.strip() for name, raw in TAG_RE.findall(text or "") if _norm_name(name) == _norm_name(criterion.id)]
    if tags:  # a tag named like the criterion is authoritative: free text is not searched
        for raw in tags:
            mentions = find_numbers(raw)
            if mentions and _matches(expected, mentions[0], tol, percent_context):
                return NumericCheck(True, "tag", f"@{criterion.id}[{raw}] matches {expected:g}", (mentions[0].value,))
        return NumericCheck(False, "tag", f"@{criterion.id}[{tags[-1]}] does not match expected {expected:g}")

    terms = key_terms(criterion)
    sentences = relevant_sentences(text, terms)
    if not sentences:
        return NumericCheck(None, "none", f"no sentence mentions the key terms {terms}")
    seen: list[float] = []
    for sent in sentences:
        for mention in find_numbers(sent):
            seen.append(mention.value)
            if _matches(expected, mention, tol, percent_context):
                return NumericCheck(True, "numeric", f"{mention.text!r} in: {_clip(sent)}", (mention.value,))
    if not seen:
        return NumericCheck(None, "none", f"sentences mention {terms} but contain no numbers: {_clip(sentences[0])}")
    shown = ", ".join(f"{v:g}" for v in seen[:8])
    return NumericCheck(False, "numeric", f"numbers near {terms} ({shown}) are not within tolerance of {expected:g}",
                        tuple(seen))


def _clip(s: str, n: int = 160) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"
