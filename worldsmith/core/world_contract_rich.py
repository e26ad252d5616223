"""The richer contract language: fixed attributes, curved and binned shapes, percent event steps, shared calendars,
gates and relinks. Re-exported by `world_contract_types`, whose unions include them."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FixedDist(_Strict):
    """Fixed entity attributes: row i of a static entity (id <prefix>-i+1) takes values[i]; numbers give a numeric
    attribute, labels a categorical one. The entity's count must equal len(values) (it is never rescaled)."""

    type: Literal["fixed"] = "fixed"
    values: list[float] | list[str]

    @property
    def labelled(self) -> bool:
        return any(isinstance(v, str) for v in self.values)

    @property
    def categories(self) -> list[str]:
        return list(dict.fromkeys(str(v) for v in self.values))


class Power(_Strict):
    """contribution = coef * |x - center| ** exponent; exponent 2 with a negative coef is an inverted U peaking at
    `center`, exponent 0.5 with center 0 a square root."""

    type: Literal["power"] = "power"
    coef: float
    exponent: float = 2.0
    center: float = 0.0


class Piecewise(_Strict):
    """Continuous piecewise-linear: slopes[i] is the change per unit of x on segment i, the segments being split at
    the ascending `knots` (len(slopes) == len(knots) + 1); the contribution is 0 at knots[0]. Slopes [+a, -b] with
    one knot: an inverted V."""

    type: Literal["piecewise"] = "piecewise"
    knots: list[float]
    slopes: list[float]


class Binned(_Strict):
    """The ascending `cuts` split x into len(cuts) + 1 bins [.., c0), [c0, c1), ...; effects[i] is the shift of bin
    i + 1 relative to the lowest bin (len(effects) == len(cuts)). Effects [4, 6, 1]: an inverted U."""

    type: Literal["binned"] = "binned"
    cuts: list[float]
    effects: list[float]


class EventPercent(_Strict):
    """From the named shared event's date onward the target is multiplied by (1 + percent / 100); no source."""

    type: Literal["event_percent"] = "event_percent"
    event: str
    percent: float


class CalendarEffect(_Strict):
    """contribution = jump on each day of the named shared calendar: for dated rows, jump when the row's date is a
    calendar day; for panel rows, jump per calendar day in the row's period. No source variable."""

    type: Literal["calendar"] = "calendar"
    calendar: str
    jump: float


class Gate(_Strict):
    """The edge acts only on rows where `variable` is below (or above) `threshold`; elsewhere it contributes 0."""

    variable: str
    threshold: float
    direction: Literal["below", "above"] = "below"


class Relink(_Strict):
    """A mapping revised mid-timeline: from `date` on, `share` of the entity's rows belong to a different parent
    (stores moved to another region). Dated rows below them follow the link valid on their date; the data room gets
    the mapping table `<file>.csv` (id, parent id, valid_from, valid_to)."""

    date: dt.date
    share: float
    file: str | None = Field(default=None, description="file stem; default <entity>_<parent>_links")


class Calendar(_Strict):
    """Shared event days common to every entity (holidays, market days): explicit dates and/or weekdays
    (0 = Monday .. 6 = Sunday)."""

    name: str
    dates: list[dt.date] = Field(default_factory=list)
    weekdays: list[int] = Field(default_factory=list)
    description: str = ""
