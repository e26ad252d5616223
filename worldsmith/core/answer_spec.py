"""Complete answer specs: every facet of a closed-form quantity, its plain-words rendering and its lint.

A solver reads only the rendering, so a facet left open there is a second reading of the task. The spec is
built from a phenomenon's recipe (`evolution/worlds/answer_specs.py`), rendered deterministically into the
instruction, and linted before a task is emitted. Grading uses `grading_unit` through `core/grading.tolerant`.
"""

from __future__ import annotations

import datetime as dt
import re
import zlib
from collections.abc import Collection
from typing import Annotated, Literal

from pydantic import BaseModel, Field, PlainSerializer
from pydantic.json_schema import SkipJsonSchema

Quantity = Literal["mean", "share", "difference", "slope", "correlation", "lagged_correlation", "count", "top_group",
                   "partial_correlation"]
Scale = Literal["fraction", "percent", "percentage_points", "relative_change", "currency", "unit", "count",
                "coefficient", "label"]
#: a date that dumps as ISO text in every mode: task packages write answer specs with plain `json.dumps`
IsoDate = Annotated[dt.date, PlainSerializer(lambda d: d.isoformat(), return_type=str, when_used="always")]
DATA_SUFFIXES = (".csv", ".csv.gz", ".xlsx", ".parquet", ".jsonl", ".json", ".sqlite", ".db", ".tsv",
                 ".txt")  # .txt: free-text logs (documents are .md)
_OPS = {"==": "is", "!=": "is not", ">": "is above", ">=": "is at least", "<": "is below", "<=": "is at most",
        "in": "is one of"}
_SCALE_WORDS = {"fraction": "a fraction between 0 and 1", "percent": "percent (0-100)",
                "percentage_points": "percentage points", "relative_change": "percent change relative to B",
                "count": "a count", "coefficient": "a correlation coefficient (unitless, between -1 and 1)",
                "label": "the label exactly as written in the data"}


def is_data_file(path: str) -> bool:
    """A file a quantity can be computed from (never the data dictionary, a memo or a README)."""
    return path.lower().endswith(DATA_SUFFIXES)


class Measure(BaseModel):
    variable: str = Field(description="canonical variable name (the data dictionary's name)")
    description: str = ""
    files: list[str] = Field(default_factory=list, description="observed data files recording it (world-relative)")
    unit: str | None = Field(None, description="the unit values are computed in (after any unit reconciliation)")


class Filter(BaseModel):
    column: str
    op: Literal["==", "!=", ">", ">=", "<", "<=", "in"] = "=="
    value: IsoDate | float | str | list[float | str]
    unit: str | None = Field(None, description="unit of a numeric value (a threshold in kg, not lb)")

    def words(self) -> str:
        value = ", ".join(map(repr, self.value)) if isinstance(self.value, list) else (
            self.value.isoformat() if isinstance(self.value, dt.date) else repr(self.value))
        return f"`{self.column}` {_OPS[self.op]} {value}" + (f" (in {self.unit})" if self.unit else "")


class Window(BaseModel):
    """Rows whose `column` date is in [start, end); `all_dates` says explicitly that no date restriction applies."""

    all_dates: bool = False
    column: str | None = None
    start: IsoDate | None = None
    end: IsoDate | None = None
    event_dates: bool = Field(False, description="an export records posting dates: the window is on event dates")

    def words(self, note: bool = True) -> str:
        """The window in plain words; `note=False` leaves out the event-date note (said once, in the window line)."""
        if self.all_dates:
            return "all records, whatever their date"
        lo = f"on or after {self.start.isoformat()}" if self.start else ""
        hi = f"before {self.end.isoformat()}" if self.end else ""
        posted = (f" (the date of the event itself: where an export's memo says its `{self.column}` is a posting "
                  "date, shift it back by the documented delay first)") if self.event_dates and note else ""
        return f"rows whose `{self.column}` is " + " and ".join(p for p in (lo, hi) if p) + posted


class Side(BaseModel):
    label: str
    filters: list[Filter] = Field(default_factory=list)
    window: Window | None = None

    def words(self) -> str:
        parts = [f.words() for f in self.filters] + ([self.window.words(note=False)] if self.window else [])
        return f"{self.label} ({'; '.join(parts)})"


class Comparison(BaseModel):
    """The graded value is (value over A) - (value over B)."""

    a: Side
    b: Side

    def names(self) -> tuple[str, str]:
        """What the instruction calls the two sides: A and B, unless a side's words use one of those letters as a
        word of their own, then the first pair that neither side uses. Carriers coded 'A' and 'B' read as "A minus
        B, where A = carrier B (`carrier` is 'B')", and the 1.5B analyst computed carrier A minus carrier B."""
        text = f"{self.a.words()} {self.b.words()}"
        pairs = (("A", "B"), ("X", "Y"), ("P", "Q"))
        return next((p for p in pairs if not any(re.search(rf"\b{n}\b", text) for n in p)), ("G1", "G2"))


class AnswerFacets(BaseModel):
    """Everything that decides one closed-form answer; `factor` scales the recipe's value into `scale`."""

    name: str
    quantity: Quantity
    measure: Measure
    x: Measure | None = Field(None, description="the other variable of a slope or correlation")
    other_columns: dict[str, list[str]] = Field(default_factory=dict,
                                                description="grouping, filter and date columns -> files recording them")
    population: str = Field(description="which rows, one per what")
    filters: list[Filter] = Field(default_factory=list)
    window: Window
    aggregation: str
    comparison: Comparison | None = None
    lag: str | None = Field(None, description="how x is lagged against y (lagged correlations)")
    controls: list[Measure] = Field(default_factory=list, description="variables held fixed (partial correlations)")
    scale: Scale
    unit_label: str | None = None
    factor: float = 1.0
    decimals: int | None = None
    #: the answer line's example value, set by `with_example` (far from the true value); None: the scale's first
    #: candidate. Left out of the JSON schema: a model writing a spec never sets it
    example: SkipJsonSchema[float | None] = None

    @property
    def unit_words(self) -> str:
        if self.scale in ("currency", "unit"):
            return self.unit_label or ""
        return _SCALE_WORDS[self.scale]

    @property
    def grading_unit(self) -> str | None:
        """The unit `core.grading.tolerant` reads: its spellings are accepted, other quantities refused."""
        return {"fraction": "fraction", "percent": "percent", "percentage_points": "pp",
                "relative_change": "percent"}.get(self.scale) or (
            self.unit_label if self.scale in ("currency", "unit") and _one_word(self.unit_label) else None)


def _one_word(label: str | None) -> bool:
    return bool(label) and " " not in (label or "").strip()


#: the answer line's example values by scale, shown only for the format (sign, decimals, no unit). A fraction's
#: lies between 0 and 1 as the line says; a coefficient's between -1 and 1.
EXAMPLES: dict[str, tuple[float, ...]] = {"coefficient": (0.4321, -0.2468, 0.7654),
                                          "fraction": (0.4321, 0.1234, 0.8765)}
OTHER_EXAMPLES: tuple[float, ...] = (12.3456, 47.8912, 86.5432)
#: how many tolerances a shown example keeps from the true value
EXAMPLE_MARGIN = 3.0


def _shown(number: float, decimals: int | None) -> float:
    return round(number, decimals) if decimals is not None else number


def with_example(facets: AnswerFacets, value: float, abs_tol: float | None, rel_tol: float | None) -> AnswerFacets:
    """The facets with an answer-line example that a copy cannot pass: more than EXAMPLE_MARGIN tolerances from
    `value` (the true answer in the answer's unit). A fixed "e.g. 12.35" was within 10% of customer_pricing's
    true 11.58, and the base 0.5B answered 12.35 and was graded right. The example is picked by a hash of the name
    among the scale's candidates, skipping those near the value (then ×10, ×100, …), so that which example a task
    shows says next to nothing about its answer."""
    if facets.scale == "label":
        return facets
    width = EXAMPLE_MARGIN * max(abs_tol or 0.0, (rel_tol or 0.0) * abs(value))
    base = EXAMPLES.get(facets.scale, OTHER_EXAMPLES)
    start = zlib.crc32(facets.name.encode()) % len(base)
    order = base[start:] + base[:start]
    for power in range(12):
        for c in order:
            shown = _shown(c * 10 ** power, facets.decimals)
            if abs(shown - value) > width and shown != 0:
                return facets.model_copy(update={"example": shown})
    raise ValueError(f"answer {facets.name!r}: no example value lies outside the tolerance ({width}) of {value}")


def _example(facets: AnswerFacets) -> str:
    if facets.scale == "label":
        return "the label"
    number = facets.example if facets.example is not None else EXAMPLES.get(facets.scale, OTHER_EXAMPLES)[0]
    return f"{number:.{facets.decimals}f}" if facets.decimals is not None else f"{number}"


def answer_line(facets: AnswerFacets) -> str:
    """`@name[value in percentage points, e.g. 12.35]`: the tag the solver ends with, stating the unit."""
    if facets.scale == "label":
        return f"@{facets.name}[the label exactly as written in the data]"
    word = "as" if facets.scale in ("fraction", "count", "coefficient") else "in"
    return f"@{facets.name}[value {word} {facets.unit_words}, e.g. {_example(facets)}]"


def quantity_sentence(facets: AnswerFacets) -> str:
    """One sentence naming the quantity (used by report instructions and rubric items)."""
    what = facets.aggregation.rstrip(".")
    if facets.comparison is not None:
        a, b = facets.comparison.names()
        what += f" ({a} = {facets.comparison.a.label}, {b} = {facets.comparison.b.label})"
    return f"{what}, in {facets.unit_words}" + (f", rounded to {_places(facets.decimals)}"
                                                if facets.decimals is not None else "")


def _places(decimals: int) -> str:
    return f"{decimals} decimal place" + ("" if decimals == 1 else "s")


def facet_lines(facets: AnswerFacets) -> list[str]:
    """Every facet in plain words, one bullet each."""
    m = facets.measure
    files = ", ".join(f"`{f}`" for f in m.files)
    lines = [f"- Measure: `{m.variable}`" + (f" ({m.description})" if m.description else "")
             + (f", in {m.unit}" if m.unit else "") + f"; recorded in {files}."]
    if facets.x is not None:
        xf = ", ".join(f"`{f}`" for f in facets.x.files)
        lines.append(f"- Against: `{facets.x.variable}`" + (f" ({facets.x.description})" if facets.x.description
                     else "") + (f", in {facets.x.unit}" if facets.x.unit else "") + f"; recorded in {xf}.")
    if facets.controls:
        lines.append("- Held fixed (controls): " + "; ".join(
            f"`{m.variable}`" + (f" ({m.description})" if m.description else "") + " in "
            + ", ".join(f"`{f}`" for f in m.files) for m in facets.controls) + ".")
    if facets.other_columns:
        lines.append("- Other columns used: " + "; ".join(
            f"`{col}` in " + ", ".join(f"`{f}`" for f in files) for col, files in facets.other_columns.items()) + ".")
    lines.append(f"- Population: {facets.population}.")
    lines.append("- Filters: " + ("; ".join(f"only rows where {f.words()}" for f in facets.filters)
                                  if facets.filters else "none (every row of the population)") + ".")
    lines.append(f"- Time window: {facets.window.words()}.")
    lines.append(f"- Computation: {facets.aggregation.rstrip('.')}.")
    if facets.lag:
        lines.append(f"- Lag: {facets.lag}.")
    if facets.comparison is not None:
        c = facets.comparison
        a, b = c.names()
        lines.append(f"- Comparison and sign: {a} minus {b}, where {a} = {c.a.words()} and {b} = {c.b.words()}; "
                     f"the value is positive when {a} is higher and negative when {a} is lower.")
    else:
        lines.append("- Comparison: none (a single value, not a difference).")
    lines.append(f"- Unit: {facets.unit_words}.")
    if facets.decimals is not None:
        lines.append(f"- Rounding: {_places(facets.decimals)}.")
    return lines


def render_answer_spec(facets: AnswerFacets) -> str:
    """Every facet in plain words, then the answer line."""
    return ("The quantity to compute, exactly:\n" + "\n".join(facet_lines(facets))
            + f"\n\nEnd your answer with {answer_line(facets)}")


def render_report_number(facets: AnswerFacets) -> str:
    """A number a report must give: its sentence (`quantity_sentence`), then every facet, indented."""
    return (f"- `{facets.name}`: {quantity_sentence(facets)}.\n"
            + "\n".join("  " + line for line in facet_lines(facets)))


def lint_answer_spec(facets: AnswerFacets, data_files: Collection[str] | None = None) -> list[str]:
    """The facets a spec leaves open (empty when it admits one reading); `data_files`: the files a task ships."""
    out: list[str] = []
    where = f"answer spec {facets.name!r}"
    for label, m in (("measure", facets.measure), ("x", facets.x), *(("control", m) for m in facets.controls)):
        if m is None:
            continue
        if not m.variable:
            out.append(f"{where}: {label} names no variable")
        if not m.files:
            out.append(f"{where}: {label} `{m.variable}` names no observed file")
        for f in m.files:
            if not is_data_file(f):
                out.append(f"{where}: {label} file {f!r} is not a data file")
            elif data_files is not None and f not in data_files:
                out.append(f"{where}: {label} file {f!r} is not in the task's data files")
    for col, files in facets.other_columns.items():
        if not files:
            out.append(f"{where}: column `{col}` is recorded in no named file")
    if facets.quantity == "partial_correlation" and not facets.controls:
        out.append(f"{where}: a partial correlation must name the variables it holds fixed")
    if facets.quantity in ("slope", "correlation", "lagged_correlation", "partial_correlation") and facets.x is None:
        out.append(f"{where}: a {facets.quantity} needs the other variable (x)")
    if facets.quantity == "lagged_correlation" and not facets.lag:
        out.append(f"{where}: a lagged correlation must say how x is lagged")
    if not facets.population.strip():
        out.append(f"{where}: population is open")
    if not facets.aggregation.strip():
        out.append(f"{where}: aggregation is open")
    w = facets.window
    if not w.all_dates and not (w.column and (w.start or w.end)):
        out.append(f"{where}: time window is open (give dates or say all dates)")
    if facets.quantity == "difference":
        c = facets.comparison
        if c is None:
            out.append(f"{where}: a difference needs its comparison (A - B)")
        elif not (c.a.filters or c.a.window) or not (c.b.filters or c.b.window):
            out.append(f"{where}: comparison sides must say which rows are A and which are B")
        else:
            for side in (c.a, c.b):
                if side.window and not (side.window.all_dates or (side.window.start and side.window.end)
                                        or (side.window.column and (side.window.start or side.window.end))):
                    out.append(f"{where}: comparison side {side.label!r} has an open time window")
    if facets.scale in ("currency", "unit") and not (facets.unit_label or "").strip():
        out.append(f"{where}: unit is open")
    if facets.scale != "label" and facets.decimals is None:
        out.append(f"{where}: rounding is open")
    return out
