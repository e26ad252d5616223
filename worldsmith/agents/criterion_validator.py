"""The criterion validator (dual evidence): each rubric criterion is checked for grounding, observability and
well-formedness by the model, and a criterion that states a number is recomputed from the data in the sandbox.

Status and action, one rule:
- the recomputed number disagrees with the expected value → refuted, dropped (whatever the model said);
- a number that cannot be recomputed, or a criterion the evidence does not ground → unverifiable, dropped;
- grounded but not observable / not well-formed, or the model narrows it → over-specified: revised when the
  model gave a rewording, else dropped;
- otherwise verified, kept.
A model that gives no usable check leaves the criterion unverifiable: nothing unchecked grades a deliverable.
A recomputation script that fails or prints no RESULT line goes back to the model once, with its error and the
pandas notes the analyst gets (`.dt` on text dates, a KeyError's columns).

The dual evidence is itself a recomputation. A criterion whose expected value two different solver runs computed
(each from the initial workspace, in its own sandbox) needs no model-written script: the model is asked only about
its wording, and when it gives no usable check the two runs' agreement verifies it. A criterion the rubric
generator wrote from what both runs share (`evidence_criteria`: the files both read, a method both called, a value
both computed) is verified by construction, with no model call. The 1.5B validator lost v13's amount–income report
that way: it wrote no script that read a data file for the r both solvers had computed, and cut its reply on
`ev_files` off at max_tokens, so the rubric kept one criterion (the method) and checked no number.
"""

from __future__ import annotations

import re

import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, Field

from worldsmith.agents.analyst import observation_notes
from worldsmith.agents.answer_guards import DataFacts
from worldsmith.agents.asking import Outcome, ask, versions
from worldsmith.agents.rubric_generator import check_cards, evidence_criteria, render_cards
from worldsmith.core.claim_numbers import parse_results
from worldsmith.core.evolution_schemas import (
    MAX_GT_SHARE,
    CriterionVerdict,
    EvidenceCard,
    RubricCriterion,
    RubricDraft,
    RubricValidation,
    over_gt_share,
)
from worldsmith.core.grading import Tolerant
from worldsmith.core.sandbox_config import SandboxConfig
from worldsmith.prompts import template
from worldsmith.tools.sandbox import Sandbox, open_sandbox

TEMPLATE = "evolve_criterion.md"
#: a recomputation script that failed or printed no RESULT line goes back to the model this many times
RECOMPUTE_REPAIRS = 1
DEFAULT_REL_TOLERANCE = 0.01  # a criterion without its own tolerance: 1% relative


_FENCE = re.compile(r"^\s*```[\w+-]*[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)


def unfenced(code: str) -> str:
    """A script a model wrapped in a Markdown fence inside a JSON string, without the fence."""
    m = _FENCE.match(code)
    return m.group(1) if m else code


class CriterionCheck(BaseModel):
    grounded: bool
    observable: bool
    well_formed: bool
    reason: str = ""
    code: str | None = Field(None, description="script printing RESULT value = <number>, when the criterion states one")
    revision: str | None = Field(None, description="a narrower, well-formed rewording, when over-specified")


#: `print("RESULT value =", -0.195)` or `print(f"RESULT value = {-0.195}")`: a number written into the script, not
#: computed (v11's validator "recomputed" a criterion's -0.1950231515318033 with exactly that line, and kept it)
_LITERAL_RESULT = re.compile(r"""RESULT\s+value\s*=\s*(?:['"]\s*,\s*|\{\s*|\s*)[-+]?\(?\s*\d[\d_.eE+-]*\s*\)?\s*[}'")]""")


def mounted_paths(inputs: list[Path]) -> list[str]:
    """Each input file as the recomputation opens it from its working directory (`data/orders.csv` for the file
    `orders.csv` of the input directory `data`)."""
    out: list[str] = []
    for p in inputs:
        out += sorted(f.relative_to(p.parent).as_posix() for f in p.rglob("*") if f.is_file()) if p.is_dir() \
            else [p.name]
    return out


def recomputation_problems(code: str | None, names: list[str]) -> list[str]:
    """Why `code` is no recomputation from the data, or []: it names none of the input files, or prints a number
    written into it. A criterion whose number is only restated is unverified, whatever the script prints."""
    if not code:
        return ["the criterion states a number: give \"code\", a script that recomputes it from the input files"]
    out = []
    if names and not any(n in code for n in names):
        out.append("the script reads none of the input files (" + ", ".join(names[:8])
                   + "): load the data and compute the number from it")
    if _LITERAL_RESULT.search(code):
        out.append("the script prints a number written into it: print the value it computes from the data")
    return out


def recomputed_value(stdout: str) -> float | None:
    """`RESULT value = x`, or the only RESULT line the check printed."""
    results = parse_results(stdout)
    if "value" in results:
        return results["value"]
    return next(iter(results.values())) if len(results) == 1 else None


def _rule(c: RubricCriterion) -> Tolerant:
    return Tolerant(abs=1e-9, rel=c.tolerance if c.tolerance is not None else DEFAULT_REL_TOLERANCE)


def recomputed_by_evidence(c: RubricCriterion, cards: list[EvidenceCard]) -> tuple[float, str] | None:
    """(the value, who computed it) when solver runs of two different solvers each computed a value within the
    criterion's tolerance of its expected value; None otherwise (or when it states no number)."""
    if c.expected_value is None:
        return None
    found = {card.solver: v for card in cards for v in card.computed_values.values()
             if _rule(c).numbers(c.expected_value, v)}
    if len(found) < 2:
        return None
    return next(iter(found.values())), ", ".join(f"{s}: {v:.6g}" for s, v in found.items())


def criterion_verdict(c: RubricCriterion, check: CriterionCheck | None, recomputed: float | None, failure: str,
                      evidence: str = "") -> CriterionVerdict:
    """The verdict on one criterion from the model's check and the recomputation (the rule in the module doc).
    `evidence`: the solver runs that computed its expected value (then `recomputed` is theirs)."""
    base: dict[str, Any] = {"criterion": c.id, "recomputed": recomputed}
    if check is None and evidence:
        return CriterionVerdict(**base, status="verified", grounded=True, observable=True, well_formed=True,
                                action="keep", reason=f"its value is what both solver runs computed ({evidence}); "
                                                      f"the model gave no usable check of its wording ({failure})")
    if check is None:
        return CriterionVerdict(**base, status="unverifiable", grounded=False, observable=False, well_formed=False,
                                reason=failure or "no usable check from the model", action="drop")
    flags = {"grounded": check.grounded, "observable": check.observable, "well_formed": check.well_formed}
    if c.expected_value is not None:
        if recomputed is None:
            return CriterionVerdict(**base, **flags, status="unverifiable", action="drop",
                                    reason=f"its value {c.expected_value} could not be recomputed: {failure}")
        if not _rule(c).numbers(c.expected_value, recomputed):
            return CriterionVerdict(**base, **flags, status="refuted", action="drop",
                                    reason=f"expects {c.expected_value}; the data give {recomputed}")
    if not check.grounded:
        return CriterionVerdict(**base, **flags, status="unverifiable", action="drop", reason=check.reason)
    revision = (check.revision or "").strip()
    if not (check.observable and check.well_formed) or revision:
        return CriterionVerdict(**base, **flags, status="over-specified", reason=check.reason,
                                action="revise" if revision else "drop", revision=revision or None)
    return CriterionVerdict(**base, **flags, status="verified", action="keep", reason=check.reason)


async def _check_one(llm: Any, c: RubricCriterion, sb: Sandbox, context: dict[str, Any], role: str, retries: int,
                     first_index: int, timeout_s: float | None,
                     cards: list[EvidenceCard]) -> tuple[CriterionVerdict, Outcome[CriterionCheck]]:
    t = template(TEMPLATE)
    messages = [{"role": "system", "content": t.section("system")},
                {"role": "user", "content": t.section(
                    "user", **context, id=c.id, type=c.type, provenance=c.provenance, text=c.text,
                    expected="none" if c.expected_value is None else str(c.expected_value))}]
    if (found := recomputed_by_evidence(c, cards)) is not None:
        # both solver runs computed its number: the model judges the wording only, and writes no script
        messages[1]["content"] += "\n\n" + t.section("recomputed", evidence=found[1])
        got = await ask(llm, messages, CriterionCheck, role=role, templates=versions(TEMPLATE), retries=retries,
                        first_index=first_index)
        return criterion_verdict(c, got.value, found[0], "; ".join(got.errors[-2:]), evidence=found[1]), got
    names = context["names"]

    def check(answer: CriterionCheck) -> list[str]:
        return recomputation_problems(answer.code, names) if c.expected_value is not None else []

    got = await ask(llm, messages, CriterionCheck, role=role, templates=versions(TEMPLATE), retries=retries,
                    first_index=first_index, check=check)
    recomputed, failure = None, "; ".join(got.errors[-2:])
    for repair in range(RECOMPUTE_REPAIRS + 1):
        if got.value is None or c.expected_value is None:
            break
        if problems := recomputation_problems(got.value.code, names):
            failure = "; ".join(problems)
            break
        await sb.restart()
        code = unfenced(got.value.code or "")
        run = await sb.run(code, timeout=timeout_s)
        recomputed = recomputed_value(run.stdout) if run.ok else None
        if recomputed is not None:
            break
        observation = run.to_observation(400) + observation_notes(run, DataFacts(), code)  # the analyst's notes
        failure = f"the recomputation printed no RESULT value: {observation}"
        if repair == RECOMPUTE_REPAIRS:
            break
        # v13's node 6: the script called `.dt` on a text date and the criterion holding the report's number was
        # dropped as unverifiable; the failure and the notes the analyst gets go back once
        again = await ask(llm, messages + [{"role": "assistant", "content": got.value.model_dump_json()},
                                           {"role": "user", "content": t.section("failed", observation=observation)}],
                          CriterionCheck, role=role, templates=versions(TEMPLATE), retries=retries,
                          first_index=first_index + len(got.calls), check=check)
        got = Outcome(again.value, got.calls + again.calls, got.errors + [failure] + again.errors)
        if again.value is None:
            failure = "; ".join(again.errors[-2:]) or failure
    return criterion_verdict(c, got.value, recomputed, failure), got


def _restore_gt_share(kept: list[RubricCriterion]) -> tuple[list[RubricCriterion], list[str]]:
    """Drop ground-truth criteria from the end until they are at most MAX_GT_SHARE of what is kept."""
    out, dropped = list(kept), []
    while out and over_gt_share(out):
        last_gt = max(i for i, c in enumerate(out) if c.provenance == "gt")
        dropped.append(out.pop(last_gt).id)
    return out, dropped


async def validate_criteria(llm: Any, rubric: RubricDraft, *, task: str, ground_truth: str,
                            cards: list[EvidenceCard], inputs: list[Path], sandbox: SandboxConfig,
                            role: str = "judge", retries: int = 1,
                            timeout_s: float | None = None) -> Outcome[RubricValidation]:
    """Every criterion checked; refuted and unverifiable ones dropped, over-specified ones revised or dropped."""
    check_cards(cards)
    paths = mounted_paths(inputs)
    context = {"task": task, "ground_truth": ground_truth, "cards": render_cards(cards),
               "files": ", ".join(paths) or "(none)", "names": [PurePosixPath(f).name for f in paths]}
    out = Outcome[RubricValidation](None)
    verdicts: list[CriterionVerdict] = []
    kept: list[RubricCriterion] = []
    by_construction = evidence_criteria(cards, ground_truth)  # equal in id, text and value: never reworded
    with tempfile.TemporaryDirectory(prefix="criteria-") as tmp:
        async with open_sandbox(sandbox, workspace=Path(tmp), inputs=inputs) as sb:
            for c in rubric.criteria:
                if c in by_construction:
                    verdicts.append(CriterionVerdict(
                        criterion=c.id, status="verified", grounded=True, observable=True, well_formed=True,
                        recomputed=c.expected_value, action="keep",
                        reason="written from what both solver runs share (no model call)"))
                    kept.append(c)
                    continue
                verdict, got = await _check_one(llm, c, sb, context, role, retries, len(out.calls), timeout_s,
                                                cards)
                out.calls += got.calls
                out.errors += [f"{c.id}: {e}" for e in got.errors]
                verdicts.append(verdict)
                if verdict.action == "keep":
                    kept.append(c)
                elif verdict.action == "revise":
                    kept.append(c.model_copy(update={"text": verdict.revision}))
    kept, trimmed = _restore_gt_share(kept)
    notes = [(f"dropped {', '.join(trimmed)} to keep ground-truth criteria at most {int(MAX_GT_SHARE * 100)}% "
              "of the rubric")] if trimmed else []
    dropped = [v.criterion for v in verdicts if v.action == "drop"] + trimmed
    out.value = RubricValidation(verdicts=verdicts, criteria=kept, dimensions=list(rubric.dimensions),
                                 dropped=dropped, notes=notes)
    return out
