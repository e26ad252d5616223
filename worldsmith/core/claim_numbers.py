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
