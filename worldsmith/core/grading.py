"""Closed-form grading: the one number parser, `@name[value]` extraction, the comparators and DABench's metric.

Standard library only and importing nothing from worldsmith, on purpose: task packages ship this very file as
their verifier (`tests/grade.py`), so a Harbor-style runner grades without worldsmith installed:
    python grade.py expected.json response.txt [reward.txt]
expected.json is a list of {name, value, tolerance?: {abs, rel}, unit?, rule?: "official"|"tolerant"}; the
verifier prints the verdicts as JSON, writes the score to reward.txt, and exits 0 when every answer is right.

Rules:
- `official_dabench`: InfiAgent-DABench's eval_closed_form.py, quirks included — tags found by
  `@(\\w+)\\[(.*?)\\]` without DOTALL (a value never spans lines; an unclosed `@a[` on the same line swallows
  the next tag), values not stripped, `got == label` or `abs(float(got) - float(label)) < 1e-6` (strict `<`,
  Python's `float()` with its own quirks: spaces, `1_000`, full-width digits, `nan`, `inf`).
- `tolerant(abs, rel, unit)`: for world and workspace tasks. Texts equal after normalisation, or numbers
  within `abs` OR `rel` of the expected one (1e-6 absolute when neither is given), lists element-wise, and,
  where the spec declares a unit, the unit's spellings (see `_unit_kind`).
- Metric (`dabench_accuracies`): by question, by sub-question, proportional; the official denominators drop
  questions whose response is empty, the conservative ones count them wrong.
"""

from __future__ import annotations

import json
import math
import re
import sys
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

OFFICIAL_TAG_RE = re.compile(r"@(\w+)\[(.*?)\]")
#: Lenient tags for our own rules: a value may span lines but never runs into the next `@name[`.
TAG_RE = re.compile(r"@(\w+)\[((?:(?!@\w+\[).)*?)\]", re.DOTALL)
OFFICIAL_ABS_TOL = 1e-6
DEFAULT_ABS_TOL = 1e-6
_FLOAT_SLACK = 1e-12  # binary rounding: 34.655 - 34.65 must count as within abs=0.005
_NUM = r"[+-]?(?:\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_CURRENCY = {"$": "$", "usd": "$", "dollar": "$", "dollars": "$", "€": "€", "eur": "€", "euro": "€",
             "euros": "€", "£": "£", "gbp": "£", "pound": "£", "pounds": "£"}
_QUANTITY_RE = re.compile(rf"^(?P<sign>[+-]?)\s*(?P<cur>[$€£])?\s*(?P<num>{_NUM})\s*(?P<suffix>.*?)$")
_UNIT_WORDS_RE = re.compile(r"[^\W\d_]+(?: [^\W\d_]+)*")
_PERCENT_UNITS = {"%", "percent", "percentage", "percentages", "pp", "p.p.", "percentage point",
                  "percentage points", "percent points"}
_FRACTION_UNITS = {"fraction", "ratio", "proportion", "share", "rate"}
_PERCENT_SUFFIXES = {"%", "pp", "percent", "percentage points", "percentage point", "percent points"}

Comparator = Callable[[Any, "str | None"], bool]


# --------------------------------------------------------------------------------------------- extraction


def extract_answers(text: str | None, *, official: bool = False) -> dict[str, str]:
    """`@name[value]` pairs; a repeated name keeps its last value (models restate final answers).

    official=True reads tags exactly as the official script does (raw values, one line each); otherwise values
    are stripped and may span lines, but an unclosed tag never swallows the next one."""
    if official:
        return dict(OFFICIAL_TAG_RE.findall(text or ""))
    return {name: value.strip() for name, value in TAG_RE.findall(text or "")}


# --------------------------------------------------------------------------------------------- numbers


class Quantity(NamedTuple):
    number: float
    currency: str | None  # "$", "€", "£" when the value carries one
    suffix: str  # what follows the number, lower-cased: "", "%", "pp", "kg"…


def parse_quantity(value: object) -> Quantity | None:
    """The number in a value and what decorates it: '1,234.5', '$3', '-$3', '12 %', '7.2 pp', '3 kg'.

    Thousands separators must group by three ('1,2' is not a number), so lists never read as one number."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return Quantity(float(value), None, "")
    s = unicodedata.normalize("NFKC", str(value)).strip().strip("'\"`").strip()
    m = _QUANTITY_RE.match(s)
    if not m or (m.group("sign") and m.group("num")[0] in "+-"):  # '-$-3': two signs
        return None
    currency = m.group("cur")
    suffix = m.group("suffix").strip().lower().rstrip(".")
    suffix = "pp" if suffix == "p.p" else suffix
    if suffix in _CURRENCY:  # '1234 USD'
        if currency not in (None, _CURRENCY[suffix]):
            return None
        currency, suffix = _CURRENCY[suffix], ""
    elif suffix not in ("", "%") and not _UNIT_WORDS_RE.fullmatch(suffix):
        return None  # '1 2 3', '3)': not one quantity
    number = float(m.group("num").replace(",", ""))
    return Quantity(-number if m.group("sign") == "-" else number, currency, suffix)


def parse_number(value: object) -> float | None:
    """The number a value denotes: '1,234.5' → 1234.5, '$3' → 3, '12%' → 0.12; None for anything else
    (a unit word, a list, text)."""
    q = parse_quantity(value)
    if q is None or q.suffix not in ("", "%"):
        return None
    return q.number / 100.0 if q.suffix == "%" else q.number


def normalise_text(value: object) -> str:
    s = unicodedata.normalize("NFKC", str(value)).strip().strip("'\"`").strip().lower()
    return re.sub(r"\s+", " ", s).rstrip(".")


# --------------------------------------------------------------------------------------------- comparators


def official_dabench(expected: object, got: str | None) -> bool:
    """InfiAgent-DABench's is_equal: the same string, or numbers less than 1e-6 apart (as Python's float reads them)."""
    label = expected if isinstance(expected, str) else str(expected)
    if got == label:
        return True
    try:
        return abs(float(got) - float(label)) < OFFICIAL_ABS_TOL  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return False


class Tolerant:
    """The one tolerance rule: within `abs`, or within `rel` of the expected value (1e-6 when neither is set)."""

    def __init__(self, abs: float | None = None, rel: float | None = None, unit: str | None = None) -> None:
        self.abs, self.rel, self.unit = abs, rel, unit

    def numbers(self, expected: float, got: float) -> bool:
        if math.isnan(expected) or math.isnan(got):
            return False
        diff = abs(expected - got)
        abs_tol = DEFAULT_ABS_TOL if self.abs is None and self.rel is None else self.abs
        if abs_tol is not None and diff <= abs_tol + _FLOAT_SLACK:
            return True
        return self.rel is not None and diff <= self.rel * abs(expected) + _FLOAT_SLACK

    def __call__(self, expected: object, got: str | None) -> bool:
        if got is None:
            return False
        if normalise_text(expected) == normalise_text(got):
            return True
        e = _expected_number(expected, self.unit)
        if e is None or parse_quantity(got) is None:
            return self._lists(expected, got)
        return any(self.numbers(e, x) for x in unit_readings(got, self.unit))

    def _lists(self, expected: object, got: str) -> bool:
        exp_items, got_items = _as_list(expected), _as_list(got)
        if exp_items is None or got_items is None or len(exp_items) != len(got_items):
            return False
        return all(self(a, b) for a, b in zip(exp_items, got_items))


def tolerant(abs: float | None = None, rel: float | None = None, unit: str | None = None) -> Tolerant:
    return Tolerant(abs, rel, unit)


def _unit_kind(unit: str | None) -> str | None:
    """'percent' (percentage points too), 'fraction', a currency symbol, another unit word, or None."""
    if not unit or not unit.strip():
        return None
    u = unit.strip().lower()
    if u in _PERCENT_UNITS:
        return "percent"
    if u in _FRACTION_UNITS:
        return "fraction"
    return _CURRENCY.get(u, u)


def _expected_number(expected: object, unit: str | None) -> float | None:
    """The expected value in the spec's unit: '7.2%' is 7.2 for a percent unit, 0.072 otherwise."""
    q = parse_quantity(expected)
    if q is None:
        return None
    kind = _unit_kind(unit)
    if kind == "percent":
        return q.number if q.suffix in {"", *_PERCENT_SUFFIXES} else None
    if kind not in (None, "fraction", "$", "€", "£") and q.suffix == kind:
        return q.number  # '3 kg' for a kg unit
    return parse_number(expected)


def unit_readings(value: object, unit: str | None) -> list[float]:
    """The values an answer ('7.2', '7.2 pp', '7.2%', '$3') may denote under the declared unit; none when it is
    a different quantity or no number. The one unit rule: rubric items with a unit read numbers through it too."""
    g = parse_quantity(value)
    if g is None:
        return []
    kind = _unit_kind(unit)
    if kind is None:  # no unit declared: '12%' is 0.12, or 12 when the label kept the percent number
        if g.suffix == "%":
            return [g.number / 100.0, g.number]
        return [g.number] if g.suffix == "" else []
    if kind == "percent":
        return [g.number] if g.currency is None and g.suffix in {"", *_PERCENT_SUFFIXES} else []
    if kind == "fraction":
        if g.currency is not None:
            return []
        return [g.number] if g.suffix == "" else [g.number / 100.0] if g.suffix == "%" else []
    if kind in ("$", "€", "£"):
        return [g.number] if g.suffix == "" and g.currency in (None, kind) else []
    ok_suffix = g.suffix in ("", kind) or g.suffix.rstrip("s") == kind.rstrip("s")
    return [g.number] if g.currency is None and ok_suffix else []


def _as_list(value: object) -> list[str] | None:
    s = str(value).strip().strip("[]()")
    return [p.strip() for p in s.split(",")] if "," in s else None


def comparator(spec: dict[str, Any], rule: str = "tolerant") -> Comparator:
    """The comparator a spec asks for: its own `rule` key wins over the default `rule`."""
    rule = spec.get("rule") or rule
    if rule == "official":
        return official_dabench
    if rule != "tolerant":
        raise ValueError(f"answer {spec.get('name')!r}: unknown grading rule {rule!r} (official or tolerant)")
    tol = spec.get("tolerance") or {}
    return Tolerant(tol.get("abs"), tol.get("rel"), spec.get("unit"))


# --------------------------------------------------------------------------------------------- grading


def is_empty_response(response: str | None) -> bool:
    """What the official metric leaves out of its denominators: a missing or empty response (not whitespace)."""
    return not response


def grade(expected: Sequence[dict[str, Any]], response: str | None, rule: str = "tolerant") -> dict[str, Any]:
    """Grade a response against [{name, value, tolerance?, unit?, rule?}].

    Returns {rule, score, passed, empty, items: [{name, expected, got, correct}]}: one item per answer name (a
    repeated name keeps its last value, as the official script's dict does); score = fraction correct."""
    specs = {str(s["name"]): s for s in expected}
    official = all((s.get("rule") or rule) == "official" for s in specs.values()) if specs else rule == "official"
    got = extract_answers(response, official=official)
    items = []
    for name, spec in specs.items():
        value = got.get(name)
        items.append({"name": name, "expected": spec["value"], "got": value,
                      "correct": bool(comparator(spec, rule)(spec["value"], value))})
    n_ok = sum(i["correct"] for i in items)
    return {"rule": rule, "score": n_ok / len(items) if items else 0.0, "passed": bool(items) and n_ok == len(items),
            "empty": is_empty_response(response), "items": items}


def grade_label(label: Sequence[Sequence[Any]], response: str | None, rule: str = "official") -> dict[str, Any]:
    """Grade a DABench-style label `[[name, value], …]` (the golden table's and `worldsmith grade`'s input)."""
    return grade([{"name": str(n), "value": v} for n, v in label], response, rule)


# --------------------------------------------------------------------------------------------- metric


class Outcome(NamedTuple):
    """One graded question: sub-answers right, sub-answers asked, whether its response was empty, and its
    proportional value when it is not correct/total (a rubric task's score)."""

    correct: float
    total: int
    empty: bool = False
    fraction: float | None = None


def dabench_accuracies(outcomes: Iterable[Outcome | tuple]) -> dict[str, dict[str, float]]:
    """DABench's three accuracies under both denominators.

    official: questions with an empty response are left out (eval_closed_form.py skips them);
    conservative: every question counts, an empty response is wrong. Each gives by_question,
    by_sub_question, proportional and n (questions counted)."""
    rows = [Outcome(*o) for o in outcomes]
    return {"official": _accuracies([o for o in rows if not o.empty]), "conservative": _accuracies(
        [o._replace(correct=0, fraction=0.0) if o.empty else o for o in rows])}


def _accuracies(rows: list[Outcome]) -> dict[str, float]:
    n = len(rows)
    subs = sum(o.total for o in rows)
    prop = sum(o.fraction if o.fraction is not None else (o.correct / o.total if o.total else 0.0) for o in rows)
    return {"by_question": sum(1 for o in rows if o.total and o.correct == o.total) / n if n else 0.0,
            "by_sub_question": sum(o.correct for o in rows) / subs if subs else 0.0,
            "proportional": prop / n if n else 0.0, "n": n}


# --------------------------------------------------------------------------------------------- decimals

_DECIMALS_RE = re.compile(r"\b(\d+|one|two|three|four|five|six)[\s-]+decimal", re.IGNORECASE)
_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def decimals_by_name(text: str, names: Iterable[str] = ()) -> dict[str, int]:
    """Decimal places asked for each `@name[placeholder]` of a format, clause by clause.

    A clause is a run of tags plus the description that follows them, up to the next tag. A "N decimal"
    phrase inside a tag's brackets applies to that tag; one in a clause's description applies to the tags
    whose placeholder (or name) is mentioned since the previous phrase, else to the clause's tags not yet
    given one. Phrases before the first tag (question, constraints) apply
    to tags (and `names`) left without one, only when they all ask for the same number."""
    text = text or ""
    tags = list(OFFICIAL_TAG_RE.finditer(text))
    out: dict[str, int] = {}
    groups: list[tuple[list[re.Match[str]], str]] = []
    for i, m in enumerate(tags):
        end = tags[i + 1].start() if i + 1 < len(tags) else len(text)
        between = text[m.end():end]
        if groups and not groups[-1][1].strip(" ,;and\n\t"):
            groups[-1] = (groups[-1][0] + [m], between)  # consecutive tags share the description after them
        else:
            groups.append(([m], between))
    for members, description in groups:
        _assign(description, [(m.group(1), m.group(2)) for m in members], out)
    for m in tags:  # '@skew[float, rounded to two decimal places]': the tag's own placeholder says it
        inside = _DECIMALS_RE.search(m.group(2))
        if inside:
            out[m.group(1)] = _to_int(inside.group(1))
    preamble = {_to_int(p.group(1)) for p in _DECIMALS_RE.finditer(text[:tags[0].start() if tags else len(text)])}
    if len(preamble) == 1:
        places = preamble.pop()
        for name in [m.group(1) for m in tags] + list(names):
            out.setdefault(name, places)
    return out


def _assign(description: str, members: list[tuple[str, str]], out: dict[str, int]) -> None:
    start = 0
    for phrase in _DECIMALS_RE.finditer(description):
        window = description[start:phrase.end()]
        named = [n for n, ph in members if _mentions(window, ph) or _mentions(window, n)]
        for name in named or [n for n, _ in members if n not in out]:
            out[name] = _to_int(phrase.group(1))
        start = phrase.end()


def _mentions(text: str, word: str) -> bool:
    return bool(word.strip()) and re.search(rf"(?<![\w]){re.escape(word.strip())}(?![\w])", text) is not None


def _to_int(word: str) -> int:
    return _WORDS[word.lower()] if word.lower() in _WORDS else int(word)


# --------------------------------------------------------------------------------------------- verifier


def main(argv: Sequence[str] | None = None) -> int:
    """Verifier: `grade.py expected.json response.txt [reward.txt]`; exit 0 all right, 1 not, 2 bad usage."""
    argv = list(sys.argv if argv is None else argv)
    if len(argv) not in (3, 4):
        print("usage: grade.py expected.json response.txt [reward.txt]", file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as fh:
            expected = json.load(fh)
        with open(argv[2], encoding="utf-8") as fh:
            response = fh.read()
    except OSError as exc:
        print(f"grade.py: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"grade.py: {argv[1]} is not valid JSON: {exc}", file=sys.stderr)
        return 2
    result = grade(expected, response)
    print(json.dumps(result, indent=2, default=str))
    if len(argv) == 4:
        with open(argv[3], "w", encoding="utf-8") as fh:
            fh.write(f"{result['score']:.6f}\n")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
