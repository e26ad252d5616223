"""Closed-form answers: extract `@name[value]` from a response and compare with expected values.

Standard library only, on purpose: task packages ship a copy of this file as their verifier
(`tests/grade.py`), so a Harbor-style runner can grade without worldsmith installed.
Usage as a verifier: `python grade.py expected.json response.txt [reward.txt]`.
"""

from __future__ import annotations

import json
import math
import re
import sys
import unicodedata

ANSWER_RE = re.compile(r"@(\w+)\[(.*?)\]", re.DOTALL)
_NUM_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
DEFAULT_ABS_TOL = 1e-6


def extract_answers(text: str) -> dict[str, str]:
    """All `@name[value]` pairs; when a name repeats, the last one wins (models restate final answers)."""
    out: dict[str, str] = {}
    for name, value in ANSWER_RE.findall(text or ""):
        out[name] = value.strip()
    return out


def parse_number(value: object) -> float | None:
    """A float from a number-like string: '1,234.5', '12%', '$3', '-0.5'. None when it is not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    s = str(value).strip().strip("'\"`").strip()
    s = s.replace(",", "").replace("$", "").replace("€", "").replace("£", "")
    pct = s.endswith("%")
    if pct:
        s = s[:-1].strip()
    if not _NUM_RE.match(s):
        return None
    try:
        x = float(s)
    except ValueError:
        return None
    return x / 100.0 if pct else x


def normalise_text(value: object) -> str:
    s = unicodedata.normalize("NFKC", str(value)).strip().strip("'\"`").strip().lower()
    s = re.sub(r"\s+", " ", s)
    return s.rstrip(".")


def _numbers_match(expected: float, got: float, abs_tol: float | None, rel_tol: float | None) -> bool:
    if math.isnan(expected) or math.isnan(got):
        return False
    diff = abs(expected - got)
    if abs_tol is None and rel_tol is None:
        abs_tol = DEFAULT_ABS_TOL
    if abs_tol is not None and diff <= abs_tol + 1e-12:
        return True
    return rel_tol is not None and diff <= rel_tol * abs(expected) + 1e-12


def match_value(expected: object, got: str | None, abs_tol: float | None = None, rel_tol: float | None = None,
                percent_ok: bool = True, strict: bool = False) -> bool:
    """Official DABench rule plus tolerance: equal as strings (normalised) or as numbers within tolerance.

    A percentage answer ('12%') also matches the fraction it denotes, and when `percent_ok` the bare
    number (12) is accepted for an expected fraction stated as a percentage elsewhere — never both ways
    silently: only exact string equality or numeric closeness counts.
    """
    if got is None:
        return False
    if strict:  # the official DABench rule: same string, or same number within 1e-6
        if str(expected).strip() == str(got).strip():
            return True
        try:
            return abs(float(str(expected)) - float(str(got))) <= DEFAULT_ABS_TOL
        except ValueError:
            return False
    if normalise_text(expected) == normalise_text(got):
        return True
    e, g = parse_number(expected), parse_number(got)
    if e is None or g is None:
        exp_list, got_list = _as_list(expected), _as_list(got)
        if exp_list is not None and got_list is not None and len(exp_list) == len(got_list) > 1:
            return all(match_value(a, b, abs_tol, rel_tol, percent_ok) for a, b in zip(exp_list, got_list))
        return False
    if _numbers_match(e, g, abs_tol, rel_tol):
        return True
    raw_got = str(got).strip()
    if percent_ok and raw_got.endswith("%"):  # '12%' for an expected 12 (the label kept the percent number)
        g_pct = parse_number(raw_got[:-1])
        return g_pct is not None and _numbers_match(e, g_pct, abs_tol, rel_tol)
    return False


def _as_list(value: object) -> list[str] | None:
    s = str(value).strip().strip("[]()")
    if "," not in s:
        return None
    return [p.strip() for p in s.split(",")]


def grade(expected: list[dict], response: str, strict: bool = False) -> dict:
    """Grade a response against expected answers [{name, value, tolerance: {abs, rel}}].

    Returns {score, passed, items: [{name, expected, got, correct}]}; score is the fraction of sub-answers
    correct, passed means all of them are (DABench's by-question accuracy).
    """
    got = extract_answers(response)
    items = []
    for spec in expected:
        tol = spec.get("tolerance") or {}
        value = got.get(spec["name"])
        ok = match_value(spec["value"], value, tol.get("abs"), tol.get("rel"), strict=strict)
        items.append({"name": spec["name"], "expected": spec["value"], "got": value, "correct": ok})
    n_ok = sum(i["correct"] for i in items)
    score = n_ok / len(items) if items else 0.0
    return {"score": score, "passed": bool(items) and n_ok == len(items), "items": items}


def _main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print("usage: grade.py expected.json response.txt [reward.txt]", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as fh:
        expected = json.load(fh)
    with open(argv[2], encoding="utf-8") as fh:
        response = fh.read()
    result = grade(expected, response)
    print(json.dumps(result, indent=2, default=str))
    if len(argv) == 4:
        with open(argv[3], "w", encoding="utf-8") as fh:
            fh.write(f"{result['score']:.6f}\n")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
