"""Explicit claims about effects a world does not have everywhere: none at all, or only under a condition.

A no-effect claim names a spurious driver ("promotions do not move churn"): holding the target's declared causes
fixed, one unit of the source moves the target by less than `bound`. A conditional claim says an effect exists
only where a condition holds ("only after the launch", "only while stock is low"): inside, the source moves the
target by `effect` (judged like an edge); outside, by less than `bound`. Magnitudes are on the scale mechanisms
are written on: target units per unit of source, log-odds for a binary target.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from worldsmith.core.world_contract_types import Condition


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoEffectClaim(_Strict):
    kind: Literal["no_effect"] = "no_effect"
    id: str = Field(description="snake_case name of the claim")
    source: str = Field(description="the spurious driver (numeric or binary)")
    target: str
    bound: float = Field(gt=0, description="largest effect per unit of source still counted as none")
    statement: str = Field(default="", description="the claim in words, e.g. 'promotions do not move churn'")


class ConditionalClaim(_Strict):
    kind: Literal["conditional"] = "conditional"
    id: str = Field(description="snake_case name of the claim")
    source: str = Field(description="the driver whose effect is conditional (numeric or binary)")
    target: str
    when: list[Condition] = Field(min_length=1, description="rows where the effect exists (all conditions hold)")
    effect: float = Field(description="effect per unit of source where `when` holds")
    bound: float = Field(gt=0, description="largest effect per unit of source elsewhere still counted as none")
    statement: str = Field(default="", description="the claim in words, e.g. 'discounts lift sales only after launch'")


Claim = Annotated[NoEffectClaim | ConditionalClaim, Field(discriminator="kind")]
