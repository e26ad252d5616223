"""Building blocks of a world contract: distributions, mechanisms, defects, invariants, recipes.

Every union is discriminated by a literal field (`type`, `kind` or `op`) so that an LLM-written
JSON contract validates with precise errors and the JSON schema stays readable.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from worldsmith.core.world_contract_rich import Binned, CalendarEffect, EventPercent, FixedDist, Piecewise, Power


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ----------------------------------------------------------------------------- distributions
class NormalDist(_Strict):
    type: Literal["normal"] = "normal"
    mean: float
    sd: float


class LognormalDist(_Strict):
    """exp(N(mu, sigma)): mu and sigma are on the log scale."""

    type: Literal["lognormal"] = "lognormal"
    mu: float
    sigma: float


class UniformDist(_Strict):
    type: Literal["uniform"] = "uniform"
    low: float
    high: float


class CategoricalDist(_Strict):
    type: Literal["categorical"] = "categorical"
    categories: list[str]
    probs: list[float]


class PoissonDist(_Strict):
    type: Literal["poisson"] = "poisson"
    lam: float


class BernoulliDist(_Strict):
    type: Literal["bernoulli"] = "bernoulli"
    p: float


class PersonNameDist(_Strict):
    """Synthetic 'First Last' names from a fixed list (for identity columns and split-column drift)."""

    type: Literal["person_name"] = "person_name"


Distribution = Annotated[
    Union[NormalDist, LognormalDist, UniformDist, CategoricalDist, PoissonDist, BernoulliDist, PersonNameDist,
          FixedDist],
    Field(discriminator="type"),
]


# ----------------------------------------------------------------------------- mechanisms
class Linear(_Strict):
    """contribution = coef * (x - center); for a categorical source use `levels` (effect per label, others 0)."""

    type: Literal["linear"] = "linear"
    coef: float = 0.0
    center: float = 0.0
    levels: dict[str, float] | None = None


class Logistic(_Strict):
    """Like linear but on the logit scale of a binary target (coef = log-odds per unit of x)."""

    type: Literal["logistic"] = "logistic"
    coef: float = 0.0
    center: float = 0.0
    levels: dict[str, float] | None = None


class Multiplicative(_Strict):
    """target is multiplied by exp(coef * (x - center)); coef is the log-change per unit of x."""

    type: Literal["multiplicative"] = "multiplicative"
    coef: float = 0.0
    center: float = 0.0
    levels: dict[str, float] | None = None


class Threshold(_Strict):
    """contribution = jump when x is above (or below) the threshold, else 0."""

    type: Literal["threshold"] = "threshold"
    threshold: float
    jump: float
    direction: Literal["above", "below"] = "above"


class Saturating(_Strict):
    """contribution = vmax * x / (x + half); x must be non-negative."""

    type: Literal["saturating"] = "saturating"
    vmax: float
    half: float


class Lag(_Strict):
    """contribution = coef * (x[t - lag] - center) within the same unit of a panel entity."""

    type: Literal["lag"] = "lag"
    coef: float
    lag: int = 1
    center: float = 0.0


class Seasonal(_Strict):
    """contribution = amplitude * sin(2*pi*(day - phase_days) / period_days); no source variable."""

    type: Literal["seasonal"] = "seasonal"
    amplitude: float
    period_days: float = 365.25
    phase_days: float = 0.0


class StepEvent(_Strict):
    """contribution = jump from the date of the named shared event onward; no source variable."""

    type: Literal["step_event"] = "step_event"
    event: str
    jump: float


class Interaction(_Strict):
    """contribution = coef * (x1 - c1) * (x2 - c2) for exactly two numeric/binary sources."""

    type: Literal["interaction"] = "interaction"
    coef: float
    centers: tuple[float, float] = (0.0, 0.0)


Mechanism = Annotated[
    Union[Linear, Logistic, Multiplicative, Threshold, Saturating, Lag, Seasonal, StepEvent, Interaction, Power,
          Piecewise, Binned, EventPercent, CalendarEffect],
    Field(discriminator="type"),
]
MECHANISM_TYPES = ("linear", "logistic", "multiplicative", "threshold", "saturating", "lag", "seasonal",
                   "step_event", "interaction", "power", "piecewise", "binned", "event_percent", "calendar")
SOURCELESS = ("seasonal", "step_event", "event_percent", "calendar")
CALENDAR_MODERATORS = ("@quarter", "@year")  # moderators read from the target row's date: 'Q1'..'Q4', '2024'
MODERATOR_SEP = "|"


class Heterogeneity(_Strict):
    """Multiply an edge's contribution by a per-group factor. `by` is one categorical attribute, or several (and the
    calendar moderators '@quarter', '@year'): then a group is the labels joined by '|', e.g. 'north|Q4'. Unlisted
    groups keep factor 1."""

    by: str | list[str]
    multipliers: dict[str, float]

    @property
    def columns(self) -> list[str]:
        return [self.by] if isinstance(self.by, str) else list(self.by)


class Noise(_Strict):
    """normal: + N(0, sd) in the target's unit; multiplicative: * exp(N(-sd^2/2, sd)); none."""

    type: Literal["normal", "multiplicative", "none"] = "normal"
    sd: float = 0.0


# ----------------------------------------------------------------------------- defects
class Missing(_Strict):
    """Blank out `rate` of a column: MCAR, or MAR with probability rising with `depends_on`'s rank."""

    type: Literal["missing"] = "missing"
    variable: str
    rate: float
    mechanism: Literal["mcar", "mar"] = "mcar"
    depends_on: str | None = None


class Delay(_Strict):
    """Recorded date = true date + `days` (documented) + uniform 0..jitter_days (for `rate` of rows)."""

    type: Literal["delay"] = "delay"
    days: int = 0
    jitter_days: int = 0
    rate: float = 1.0
    memo: bool = Field(default=True, description="False: undocumented (no memo sentence); solvers must find it in "
                       "the data, the auditor knows it from the contract")


class Duplicates(_Strict):
    """Repeat `rate` of rows right after the original; near duplicates alter a value slightly."""

    type: Literal["duplicates"] = "duplicates"
    rate: float
    near: bool = False
    memo: bool = Field(default=True, description="False: undocumented (no memo sentence); solvers must find it in "
                       "the data, the auditor knows it from the contract")


class UnitDrift(_Strict):
    """From `since` (recorded date) the variable is written in `to_unit` = value * factor."""

    type: Literal["unit_drift"] = "unit_drift"
    variable: str
    since: dt.date
    factor: float
    from_unit: str
    to_unit: str
    memo: bool = Field(default=True, description="False: undocumented (no memo sentence); solvers must find it in "
                       "the data, the auditor knows it from the contract")


class Recode(_Strict):
    """Category labels renamed (old -> new), from `since` or (without since) in the whole system."""

    type: Literal["recode"] = "recode"
    variable: str
    mapping: dict[str, str]
    since: dt.date | None = None
    memo: bool = Field(default=True, description="False: undocumented (no memo sentence); solvers must find it in "
                       "the data, the auditor knows it from the contract")


class Rename(_Strict):
    """Schema drift: column `column` is written as `new_name` from partition index `from_partition` on."""

    type: Literal["rename"] = "rename"
    column: str
    new_name: str
    from_partition: int = 0
    memo: bool = Field(default=True, description="False: undocumented (no memo sentence); solvers must find it in "
                       "the data, the auditor knows it from the contract")


class SplitColumn(_Strict):
    """A 'First Last' name column is written as two columns."""

    type: Literal["split_column"] = "split_column"
    column: str
    into: tuple[str, str] = ("first_name", "last_name")
    memo: bool = Field(default=True, description="False: undocumented (no memo sentence); solvers must find it in "
                       "the data, the auditor knows it from the contract")


class UnlabeledForeignKey(_Strict):
    """The foreign-key column is given a non-obvious name and is not documented anywhere."""

    type: Literal["unlabeled_fk"] = "unlabeled_fk"
    column: str
    new_name: str


class Cancellations(_Strict):
    """Cancelled records never reach the export: `rate` of rows are dropped, at random or (with `depends_on`) more
    often the higher that column. The world's truth is the population the exports keep, so every expected value
    is what the observed files give."""

    type: Literal["cancellations"] = "cancellations"
    rate: float
    depends_on: str | None = None
    memo: bool = Field(default=True, description="False: undocumented (no memo sentence); solvers must find it in "
                       "the data, the auditor knows it from the contract")


Defect = Annotated[
    Union[Missing, Delay, Duplicates, UnitDrift, Recode, Rename, SplitColumn, UnlabeledForeignKey, Cancellations],
    Field(discriminator="type"),
]
DEFECT_TYPES = ("missing", "delay", "duplicates", "unit_drift", "recode", "rename", "split_column", "unlabeled_fk",
                "cancellations", "id_spelling", "date_format", "no_dictionary")
UNDOCUMENTABLE = ("delay", "duplicates", "unit_drift", "recode", "rename", "split_column", "cancellations")


# ----------------------------------------------------------------------------- invariants
class UniqueIds(_Strict):
    kind: Literal["unique_ids"] = "unique_ids"
    entity: str


class NonNegative(_Strict):
    kind: Literal["non_negative"] = "non_negative"
    variable: str


class UnitsInvariant(_Strict):
    kind: Literal["units"] = "units"
    variable: str
    unit: str


class SharedEvent(_Strict):
    kind: Literal["shared_event"] = "shared_event"
    event: str
    systems: list[str]


class ForeignKey(_Strict):
    kind: Literal["foreign_key"] = "foreign_key"
    entity: str


class SumConstraint(_Strict):
    """Row-wise: total == sum(parts) (the total must be a noiseless sum of linear edges with coef 1)."""

    kind: Literal["sum"] = "sum"
    total: str
    parts: list[str]
    tolerance: float = 0.05


class BoundsInvariant(_Strict):
    kind: Literal["bounds"] = "bounds"
    variable: str


Invariant = Annotated[
    Union[UniqueIds, NonNegative, UnitsInvariant, SharedEvent, ForeignKey, SumConstraint, BoundsInvariant],
    Field(discriminator="kind"),
]


# ----------------------------------------------------------------------------- recipes
class Condition(_Strict):
    column: str
    op: Literal["==", "!=", ">", ">=", "<", "<=", "in"] = "=="
    value: float | str | list[float | str] | dt.date


class _Recipe(_Strict):
    where: list[Condition] = Field(default_factory=list)


class MeanRecipe(_Recipe):
    op: Literal["mean"] = "mean"
    variable: str


class GroupMeanRecipe(_Recipe):
    op: Literal["group_mean"] = "group_mean"
    variable: str
    by: str
    group: str


class MeanDiffRecipe(_Recipe):
    """mean(variable | by == groups[0]) - mean(variable | by == groups[1])."""

    op: Literal["mean_diff"] = "mean_diff"
    variable: str
    by: str
    groups: tuple[str, str]


class ShareRecipe(_Recipe):
    """Share of rows (after `where`) where variable == value (binary: value 1)."""

    op: Literal["share"] = "share"
    variable: str
    value: float | str = 1


class SlopeRecipe(_Recipe):
    """OLS slope of y on x."""

    op: Literal["slope"] = "slope"
    x: str
    y: str


class CorrRecipe(_Recipe):
    op: Literal["corr"] = "corr"
    x: str
    y: str


class PrePostRecipe(_Recipe):
    """mean(variable on/after event date) - mean(variable before), optionally within window_days."""

    op: Literal["pre_post"] = "pre_post"
    variable: str
    event: str
    window_days: int | None = None


class LaggedCorrRecipe(_Recipe):
    """corr(x[t - lag], y[t]) within units of a panel entity."""

    op: Literal["lagged_corr"] = "lagged_corr"
    x: str
    y: str
    lag: int = 1


class PartialCorrRecipe(_Recipe):
    """Controlled comparison: Pearson correlation of the residuals of x and of y after an OLS regression (with
    intercept) of each on `controls` (a categorical control enters as 0/1 columns, its first label dropped), over
    rows where x, y and every control are recorded: the x-y association holding the controls fixed."""

    op: Literal["partial_corr"] = "partial_corr"
    x: str
    y: str
    controls: list[str] = Field(min_length=1)


class DistinctCountRecipe(_Recipe):
    """Number of distinct entity ids (after `where`)."""

    op: Literal["distinct_count"] = "distinct_count"
    entity: str


class TopGroupRecipe(_Recipe):
    """Label of the group with the highest mean of variable."""

    op: Literal["top_group"] = "top_group"
    variable: str
    by: str


Recipe = Annotated[
    Union[MeanRecipe, GroupMeanRecipe, MeanDiffRecipe, ShareRecipe, SlopeRecipe, CorrRecipe, PrePostRecipe,
          LaggedCorrRecipe, DistinctCountRecipe, TopGroupRecipe, PartialCorrRecipe],
    Field(discriminator="op"),
]


class Tolerance(_Strict):
    """An observed value passes when |observed - canonical| <= max(abs, rel * |canonical|)."""

    abs: float = 0.0
    rel: float = 0.05

    def allows(self, observed: float, canonical: float) -> bool:
        return abs(observed - canonical) <= max(self.abs, self.rel * abs(canonical)) + 1e-12

    def width(self, canonical: float) -> float:
        return max(self.abs, self.rel * abs(canonical))
