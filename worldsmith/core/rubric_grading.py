"""Report (rubric) grading that runs anywhere: deterministic numeric items, scoring, and a plain-HTTP judge.

Standard library only and importing nothing from worldsmith's other layers, on purpose: report task packages
ship this very file as their verifier (`tests/grade_report.py`, beside `grade.py` = core/grading.py, whose
one tolerance rule it uses), so a Harbor-style runner grades a report without worldsmith installed:
    python3 grade_report.py rubric.json RESPONSE [reward.txt] [--workspace DIR] [--instruction FILE] [--json OUT]
Items with a numeric expected value, or with `names` (files the deliverable must name), are checked
locally; the rest go to an OpenAI-compatible judge named by
WORLDSMITH_JUDGE_BASE_URL / WORLDSMITH_JUDGE_MODEL / WORLDSMITH_JUDGE_API_KEY (prompts `judge_*.md` beside
the script). Without a judge the score is the deterministic partial reward and `ungraded` lists the rest.
training/graders.py uses the same functions (criteria as plain dicts), so both grade alike.

Numeric evidence: `@name[value]` tags named like the criterion id are authoritative; otherwise sentences that
mention enough of the criterion's key terms are searched for numbers. '12.5%' also stands for 0.125; when the
criterion talks about percent, a bare 0.125 matches an expected 12.5 and vice versa, unless the criterion
declares a `unit`: then numbers are read by grading's unit rule (`unit_readings`: for 'pp', '7.2', '7.2 pp' and
'7.2%' are 7.2 and 0.072 is another quantity). Without a tolerance a
number matches when it is the expected value rounded to the precision written, within 5% relative.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

try:  # inside worldsmith
    from worldsmith.core import grading as _grading
except ImportError:  # in a task package: tests/grade.py (core/grading.py verbatim) sits beside this file
    _spec = importlib.util.spec_from_file_location("grade", Path(__file__).with_name("grade.py"))
    _grading = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
    _spec.loader.exec_module(_grading)  # type: ignore[union-attr]

Criterion = Mapping[str, Any]  # {id, section, polarity, type, observable, satisfy, violate?, expected_value?, names?, ...}
#: judge(criteria, deliverable, instruction) -> {id: {"met": bool, "evidence": str}}
Judge = Callable[[Sequence[Criterion], str, str], "dict[str, dict[str, Any]]"]

RUBRIC_PASS_THRESHOLD = 0.6
MAX_RESPONSE_CHARS = 12_000
MAX_INSTRUCTION_CHARS = 2_000
MAX_CRITERIA_PER_CALL = 16
MAX_WORKSPACE_FILE_CHARS = 50_000
TEXT_SUFFIXES = {".md", ".txt", ".json", ".csv", ".tsv", ".html", ".py", ".log", ".yaml", ".yml", ""}
DEFAULT_REL_GUARD = 0.05  # rounding-aware default tolerance never accepts more than 5% relative error
JUDGE_ENV = ("WORLDSMITH_JUDGE_BASE_URL", "WORLDSMITH_JUDGE_MODEL", "WORLDSMITH_JUDGE_API_KEY")
PROMPT_FILES = ("judge_system.md", "judge_task.md", "judge_request.md")

_NUM_RE = re.compile(
    r"(?<![\w.])([-+−]?)(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE]([-+]?\d+))?(\s*%|\s*percent(?:age)?\s+points?\b|\s*percent\b|\s*pp\b|\s*p\.p\.)?",
    re.IGNORECASE)
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


# --------------------------------------------------------------------------------------------- numeric evidence


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
    method: Literal["tag", "numeric", "names", "none"]
    evidence: str
    candidates: tuple[float, ...] = ()


def is_deterministic(c: Criterion) -> bool:
    """Items with a numeric expected value are graded without a judge."""
    v = c.get("expected_value")
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def name_forms(name: str) -> list[str]:
    """How a deliverable may write a file's name: whole (`orders_2023.csv`), without its extension
    (`orders_2023`), or that with spaces for `_`/`-` (`orders 2023`); a sheet suffix (`crm.xlsx[crm]`) is dropped.
    Lower case."""
    whole = re.sub(r"\[[^\]]*\]$", "", name.strip()).lower()
    stem = whole.rsplit("/", 1)[-1]
    stem = stem.rsplit(".", 1)[0] if "." in stem else stem
    return list(dict.fromkeys(f for f in (whole, stem, re.sub(r"[_-]+", " ", stem)) if len(f) >= 2))


def check_names(c: Criterion, text: str) -> NumericCheck:
    """Deterministic check of a criterion with `names` (the data files a deliverable must say its numbers come
    from): met when the text writes every one in a `name_forms` form, as a word of its own. A 1.5B judge quoted
    the criterion's own words as its evidence for a report that did name `orders_2023.csv`, and the item failed."""
    flat = " ".join(text.lower().split())
    missing = [n for n in c["names"] if not any(
        re.search(rf"(?<![\w.]){re.escape(f)}(?![\w])", flat) for f in name_forms(str(n)))]
    if missing:
        return NumericCheck(False, "names", "the deliverable does not name " + ", ".join(map(str, missing)))
    return NumericCheck(True, "names", "the deliverable names " + ", ".join(map(str, c["names"])))


def find_numbers(text: str) -> list[NumberMention]:
    out = []
    for m in _NUM_RE.finditer(text):
        sign, digits, exp, pct = m.groups()
        value = float(digits.replace(",", ""))
        decimals = len(digits.split(".", 1)[1]) if "." in digits else 0
        if exp:
            value *= 10.0 ** int(exp)
            decimals = max(0, decimals - int(exp))
        out.append(NumberMention(-value if sign in ("-", "−") else value, decimals, bool(pct), m.group(0).strip()))
    return out


def _stem(word: str) -> str:
    w = word.lower()
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    return w[:7]


def key_terms(c: Criterion) -> list[str]:
    """Content words of the observable (or satisfy text, or id) as stems, in order, without duplicates."""
    for source in (c.get("observable") or "", c.get("satisfy") or "", str(c.get("id", "")).replace("_", " ")):
        terms: list[str] = []
        for w in _WORD_RE.findall(source.lower()):
            if w not in _STOPWORDS and not w.isdigit() and _stem(w) not in terms:
                terms.append(_stem(w))
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
            out.append(stripped if header is None else f"{header} {stripped}")
            header = header or stripped
            continue
        header = None
        out.extend(p for p in _SENT_SPLIT_RE.split(stripped) if p.strip())
    return out


def relevant_sentences(text: str, terms: list[str]) -> list[str]:
    """Sentences mentioning enough key terms (half of them, 1 to 3), best first."""
    if not terms:
        return []
    need = max(1, min(3, math.ceil(len(terms) / 2)))
    scored = []
    for i, sent in enumerate(split_sentences(text)):
        hits = len(set(terms) & {_stem(w) for w in _WORD_RE.findall(sent.lower())})
        if hits >= need:
            scored.append((-hits, i, sent))
    return [s for _, _, s in sorted(scored)]


def _close(expected: float, got: float, tol: Mapping[str, Any] | None, decimals: int) -> bool:
    if math.isnan(expected) or math.isnan(got):
        return False
    if tol and (tol.get("abs") is not None or tol.get("rel") is not None):
        return _grading.tolerant(tol.get("abs"), tol.get("rel")).numbers(expected, got)
    diff = abs(expected - got)
    if diff <= 1e-9:
        return True
    within_rounding = diff <= 0.5 * 10.0 ** (-decimals) + 1e-12
    return within_rounding and expected != 0 and diff <= DEFAULT_REL_GUARD * abs(expected) + 1e-12


def _matches(expected: float, n: NumberMention, tol: Mapping[str, Any] | None, percent_context: bool) -> bool:
    readings = [(n.value, n.decimals)]
    if n.percent or percent_context:
        readings.append((n.value / 100.0, n.decimals + 2))
    if percent_context and not n.percent:
        readings.append((n.value * 100.0, max(0, n.decimals - 2)))
    return any(_close(expected, v, tol, d) for v, d in readings)


def _matches_unit(expected: float, text: str, decimals: int, tol: Mapping[str, Any] | None, unit: str) -> bool:
    """An item with a declared unit reads a number through `grading.unit_readings` (the one unit rule): '7.2',
    '7.2 pp' and '7.2%' are 7.2 percentage points; 0.072 stays 0.072, a different quantity."""
    return any(_close(expected, v, tol, decimals) for v in _grading.unit_readings(text, unit))


def _norm_name(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _tags_for(cid: str, text: str) -> list[str]:
    """Values of `@name[…]` tags that answer criterion `cid`: named like it, else named like its last part
    (world tasks' item `comp_<answer>` is answered by the closed-form tag `@<answer>[…]`)."""
    found = [(_norm_name(name), raw.strip()) for name, raw in _grading.TAG_RE.findall(text or "")]
    exact = [raw for name, raw in found if name == _norm_name(cid)]
    return exact or [raw for name, raw in found if name and _norm_name(cid).endswith("_" + name)]


_SCALED = re.compile(r"(\d+(?:\.\d+)?)\s*(k|thousand|m|mn|million|bn|billion)\b", re.IGNORECASE)
_FACTORS = {"k": 1e3, "thousand": 1e3, "m": 1e6, "mn": 1e6, "million": 1e6, "bn": 1e9, "billion": 1e9}


def _scaled_mention(expected: float, text: str, tol: Mapping[str, Any] | None) -> bool:
    """Whether the text writes the value with a scale word ('52k', '1.2 million'): the judge may read those."""
    return any(abs(expected - float(n) * _FACTORS[w.lower()]) <= max(
        float((tol or {}).get("abs") or 0), 0.5 * 10 ** (-len(n.split(".")[1]) if "." in n else 0) * _FACTORS[w.lower()])
        for n, w in _SCALED.findall(text))


def check_numeric(c: Criterion, text: str) -> NumericCheck:
    """Deterministic check of a criterion with a numeric expected value against a response text."""
    if not is_deterministic(c):
        raise ValueError(f"criterion {c.get('id')!r} has no numeric expected_value; it needs the judge")
    expected, tol, cid = float(c["expected_value"]), c.get("tolerance"), str(c["id"])
    percent_context = bool(_PERCENT_RE.search(f"{c.get('observable', '')} {c.get('satisfy', '')}"))
    unit = c.get("unit") or None

    def matches(n: NumberMention, raw: str) -> bool:
        return _matches_unit(expected, raw, n.decimals, tol, unit) if unit else \
            _matches(expected, n, tol, percent_context)

    tags = _tags_for(cid, text)
    if tags:  # a tag named like the criterion is authoritative: free text is not searched
        for raw in tags:
            mentions = find_numbers(raw)
            if mentions and matches(mentions[0], raw):
                return NumericCheck(True, "tag", f"@{cid}[{raw}] matches {expected:g}", (mentions[0].value,))
        return NumericCheck(False, "tag", f"@{cid}[{tags[-1]}] does not match expected {expected:g}")
    terms = key_terms(c)
    sentences = relevant_sentences(text, terms)
    if not any(matches(m, m.text) for m in find_numbers(text)) and not _scaled_mention(expected, text, tol):
        # the value is nowhere in the response, in any wording: not met, and no judge may say otherwise (a 1.5B
        # judge called "reports cost_per_kg ≈ 0.7956" met for an answer that was an error message)
        return NumericCheck(False, "numeric", f"no number in the response is within tolerance of {expected:g}")
    if not sentences:
        return NumericCheck(None, "none", f"no sentence mentions the key terms {terms}")
    seen: list[float] = []
    for sent in sentences:
        for mention in find_numbers(sent):
            seen.append(mention.value)
            if matches(mention, mention.text):
                return NumericCheck(True, "numeric", f"{mention.text!r} in: {_clip(sent)}", (mention.value,))
    if not seen:
        return NumericCheck(None, "none", f"sentences mention {terms} but contain no numbers: {_clip(sentences[0])}")
    shown = ", ".join(f"{v:g}" for v in seen[:8])
    return NumericCheck(False, "numeric", f"numbers near {terms} ({shown}) are not within tolerance of {expected:g}",
                        tuple(seen))


def _clip(s: str, n: int = 160) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


# --------------------------------------------------------------------------------------------- scoring


def net_score(criteria: Sequence[Criterion], met: Mapping[str, bool]) -> float:
    """Net points normalised to [0, 1]: gained '+' weight minus committed '-' weight, over the '+' weight."""
    positive = sum(float(c.get("weight", 1.0)) for c in criteria if c.get("polarity", "+") == "+")
    if positive <= 0:
        return 0.0
    gained = sum(float(c.get("weight", 1.0)) for c in criteria if c.get("polarity", "+") == "+" and met.get(c["id"]))
    lost = sum(float(c.get("weight", 1.0)) for c in criteria if c.get("polarity", "+") == "-" and met.get(c["id"]))
    return max(0.0, min(1.0, (gained - lost) / positive))


def detail(c: Criterion, met: bool | None, method: str, evidence: str) -> dict[str, Any]:
    return {"id": c["id"], "section": c.get("section"), "polarity": c.get("polarity", "+"),
            "type": c.get("type", "preference"), "weight": c.get("weight", 1.0), "expected": c.get("expected_value"),
            "met": met, "method": method, "evidence": evidence}


def deterministic_pass(criteria: Sequence[Criterion], text: str,
                       will_judge: bool) -> tuple[dict[str, dict[str, Any]], list[Criterion]]:
    """Check numeric items; return their details and the criteria left for the judge.

    A numeric item with no evidence either way goes to the judge when there is one (the response may phrase it
    in words the key-term search does not know); without a judge it is not met. An empty response meets no item
    and nothing goes to the judge: a small judge shown "(empty)" has called every item met."""
    if not text.strip():
        return {c["id"]: detail(c, False, "empty", "the response is empty") for c in criteria}, []
    details: dict[str, dict[str, Any]] = {}
    pending: list[Criterion] = []
    for c in criteria:
        check = check_numeric(c, text) if is_deterministic(c) else check_names(c, text) if c.get("names") else None
        if check is None or (check.met is None and will_judge):
            pending.append(c)
        else:
            details[c["id"]] = detail(c, bool(check.met), check.method if check.met is not None else "numeric",
                                      check.evidence)
    return details, pending


_QUOTED = re.compile(r"[\"'`\u201c\u201d\u2018\u2019]([^\"'`\u201c\u201d\u2018\u2019]{3,})[\"'`\u201c\u201d\u2018\u2019]")


def _flat(text: str) -> str:
    return " ".join(text.lower().split())


def evidence_in_text(evidence: str, text: str, criterion: Criterion | None = None) -> bool:
    """Whether a judge's evidence comes from the deliverable: it occurs there whole, or a quoted phrase of it does
    (12+ characters with a space: a column name in backticks is in the criterion and the answer alike), or at
    least half of its words of 4+ letters do — unless it is the criterion's own text. A 1.5B judge gave the
    criterion's words as the evidence ("Says which data files its numbers come from: orders_2023.csv") for an
    answer that named no file, and the trajectory was kept for training."""
    flat, said = _flat(text), _flat(evidence).strip(" .\"'`\u201c\u201d")
    if said and said in flat:
        return True
    if criterion is not None and said in {_flat(str(criterion.get(k) or "")).strip(" .")
                                          for k in ("observable", "satisfy")}:
        return False
    if any(len(q) >= 12 and " " in q.strip() and _flat(q) in flat for q in _QUOTED.findall(evidence)):
        return True
    words = {w for w in _WORD_RE.findall(evidence.lower()) if len(w) >= 4}
    return bool(words) and len(words & set(_WORD_RE.findall(text.lower()))) >= 0.5 * len(words)


def apply_verdicts(details: dict[str, dict[str, Any]], pending: Sequence[Criterion],
                   verdicts: Mapping[str, Mapping[str, Any]] | None, reason: str, text: str) -> None:
    """The judge's verdicts on the `pending` criteria. A "met" whose evidence is not in the deliverable `text`
    (`evidence_in_text`) is not met: the judge found nothing there to quote."""
    for c in pending:
        v = (verdicts or {}).get(c["id"])
        if v is None:
            details[c["id"]] = detail(c, None, "ungraded", reason if verdicts is None else "the judge returned no verdict")
            continue
        evidence = str(v.get("evidence", ""))
        if v["met"] and not evidence_in_text(evidence, text, c):
            details[c["id"]] = detail(c, False, "judge", f"the judge's evidence is not in the deliverable: {evidence}")
        else:
            details[c["id"]] = detail(c, bool(v["met"]), "judge", evidence)


def finish(criteria: Sequence[Criterion], details: Mapping[str, dict[str, Any]], notes: Sequence[str] = (),
           pass_threshold: float = RUBRIC_PASS_THRESHOLD) -> dict[str, Any]:
    """{score, passed, items, ungraded, note}: the score over the graded items only."""
    items = [details[c["id"]] for c in criteria]
    graded = [c for c in criteria if details[c["id"]]["met"] is not None]
    ungraded = [c["id"] for c in criteria if details[c["id"]]["met"] is None]
    met = {c["id"]: bool(details[c["id"]]["met"]) for c in graded}
    score = net_score(graded, met) if graded else 0.0
    filter_failed = [c["id"] for c in graded
                     if c.get("type") == "filter" and met[c["id"]] != (c.get("polarity", "+") == "+")]
    has_positive = any(c.get("polarity", "+") == "+" for c in graded)
    passed = has_positive and score >= pass_threshold and not filter_failed
    n_det = sum(1 for d in items if d["method"] in ("tag", "numeric"))
    n_judge = sum(1 for d in items if d["method"] == "judge")
    out = [f"{len(graded)}/{len(items)} items graded ({n_det} deterministic, {n_judge} by judge)", *notes]
    if ungraded:
        out.append(f"ungraded and excluded from the score: {', '.join(ungraded)}")
    if not has_positive:
        out.append("no positive item could be graded: score 0")
    if filter_failed:
        out.append(f"filter items failed: {', '.join(filter_failed)}")
    return {"score": score, "passed": passed, "items": items, "ungraded": ungraded, "note": "; ".join(out)}


def grade_rubric(criteria: Sequence[Criterion], text: str, *, judge: Judge | None = None, instruction: str = "",
                 pass_threshold: float = RUBRIC_PASS_THRESHOLD) -> dict[str, Any]:
    """Deterministic items first, then `judge` (if any) for the rest; a judge failure keeps the partial result."""
    details, pending = deterministic_pass(criteria, text, will_judge=judge is not None)
    verdicts, reason, notes = None, "no judge endpoint configured", []
    if pending and judge is not None:
        try:
            verdicts = judge(pending, text, instruction)
        except JudgeError as exc:
            reason = f"judge failed: {exc}"
            notes.append(reason)
    apply_verdicts(details, pending, verdicts, reason, text)
    return finish(criteria, details, notes, pass_threshold)


# --------------------------------------------------------------------------------------------- judge


class JudgeError(RuntimeError):
    """The judge endpoint could not be reached or answered something that is not a verdict list."""


def clip_middle(text: str, limit: int) -> str:
    """Keep the head and the tail (conclusions usually sit at the end) within `limit` characters."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 5
    tail = limit - head - 60
    return f"{text[:head]}\n\n[... {len(text) - head - tail} characters omitted ...]\n\n{text[-tail:]}"


def criterion_brief(c: Criterion) -> dict[str, Any]:
    brief = {k: c.get(k, "+" if k == "polarity" else "") for k in ("id", "polarity", "section", "observable", "satisfy")}
    if c.get("violate"):
        brief["violate"] = c["violate"]
    if c.get("expected_value") is not None:
        brief["expected_value"] = c["expected_value"]
        if c.get("tolerance"):
            brief["tolerance"] = {k: v for k, v in c["tolerance"].items() if v is not None}
    return brief


def judge_messages(criteria: Sequence[Criterion], response_text: str, instruction: str, prompts: Mapping[str, str],
                   max_response_chars: int = MAX_RESPONSE_CHARS) -> list[dict[str, str]]:
    """The judge's conversation from the templates {judge_system.md, judge_task.md, judge_request.md: text}."""
    lines = "\n".join(json.dumps(criterion_brief(c), ensure_ascii=False) for c in criteria)
    request = prompts["judge_request.md"].strip().format(
        deliverable=clip_middle(response_text.strip() or "(empty)", max_response_chars), criteria=lines)
    if instruction.strip():
        task = prompts["judge_task.md"].strip().format(instruction=clip_middle(instruction.strip(), MAX_INSTRUCTION_CHARS))
        request = f"{task}\n\n{request}"
    return [{"role": "system", "content": prompts["judge_system.md"].strip()}, {"role": "user", "content": request}]


def parse_verdicts(content: str) -> dict[str, dict[str, Any]]:
    """{id: {met, evidence}} from a judge reply `{"verdicts": [...]}` (a ```json fence is tolerated)."""
    body = re.sub(r"^```(?:json)?\s*|\s*```$", "", content.strip())
    try:
        rows = json.loads(body)["verdicts"]
        return {str(v["id"]): {"met": bool(v["met"]), "evidence": str(v.get("evidence", ""))} for v in rows}
    except (ValueError, KeyError, TypeError) as exc:
        raise JudgeError(f"the judge's reply is not a verdict list ({type(exc).__name__}: {exc}): {content[:200]!r}")


def endpoint_judge(base_url: str, model: str, api_key: str | None, prompts: Mapping[str, str],
                   timeout_s: float = 120.0) -> Judge:
    """A judge over an OpenAI-compatible `POST {base_url}/chat/completions` (plain urllib, JSON mode)."""
    url = base_url.rstrip("/") + "/chat/completions"

    def call(criteria: Sequence[Criterion], text: str, instruction: str) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for i in range(0, len(criteria), MAX_CRITERIA_PER_CALL):
            batch = criteria[i:i + MAX_CRITERIA_PER_CALL]
            body = {"model": model, "temperature": 0, "response_format": {"type": "json_object"},
                    "messages": judge_messages(batch, text, instruction, prompts)}
            headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
            req = urllib.request.Request(url, json.dumps(body).encode("utf-8"), headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                    reply = json.loads(resp.read().decode("utf-8"))
                content = reply["choices"][0]["message"]["content"] or ""
            except urllib.error.HTTPError as exc:
                raise JudgeError(f"{url} answered HTTP {exc.code} {exc.reason} (model {model!r})") from exc
            except (urllib.error.URLError, OSError) as exc:
                raise JudgeError(f"{url} could not be reached: {exc}") from exc
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise JudgeError(f"{url} answered something that is not a chat completion ({exc})") from exc
            wanted = {c["id"] for c in batch}
            out.update({k: v for k, v in parse_verdicts(content).items() if k in wanted})
        return out

    return call


def judge_from_env(prompt_dir: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Judge | None:
    """The endpoint judge named by WORLDSMITH_JUDGE_BASE_URL/_MODEL/_API_KEY, or None when no URL is set."""
    env = os.environ if env is None else env
    base_url, model, key = (env.get(k, "").strip() for k in JUDGE_ENV)
    if not base_url:
        return None
    prompts = {name: (Path(prompt_dir) / name).read_text(encoding="utf-8") for name in PROMPT_FILES}
    return endpoint_judge(base_url, model or "default", key or None, prompts)


# --------------------------------------------------------------------------------------------- verifier


_XLSX_NS = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
            "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
            "p": "http://schemas.openxmlformats.org/package/2006/relationships"}
#: rows of one sheet an xlsx deliverable is read to (a summary sheet is a few rows; a dumped table is capped)
MAX_XLSX_ROWS = 500


def _column_index(ref: str) -> int:
    """0 for A1, 27 for AB3."""
    n = 0
    for ch in re.match(r"[A-Z]+", ref).group(0):  # type: ignore[union-attr]
        n = n * 26 + ord(ch) - 64
    return n - 1


def xlsx_text(path: str | os.PathLike[str]) -> str:
    """An Excel workbook's cells as text, each sheet a Markdown table under `## sheet NAME` (its first row the
    header), read with the standard library (zipfile + ElementTree: the verifier runs without openpyxl). An xlsx
    report (sheets "summary" and "notes") was read as the zip's bytes, so no number in it could ever be found."""
    import xml.etree.ElementTree as ET
    import zipfile

    def texts(node: Any) -> str:
        return "".join(t.text or "" for t in node.iter(f"{{{_XLSX_NS['m']}}}t"))

    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        shared = [texts(si) for si in ET.fromstring(z.read("xl/sharedStrings.xml")).findall("m:si", _XLSX_NS)] \
            if "xl/sharedStrings.xml" in names else []
        rels = {r.get("Id"): r.get("Target", "") for r in
                ET.fromstring(z.read("xl/_rels/workbook.xml.rels")).findall("p:Relationship", _XLSX_NS)}
        out = []
        for sheet in ET.fromstring(z.read("xl/workbook.xml")).iterfind("m:sheets/m:sheet", _XLSX_NS):
            target = rels.get(sheet.get(f"{{{_XLSX_NS['r']}}}id"), "").lstrip("/")
            member = target if target.startswith("xl/") else f"xl/{target}"
            if member not in names:
                continue
            rows: list[list[str]] = []
            for row in ET.fromstring(z.read(member)).iterfind("m:sheetData/m:row", _XLSX_NS):
                cells: dict[int, str] = {}
                for i, c in enumerate(row.iterfind("m:c", _XLSX_NS)):
                    kind, v = c.get("t"), c.find("m:v", _XLSX_NS)
                    if kind == "inlineStr":
                        value = texts(c)
                    elif v is None or v.text is None:
                        continue
                    elif kind == "s":
                        value = shared[int(v.text)] if int(v.text) < len(shared) else ""
                    elif kind == "b":
                        value = "TRUE" if v.text == "1" else "FALSE"
                    else:
                        value = v.text
                    cells[_column_index(c.get("r", "")) if c.get("r") else i] = value.replace("|", "/").replace(
                        "\n", " ")
                if cells:
                    rows.append([cells.get(k, "") for k in range(max(cells) + 1)])
                if len(rows) >= MAX_XLSX_ROWS:
                    break
            width = max((len(r) for r in rows), default=0)
            table = ["| " + " | ".join(r + [""] * (width - len(r))) + " |" for r in rows]
            if table:
                table.insert(1, "|" + "---|" * width)
            out.append(f"## sheet {sheet.get('name', '')}\n\n" + "\n".join(table))
    return "\n\n".join(out)


def file_text(path: Path) -> str:
    """A deliverable file as text: an xlsx workbook's cells (unreadable ones said so), else the file decoded."""
    if path.suffix.lower() == ".xlsx":
        try:
            return xlsx_text(path)
        except Exception as exc:  # a broken workbook is graded as what it is: nothing readable
            return f"(the workbook {path.name} could not be read: {type(exc).__name__})"
    return path.read_text(encoding="utf-8", errors="replace")


def is_deliverable_name(name: str) -> bool:
    """Whether a workspace file is read for grading: a text file or a workbook."""
    return Path(name).suffix.lower() in TEXT_SUFFIXES | {".xlsx"}


def workspace_texts(workspace: str | os.PathLike[str], inputs: Sequence[str] = (),
                    exclude: Sequence[str | os.PathLike[str]] = ()) -> dict[str, str]:
    """The text files and workbooks in `workspace` by relative path, each as `file_text` reads it, capped;
    `inputs` (relative paths: the task's own data files) and files under `exclude` are skipped."""
    root, given = Path(workspace), set(inputs)
    if not root.is_dir():
        return {}
    excluded = [Path(d).resolve() for d in exclude]
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if (not p.is_file() or not is_deliverable_name(p.name) or rel in given
                or any(p.resolve() == d or p.resolve().is_relative_to(d) for d in excluded)):
            continue
        out[rel] = file_text(p)[:MAX_WORKSPACE_FILE_CHARS]
    return out


def files_section(texts: Mapping[str, str]) -> str:
    """Workspace texts as they follow the response in what a grader reads."""
    return "".join(f"\n\n--- file: {name} ---\n{text}" for name, text in texts.items())


def read_deliverable(response: str | os.PathLike[str] | None, workspace: str | os.PathLike[str] | None,
                     inputs: Sequence[str] = (), exclude_dirs: Sequence[str | os.PathLike[str]] = ()) -> str:
    """The response file's text plus the text files (and workbooks) the solver wrote in the workspace (each
    capped); `inputs` (paths relative to the workspace: the task's own data files) and `exclude_dirs` (the
    verifier's own folder, should it sit inside the workspace) are not the solver's and are skipped."""
    resp = Path(response).resolve() if response is not None else None
    head = file_text(resp) if resp is not None and resp.is_file() else ""
    if workspace is None:
        return head
    skip = [*exclude_dirs, *([resp] if resp is not None else [])]
    return head + files_section(workspace_texts(workspace, inputs, skip))


USAGE = "usage: grade_report.py rubric.json RESPONSE [reward.txt] [--workspace DIR] [--instruction FILE] [--json OUT]"


def main(argv: Sequence[str] | None = None) -> int:
    """The verifier (USAGE): prints the verdicts as JSON (also to --json OUT) and writes the score to reward.txt;
    exit 0 passed, 1 not passed, 2 bad usage."""
    args = list(sys.argv[1:] if argv is None else argv)
    opts: dict[str, str] = {}
    for flag in ("--workspace", "--instruction", "--json"):
        if flag in args:
            i = args.index(flag)
            if i + 1 >= len(args):
                print(f"grade_report.py: {flag} needs a value", file=sys.stderr)
                return 2
            opts[flag] = args.pop(i + 1)
            args.pop(i)
    if len(args) not in (2, 3):
        print(USAGE, file=sys.stderr)
        return 2
    here = Path(__file__).resolve().parent
    try:
        rubric = json.loads(Path(args[0]).read_text(encoding="utf-8"))
        instruction_file = opts.get("--instruction")
        instruction = Path(instruction_file).read_text(encoding="utf-8") if instruction_file else ""
        judge = judge_from_env(here)
    except OSError as exc:
        print(f"grade_report.py: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"grade_report.py: {args[0]} is not valid JSON: {exc}", file=sys.stderr)
        return 2
    inputs_file = here / "workspace_inputs.json"  # the task's own data files, listed when the package was written
    inputs = json.loads(inputs_file.read_text(encoding="utf-8")) if inputs_file.is_file() else []
    response = args[1]
    text = read_deliverable(response, opts.get("--workspace"), inputs, exclude_dirs=[here])
    result = grade_rubric(rubric["criteria"], text, judge=judge, instruction=instruction)
    result["response_found"] = Path(response).is_file()
    out = json.dumps(result, indent=2, default=str)
    print(out)
    if "--json" in opts:
        Path(opts["--json"]).write_text(out + "\n", encoding="utf-8")
    if len(args) == 3:
        Path(args[2]).write_text(f"{result['score']:.6f}\n", encoding="utf-8")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
