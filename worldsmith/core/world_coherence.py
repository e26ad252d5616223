"""Plausibility rules of a world contract: what must hold across its tables for the world to make sense.

A template declares them (a control arm the treatment never moves; an invoice that follows price and seats);
`evolution/worlds/coherence.py` checks them when the contract is validated and again on the generated canonical
state, and a world that breaks one is refused with the rule and the evidence.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from worldsmith.core.world_contract_types import _Strict


class Unmoved(_Strict):
    """The `level` arm of the categorical `by` is not moved on `variable` by anything: no edge into `variable` gives
    that arm an effect (a level effect, or an event's or other edge's heterogeneity multiplier other than 0)."""

    kind: Literal["unmoved"] = "unmoved"
    variable: str
    by: str
    level: str
    description: str = ""


class Follows(_Strict):
    """`target` rises with each of `sources`: each has a causal path to it in the DAG, and on the canonical state the
    least-squares slope of the target on each (the others held fixed) is positive (an invoice follows price and seats)."""

    kind: Literal["follows"] = "follows"
    target: str
    sources: list[str] = Field(min_length=1)
    description: str = ""


PlausibilityRule = Annotated[Unmoved | Follows, Field(discriminator="kind")]
