"""Deterministic evidence for rubric items with a numeric expected value.

The rules live in core/rubric_grading.py (stdlib only, shipped verbatim as report packages' verifier), so a
package graded in a container and a response graded here agree; this module adapts them to `Criterion`.
"""

from __future__ import annotations

from worldsmith.core import rubric_grading as rg
from worldsmith.core.rubric_grading import (  # noqa: F401  (public API)
    DEFAULT_REL_GUARD,
    NumberMention,
    NumericCheck,
    find_numbers,
    relevant_sentences,
    split_sentences,
)
from worldsmith.core.schemas import Criterion


def criterion_dict(criterion: Criterion) -> dict:
    return criterion.model_dump(mode="json")


def key_terms(criterion: Criterion) -> list[str]:
    """Content words of the observable (or satisfy text) as stems, in order, without duplicates."""
    return rg.key_terms(criterion_dict(criterion))


def check_numeric(criterion: Criterion, text: str) -> NumericCheck:
    """Deterministic check of a criterion with a numeric expected value against a response text."""
    return rg.check_numeric(criterion_dict(criterion), text)
