"""The rubric generator (dual evidence): the verified ground truth and >= 2 evidence cards from independent solver
runs → a rubric of 4-7 dimensions and at most 10 criteria, filter vs preference, provenance gt/generated with at
most 40% gt. The structural rules live in `RubricDraft` itself; grounding is the criterion validator's job.

Between the two, a screen (`screened`) does what a 1.5B generator gets wrong most and what needs no model to judge.
Its drafts in the v8-v10 runs echoed the schema ("one of the rubric's dimensions" under a dimension called
"dimension"), copied the task's question ("… how strongly are basket_size and amount correlated?") or the prompt's
instructions, listed one criterion twice, and labelled everything "gt": three drafts in a row were refused for the
gt share and the task was lost. The screen drops criteria that are no requirement of a deliverable, sets each
numeric criterion's provenance from the evidence (a value the ground truth states is gt, one only the solvers
computed is generated), and sends back only what remains wrong.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from worldsmith.agents.asking import Outcome, ask, versions
from worldsmith.core.claim_numbers import stated_numbers
from worldsmith.core.evolution_schemas import (
    MAX_GT_SHARE,
    EvidenceCard,
    RubricCriterion,
    RubricDraft,
    RubricProposal,
    over_gt_share,
)
from worldsmith.core.grading import Tolerant
from worldsmith.prompts import template

TEMPLATE = "evolve_rubric.md"

#: a criterion's dimension named after a field of the schema is the schema echoed, not a quality of a deliverable
SCHEMA_WORDS = {"id", "ids", "dimension", "dimensions", "text", "type", "provenance", "expected_value", "tolerance",
                "criteria", "criterion", "gt", "generated", "filter", "preference"}
#: a criterion copying this many words of the task restates it; it asks nothing of a deliverable (a copy of a
#: solver's conclusion or step is evidence restated, which a criterion may be)
COPIED_WORDS = 6
#: words for how a rubric is made, which no deliverable shows: v11's kept criteria included "The evidence cards
#: provide the steps and results of the script's execution" and "The rubric checks the deliverable against the
#: specified criteria"
_APPARATUS = re.compile(r"\b(evidence cards?|rubrics?|ground[ -]truth|solvers?|criteri(?:a|on)|provenance)\b",
                        re.IGNORECASE)
#: two values within this relative distance are one number (a rounding apart)
SAME_VALUE = Tolerant(abs=1e-9, rel=1e-3)


def render_cards(cards: list[EvidenceCard]) -> str:
    return "\n".join(f"- card {i + 1} ({c.solver}): " + json.dumps(
        {"operations": c.operations, "computed_values": c.computed_values, "conclusions": c.conclusions}
        | ({"files_read": c.files} if c.files else {}) | ({"methods": c.methods} if c.methods else {}),
        ensure_ascii=False) for i, c in enumerate(cards))


def check_cards(cards: list[EvidenceCard]) -> None:
    """Dual evidence means two independent runs: at least two cards from different solvers."""
    if len({c.solver for c in cards}) < 2:
        raise ValueError(f"rubric generation needs evidence cards from >= 2 independent solver runs; got "
                         f"{len(cards)} card(s) from {sorted({c.solver for c in cards})}")


def agreed_values(cards: list[EvidenceCard], ground_truth: str) -> list[str]:
    """Values two different solver runs both computed (within a rounding) that the ground truth does not state:
    the evidence a "generated" criterion can stand on. Each as 'name = value' with the first card's name."""
    truth = [v for _, v, _ in stated_numbers(ground_truth)]
    out: list[str] = []
    seen: list[float] = []
    for i, a in enumerate(cards):
        for name, v in a.computed_values.items():
            if any(SAME_VALUE.numbers(v, s) for s in seen) or any(_states(t, v) for t in truth):
                continue
            if any(b.solver != a.solver and any(SAME_VALUE.numbers(v, w) for w in b.computed_values.values())
                   for b in cards[i + 1:]):
                seen.append(v)
                out.append(f"{name} = {v:.6g}")
    return out


def _shared(cards: list[EvidenceCard], field: str) -> list[str]:
    """Items of a card's list `field` that a card of another solver lists too, in the first card's order."""
    out: list[str] = []
    for i, a in enumerate(cards):
        for item in getattr(a, field):
            if item not in out and any(b.solver != a.solver and item in getattr(b, field) for b in cards[i + 1:]):
                out.append(item)
    return out


#: the dimensions evidence criteria go under (added to the rubric's list when it lacks them and has room)
VALUE_DIMENSION, METHOD_DIMENSION = "accuracy", "method"


def evidence_criteria(cards: list[EvidenceCard], ground_truth: str) -> list[RubricCriterion]:
    """'generated' criteria written from what two different solver runs share, no model needed: each value both
    computed that the ground truth does not state, the data files both scripts read, each method both called.
    What completes a draft that leans on the ground truth: the 1.5B generator's drafts restated its number three
    times and were refused for the gt share until the task was lost (v11 at a222dd8)."""
    out: list[RubricCriterion] = []
    for k, item in enumerate(agreed_values(cards, ground_truth), 1):
        name, _, value = item.partition(" = ")
        out.append(RubricCriterion(id=f"ev_value{k}", dimension=VALUE_DIMENSION, type="preference",
                                   provenance="generated", expected_value=float(value), tolerance=0.02,
                                   text=f"States {name.replace('_', ' ')} as {value}"))
    if files := _shared(cards, "files"):
        out.append(RubricCriterion(id="ev_files", dimension=METHOD_DIMENSION, type="preference",
                                   provenance="generated", names=files,
                                   text="Says which data files its numbers come from: " + ", ".join(files)))
    for k, method in enumerate(_shared(cards, "methods"), 1):
        out.append(RubricCriterion(id=f"ev_method{k}", dimension=METHOD_DIMENSION, type="preference",
                                   provenance="generated", text=f"Names the method it used: {method}"))
    return out


def completed(kept: list[RubricCriterion], dims: list[str], extra: list[RubricCriterion],
              ) -> tuple[list[RubricCriterion], list[str], list[str]]:
    """`kept` with as many of `extra` (evidence criteria) added, in order, as bring the ground-truth share to at
    most MAX_GT_SHARE (within the 10-criterion cap; none whose text or number a kept criterion has), the
    dimensions they need, and what was added. Unchanged when the share is met already or `extra` cannot meet it."""
    out, added = list(kept), []
    texts = {_norm(c.text) for c in kept}
    for c in extra:
        if not over_gt_share(out) or len(out) >= 10:
            break
        if _norm(c.text) in texts or (c.expected_value is not None and any(
                x.expected_value is not None and SAME_VALUE.numbers(x.expected_value, c.expected_value) for x in out)):
            continue
        out.append(c)
        added.append(c)
    if not added or over_gt_share(out):
        return kept, dims, []
    names = list(dims)
    lower = {d.strip().lower(): d for d in names}
    fixed = []
    for c in added:
        if c.dimension not in lower and len(names) < 7:
            names.append(c.dimension)
            lower[c.dimension] = c.dimension
        fixed.append(c.model_copy(update={"dimension": lower.get(c.dimension, names[0])}))
    notes = [f"added {c.id} from what both solver runs share: {c.text}" for c in fixed]
    return kept + fixed, names, notes


def _states(stated: float, value: float) -> bool:
    """Whether a number stated in text (rounded, perhaps a percentage) is `value`."""
    scale = max(abs(stated), 1e-12)
    return any(abs(stated - r) <= max(5e-3 * scale, 5e-5) for r in (value, value * 100))


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[`'\"*]", "", text.lower())).strip(" .;:")


def _words(text: str) -> int:
    return len(re.findall(r"[a-z]{2,}", text.lower()))


def _schema_text() -> str:
    return " ".join(f.description or "" for f in RubricCriterion.model_fields.values())


#: a call written as code in backticks: `df.groupby("x")`, `pd.merge(`
_CODE_CALL = re.compile(r"`[^`]*\w\([^`]*`")
#: a software library: which one a solver used is no quality of its analysis (v15: "The script used the `pandas`
#: library to compute the correlation", kept as a preference)
_LIBRARY = re.compile(r"\b(?:pandas|numpy|scipy|statsmodels|sklearn|scikit-learn|matplotlib|seaborn|polars|duckdb|"
                      r"openpyxl)\b", re.IGNORECASE)

#: a criterion about the solver's program ("The script reads `orders_2023.csv`, … and prints the result": v16's
#: report rubric kept it, and a report that stated the right r and its file failed it)
_SCRIPT_SUBJECT = re.compile(r"\s*((?:the|its|a|your)\s+(?:python\s+)?(?:script|code|program|notebook))\b",
                             re.IGNORECASE)


def not_a_requirement(c: RubricCriterion, *, instructions: str, copied_from: str) -> str | None:
    """Why criterion `c` asks nothing of a deliverable, or None. `instructions` is the prompt's own text (system
    and template, the schema's descriptions), `copied_from` the task."""
    text = _norm(c.text)
    dim = re.sub(r"[\s-]+", "_", c.dimension.strip().lower())
    if dim in SCHEMA_WORDS or c.id.strip().lower() in {"provenance_gt", "provenance_generated"}:
        return f"its dimension {c.dimension!r} is a field of the rubric's schema, not a quality of a deliverable"
    if _words(text) < 3:
        return "too short to say what a deliverable must contain"
    if text.endswith("?"):
        return "a question, not a requirement a deliverable meets"
    if m := _APPARATUS.search(c.text):
        return f"it speaks of {m.group(0)!r}, part of how the rubric is made, which no deliverable shows"
    # v14's report rubric kept four preferences like "must calculate the correlation … using `df.groupby(": the
    # solver's code, cut off mid-call, which a report need not show and a grader cannot check
    if c.text.count("`") % 2:
        return "it is cut off (a backtick is never closed)"
    if m := _CODE_CALL.search(c.text):
        return f"it asks for a piece of the solver's code ({m.group(0)}), which a deliverable need not show"
    if m := _SCRIPT_SUBJECT.match(c.text):
        return f"it describes what {m.group(1).lower()} does, not what a deliverable states"
    if m := _LIBRARY.search(c.text):
        return f"it asks which software the solver used ({m.group(0)}), which is no quality of the analysis"
    if text in _norm(instructions):
        return "it copies the instructions given to you"
    if _words(text) >= COPIED_WORDS and text in _norm(copied_from):
        return "it copies the task instead of saying what the deliverable must show"
    return None


def _numbers(c: RubricCriterion) -> list[float]:
    """The numbers a criterion asks for: its expected value, else those its text states."""
    return [c.expected_value] if c.expected_value is not None else [v for _, v, _ in stated_numbers(c.text)]


def restatements(kept: list[RubricCriterion]) -> list[tuple[RubricCriterion, RubricCriterion]]:
    """(criterion, the earlier one) for each ground-truth criterion whose every number an earlier ground-truth
    criterion already asks for, rounded or not: the same value checked twice."""
    out: list[tuple[RubricCriterion, RubricCriterion]] = []
    earlier: list[RubricCriterion] = []
    for c in kept:
        if c.provenance != "gt" or not (mine := _numbers(c)):
            continue
        first = next((e for e in earlier if all(any(_states(a, b) or _states(b, a) for b in _numbers(e))
                                                 for a in mine)), None)
        if first is None:
            earlier.append(c)
        else:
            out.append((c, first))
    return out


def _backed(value: float, text: str, truth: list[float], card_values: list[float]) -> bool:
    """Whether a criterion's expected value is a number its own text, the ground truth or a solver run states."""
    return (any(_states(t, value) or _states(value, t) for t in [*truth, *(v for _, v, _ in stated_numbers(text))])
            or any(SAME_VALUE.numbers(value, w) for w in card_values))


def _provenance(c: RubricCriterion, truth: list[float], card_values: list[float]) -> str:
    """gt when the criterion's number is one the ground truth states; generated when it is one only the solvers
    computed; the model's label when the criterion has no number or the number is neither."""
    numbers = _numbers(c)
    if not numbers:
        return c.provenance
    if any(_states(t, v) for v in numbers for t in truth):
        return "gt"
    if any(SAME_VALUE.numbers(v, w) for v in numbers for w in card_values):
        return "generated"
    return c.provenance


def screened(p: RubricProposal, *, instructions: str, task: str, ground_truth: str,
             cards: list[EvidenceCard]) -> tuple[RubricDraft | None, list[str], list[str]]:
    """(the draft, what is still wrong with it for the model to fix, what the screen changed)."""
    truth = [v for _, v, _ in stated_numbers(ground_truth)]
    card_values = [v for c in cards for v in c.computed_values.values()]
    copied_from = task
    kept: list[RubricCriterion] = []
    notes: list[str] = []
    seen: set[str] = set()
    for c in p.criteria:
        why = not_a_requirement(c, instructions=instructions, copied_from=copied_from)
        if why is None and _norm(c.text) in seen:
            why = "it repeats an earlier criterion"
        if why is not None:
            notes.append(f"dropped {c.id}: {why}")
            continue
        seen.add(_norm(c.text))
        if c.expected_value is not None and not _backed(c.expected_value, c.text, truth, card_values):
            # the 1.5B generator put expected_value 1.0 on "interprets the results correctly": a placeholder, which
            # the validator then tried to recompute from the data, and dropped the criterion
            notes.append(f"{c.id}: expected value {c.expected_value:g} removed (neither its text, the ground truth "
                         "nor a solver run states it)")
            c = c.model_copy(update={"expected_value": None, "tolerance": None})
        label = _provenance(c, truth, card_values)
        if label != c.provenance:
            notes.append(f"{c.id}: provenance {c.provenance} → {label} (its number is "
                         f"{'stated by the ground truth' if label == 'gt' else 'computed by the solvers only'})")
            c = c.model_copy(update={"provenance": label})
        kept.append(c)
    dims = [d for d in p.dimensions if re.sub(r"[\s-]+", "_", d.strip().lower()) not in SCHEMA_WORDS]
    dropped = [f"criterion {n.removeprefix('dropped ')}" for n in notes if n.startswith("dropped ")]
    if not kept:
        return None, dropped + ["no criterion is left: write criteria that each name one thing the deliverable "
                                "must state or show"], notes
    extra = evidence_criteria(cards, ground_truth)
    kept, dims, added = completed(kept, dims, extra)
    if over_gt_share(kept) and (repeats := restatements(kept)):
        # v13's amount-income report: four criteria restated the truth's one r, and the files and method both
        # solvers share could not bring four of six under the share; the same number asked once is enough
        fewer = [c for c in kept if all(c is not r for r, _ in repeats)]
        trimmed, trimmed_dims, trimmed_added = completed(fewer, dims, extra)
        if not over_gt_share(trimmed):
            kept, dims, added = trimmed, trimmed_dims, trimmed_added
            notes += [f"dropped {r.id}: it asks for the ground truth's number that {first.id} already asks for"
                      for r, first in repeats]
    notes += added
    gt = sum(c.provenance == "gt" for c in kept)
    if gt > MAX_GT_SHARE * len(kept):
        agreed = agreed_values(cards, ground_truth)
        return None, dropped + [
            f"{gt} of the {len(kept)} usable criteria restate the ground truth; at most {int(MAX_GT_SHARE * 100)}% "
            "may. Add 'generated' criteria from the evidence cards: "
            + (f"values both solver runs computed ({'; '.join(agreed)}), " if agreed else "")
            + "a step of their method, or a conclusion they share"], notes
    if len(dims) < 4:
        return None, dropped + ["name 4-7 dimensions that are qualities of a deliverable (e.g. accuracy, method, "
                                "interpretation, presentation), not fields of the rubric's schema"], notes
    try:
        draft = RubricDraft.model_validate({"dimensions": dims, "criteria": [c.model_dump() for c in kept]})
    except ValidationError as exc:
        return None, dropped + [e["msg"].removeprefix("Value error, ") for e in exc.errors()], notes
    return draft, [], notes


async def generate_rubric(llm: Any, task: str, ground_truth: str, cards: list[EvidenceCard], *,
                          role: str = "teacher", retries: int = 2) -> Outcome[RubricDraft]:
    check_cards(cards)
    t = template(TEMPLATE)
    agreed = agreed_values(cards, ground_truth)
    messages = [{"role": "system", "content": t.section("system")},
                {"role": "user", "content": t.section("user", task=task, ground_truth=ground_truth,
                                                      cards=render_cards(cards),
                                                      agreed="; ".join(agreed) or "(none beyond the ground truth)")}]
    instructions = "\n".join([t.section("system"), t.section("user", task="", ground_truth="", cards="", agreed=""),
                              _schema_text()])
    last: dict[str, RubricDraft] = {}
    notes: list[str] = []

    def check(p: RubricProposal) -> list[str]:
        draft, problems, changed = screened(p, instructions=instructions, task=task, ground_truth=ground_truth,
                                            cards=cards)
        notes[:] = changed
        if draft is not None:
            last["draft"] = draft
        return problems

    out = await ask(llm, messages, RubricProposal, role=role, templates=versions(TEMPLATE), retries=retries,
                    check=check)
    return Outcome(last.get("draft") if out.ok else None, out.calls, out.errors + (notes if out.ok else []))
