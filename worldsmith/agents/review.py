"""The bounded review loop between executor and validator.

Each round runs in its own staging folder. A round the validator accepts (supported or revised) is promoted into
the node's workdir; a rejected round's files are deleted, so a rejected update is never kept, and the next round
sees the validator's issues. After `max_rounds` rejections the node has no files from any round, and the outcome
records every round and why it was rejected.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

from worldsmith.agents.asking import Outcome
from worldsmith.core.evolution_schemas import (
    ExecutionResult,
    ReviewOutcome,
    ReviewRound,
    Verdict,
)
from worldsmith.core.schemas import ModelCall

STAGING = ".review"

#: (round number, staging folder, the validator's issues with the last round or None) → the execution
RunRound = Callable[[int, Path, str | None], Awaitable[Outcome[ExecutionResult]]]
#: (execution, its staging folder) → the verdict
Check = Callable[[ExecutionResult, Path], Awaitable[Outcome[Verdict]]]


def _promote(staging: Path, workdir: Path) -> None:
    """Move every file of an accepted round into the workdir (same relative paths)."""
    for src in sorted(p for p in staging.rglob("*") if p.is_file()):
        dst = workdir / src.relative_to(staging)
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dst)


def _feedback(verdict: Verdict | None, result: ExecutionResult) -> str:
    if verdict is None:
        return result.error or "the analysis failed"
    return "\n".join(f"- {i}" for i in verdict.issues) or "- the claim did not survive review"


def _renumbered(calls: list[ModelCall], start: int) -> list[ModelCall]:
    return [c.model_copy(update={"index": start + i}) for i, c in enumerate(calls)]


async def review_loop(run_round: RunRound, check: Check, workdir: Path, *, max_rounds: int = 2) -> Outcome[ReviewOutcome]:
    """At most `max_rounds` execute → validate rounds; the first accepted one is kept."""
    if max_rounds < 1:
        raise ValueError(f"review_loop: max_rounds must be at least 1, got {max_rounds}")
    out = Outcome[ReviewOutcome](None)
    rounds: list[ReviewRound] = []
    feedback: str | None = None
    verdict: Verdict | None = None
    for k in range(1, max_rounds + 1):
        staging = workdir / STAGING / f"round{k}"
        shutil.rmtree(staging, ignore_errors=True)  # a leftover of a killed run is not this round's work
        ran = await run_round(k, staging, feedback)
        out.calls += _renumbered(ran.calls, len(out.calls))
        out.errors += ran.errors
        result = ran.value
        if result is None:
            raise ValueError(f"review_loop: round {k}'s executor returned no result (it must return a failed one)")
        verdict = None
        if result.status == "completed":
            checked = await check(result, staging)
            out.calls += _renumbered(checked.calls, len(out.calls))
            out.errors += checked.errors
            verdict = checked.value
        accepted = verdict is not None and verdict.verdict in ("supported", "revised")
        if accepted:
            _promote(staging, workdir)
        shutil.rmtree(staging, ignore_errors=True)
        rounds.append(ReviewRound(round=k, verdict=verdict, execution_status=result.status, kept=accepted,
                                  note="promoted into the node" if accepted else "rejected: files discarded"))
        if accepted:
            out.value = ReviewOutcome(accepted=True, verdict=verdict, result=result, rounds=rounds)
            _drop_empty(workdir / STAGING)
            return out
        feedback = _feedback(verdict, result)
    _drop_empty(workdir / STAGING)
    out.value = ReviewOutcome(accepted=False, verdict=verdict, result=None, rounds=rounds)
    return out


def _drop_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # absent, or something else lives there: leave it
        pass
