"""The numbers a claim states and whether printed output backs them: one rule for the executor, the validator
and the proposer.

A stated number is backed when some printed number rounds to it at the precision it is shown with (12.35 is
backed by 12.3456; 12.5% by 0.125 or 12.5). Small whole numbers (under 10: 'three regions', 'Q1') are not
checked: they are counts and labels far more often than results.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from worldsmith.core.grading import Tolerant

_NUMBER_RE = re.compile(r"(?<![\w.])([+-]?\d[\d,]*(?:\.\d+)?)(%?)(?![\w.]*\w)")
_RESULT_RE = re.compile(r"^\s*RESULT\s+([A-Za-z_][\w.-]*)\s*[=:]\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*$",
                        re.MULTILINE)
#: the `RESULT name = value` line as a regular expression (shipped inside generated reference solutions)
RESULT_PATTERN = _RESULT_RE.pattern


def stated_numbers(text: str) -> list[tuple[str, float, int]]:
    """(as shown, value, decimals shown) for each number in `text` worth checking."""
    out = []
    for m in _NUMBER_RE.finditer(text):
        shown = m.group(1).rstrip(",")
        try:
            value = float(shown.replace(",", ""))
        except ValueError:
            continue
        decimals = len(shown.split(".")[1]) if "." in shown else 0
        if decimals == 0 and abs(value) < 10:
            continue
        out.append((shown + m.group(2), value, decimals))
    return out


def printed_numbers(text: str) -> list[float]:
    """Every number in program output (for backing claims)."""
    return [v for _, v, _ in _all_numbers(text)]


def named_numbers(text: str) -> list[float]:
    """Every number `text` mentions, also inside names ("orders_2023.csv" mentions 2023): what a goal or a question
    names, a conclusion may repeat without printing it. v11 failed a node on "the conclusion states 2023" when its
    goal named the file orders_2023.csv."""
    return [float(n) for n in re.findall(r"\d+(?:\.\d+)?", text)]


def _all_numbers(text: str) -> list[tuple[str, float, int]]:
    out = []
    for m in re.finditer(r"(?<![\w.])[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", text.replace(",", "")):
        try:
            out.append((m.group(0), float(m.group(0)), 0))
        except ValueError:
            continue
    return out


def backs(printed: float, shown: str, value: float, decimals: int) -> bool:
    """Whether `printed` rounds to the stated number (a percentage may be printed as a fraction)."""
    rule = Tolerant(abs=0.5 * 10 ** -decimals)
    readings = [printed, printed * 100] if shown.endswith("%") else [printed]
    return any(rule.numbers(value, r) for r in readings)


def unbacked_numbers(claim: str, printed: Iterable[float]) -> list[str]:
    """The numbers `claim` states that no printed number backs (as shown in the claim)."""
    values = list(printed)
    return [shown for shown, value, decimals in stated_numbers(claim)
            if not any(backs(p, shown, value, decimals) for p in values)]


def parse_results(stdout: str) -> dict[str, float]:
    """The `RESULT name = value` lines of a script's output (the last one wins for a repeated name)."""
    return {m.group(1): float(m.group(2)) for m in _RESULT_RE.finditer(stdout)}


_NUM = r"[+-]?\d[\d,]*(?:\.\d+)?%?"
_UP = r"increas\w*|rose|rises?|risen|rising|grew|grows?|grown|growing|climb\w*|went up|gone up|goes up"
_DOWN = r"decreas\w*|fell|falls?|fallen|falling|dropp?\w*|declin\w*|went down|gone down|goes down|dipped|shr[au]nk"
_CHANGE = re.compile(rf"\b(?:(?P<up>{_UP})|(?P<down>{_DOWN}))\b[^.;]{{0,60}}?\bfrom\s+(?:about\s+|approximately\s+)?"
                     rf"(?P<a>{_NUM})[^.;]{{0,60}}?\bto\s+(?:about\s+|approximately\s+)?(?P<b>{_NUM})", re.I)
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
_MONTH_WORD = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*"
_IN_MONTH = re.compile(rf"(?P<n>{_NUM})\s+(?:\w+\s+)?(?:in|for|during|on)\s+(?P<m>{_MONTH_WORD})\b", re.I)
_NAME_YM = re.compile(r"(?<!\d)(?:19|20)\d{2}[-_]?(0[1-9]|1[0-2])(?!\d)")


def _month(word: str) -> int | None:
    """1-12 for a month's name or its three-letter (or 'sept') abbreviation, else None."""
    w = word.lower()
    return next((i for i, name in enumerate(MONTHS, 1) if w in (name, name[:3]) or (i == 9 and w == "sept")), None)


def _name_months(name: str) -> set[int]:
    """The months a RESULT name carries: a year-month (`2023-07`, `2023_07`, `202307`) or a month's name as one
    of its words (`mean_july`, `jul_web`)."""
    months = {int(m) for m in _NAME_YM.findall(name)}
    months |= {m for token in re.split(r"[_.\-\s]+", name) if (m := _month(token)) is not None}
    return months


def _value(shown: str) -> tuple[float, int]:
    text = shown.rstrip("%").replace(",", "")
    return float(text), len(text.split(".")[1]) if "." in text else 0


def misreadings(claim: str, numbers: dict[str, float]) -> list[str]:
    """Where a claim reads its own numbers wrong, in words: a change called an increase from a number to a smaller
    one (or a decrease to a larger one), and a number put in a month the RESULT line that printed it names
    otherwise. v14 verified "the monthly mean of `amount` increased from 58.74 in July to 55.78 in December", and
    "… from 59.89 in July to 56.25 in December" where 59.89 and 56.25 were the January and February means."""
    out: list[str] = []
    for m in _CHANGE.finditer(claim):
        (a, _), (b, _) = _value(m.group("a")), _value(m.group("b"))
        if (m.group("up") and b < a) or (m.group("down") and b > a):
            said, real = ("an increase", "a decrease") if m.group("up") else ("a decrease", "an increase")
            out.append(f"the conclusion calls the change from {m.group('a')} to {m.group('b')} {said} "
                       f"('{m.group(0)}'); from {m.group('a')} to {m.group('b')} is {real}")
    for m in _IN_MONTH.finditer(claim):
        month = _month(m.group("m"))
        value, decimals = _value(m.group("n"))
        if month is None or (decimals == 0 and abs(value) < 10):
            continue
        names = [n for n, x in numbers.items() if backs(x, m.group("n"), value, decimals)]
        if names and all(_name_months(n) for n in names) and not any(month in _name_months(n) for n in names):
            out.append(f"the conclusion puts {m.group('n')} in {MONTHS[month - 1].capitalize()}, but the script "
                       f"printed it as RESULT {names[0]}")
    return out


#: a comparison of two things: "higher … than", "larger for business compared to consumer", "more … versus"
_COMPARISON = re.compile(r"\b(?:higher|lower|greater|smaller|larger|bigger|less|more|fewer)\b[^.;]{0,80}?"
                         r"\b(?:than|compared (?:to|with)|relative to|versus|vs)\b", re.IGNORECASE)


def unnumbered_comparisons(claim: str) -> list[str]:
    """The sentences of `claim` that compare two things without stating a number: v15's node 7 printed the
    consumers' mean income alone and concluded "The mean income of consumer segments is higher than the mean
    income of business segments" (it is lower), and a claim with no number passes every check of its numbers."""
    sentences = re.split(r"(?<=[.!?])\s+", claim.strip())
    return [s for s in sentences if _COMPARISON.search(s) and not stated_numbers(s)]
