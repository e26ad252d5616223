"""Derived variables: columns computed exactly from other columns, not drawn or caused.

- ratio: numerator / denominator * scale (a rate per customer, a margin in percent);
- balance: a stock-and-flow account on a panel, stock[t] = stock[t-1] + inflows[t] - outflows[t] within each unit,
  starting from `initial` before the first period;
- aggregate: a coarser-grain series from a finer one (a region from its stores, a monthly or national series from
  events or a store panel): the rows of `of`'s entity that belong to each row of the variable's entity, summed (or
  mean, count, min, max). The variable's entity is an ancestor of `of`'s entity, or a panel whose unit is one.

The audit checks each as an identity on the observed files (`audit_derived`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Ratio(_Strict):
    op: Literal["ratio"] = "ratio"
    numerator: str
    denominator: str
    scale: float = Field(default=1.0, description="100 for a percentage")


class Balance(_Strict):
    op: Literal["balance"] = "balance"
    inflows: list[str] = Field(default_factory=list)
    outflows: list[str] = Field(default_factory=list)
    initial: float = 0.0


class Aggregate(_Strict):
    op: Literal["aggregate"] = "aggregate"
    of: str
    how: Literal["sum", "mean", "count", "min", "max"] = "sum"


Derivation = Annotated[Ratio | Balance | Aggregate, Field(discriminator="op")]


def derivation_inputs(d: Ratio | Balance | Aggregate) -> list[str]:
    """Variables a derivation reads (they are generated before it)."""
    if d.op == "ratio":
        return [d.numerator, d.denominator]
    if d.op == "balance":
        return [*d.inflows, *d.outflows]
    return [d.of]
