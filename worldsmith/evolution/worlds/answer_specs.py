"""Answer specs built from phenomenon recipes: complete by construction, one builder per recipe kind.

Files come from the reconciliation plan (the parts the reference solution reads), so the spec names exactly
the observed files a solver needs. Rates are reported in percent, differences of rates in percentage points.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

from worldsmith.core.answer_spec import AnswerFacets, Comparison, Filter, Measure, Side, Window
from worldsmith.core.world_contract import Phenomenon, WorldContract, singular

from .audit import load_contract
from .recipes import recipe_entity
from .reconcile import ReconcilePlan, build_plan

_CURRENCIES = {"usd", "eur", "gbp", "$", "€", "£", "dollars", "euros"}


def statement_decimals(statement: str, default: int = 2) -> int:
    """Decimals the statement template shows: '{value:.1%}' → 1, '{value:.2f}' → 2."""
    m = re.search(r"\{value:[^}]*?\.(\d+)[f%]\}", statement)
    return int(m.group(1)) if m else default


def _files(plan: ReconcilePlan, entity: str, column: str) -> list[str]:
    out = [p.path for s in plan.entity_sources(entity) for p in s.parts if column in p.columns]
    return list(dict.fromkeys(out))


def _measure(c: WorldContract, plan: ReconcilePlan, column: str) -> Measure:
    nodes = c.nodes()
    if column in nodes:
        n = nodes[column]
        return Measure(variable=column, description=n.description, files=_files(plan, n.entity, column),
                       unit=n.unit)
    owner = next(e for e in c.entities if e.key == column)  # an entity key (distinct counts)
    files = [p.path for s in plan.entity_sources(owner.name) for p in s.parts]
    return Measure(variable=column, description=f"identifier of {owner.name}", files=list(dict.fromkeys(files)))


def _binary(c: WorldContract, column: str) -> bool:
    n = c.nodes().get(column)
    return n is not None and n.kind == "binary"


def _filters(c: WorldContract, recipe: Any) -> list[Filter]:
    nodes = c.nodes()
    return [Filter(column=w.column, op=w.op, value=w.value,
                   unit=nodes[w.column].unit if w.column in nodes and isinstance(w.value, (int, float)) else None)
            for w in recipe.where]


def _numeric_scale(c: WorldContract, column: str, *, difference: bool) -> dict[str, Any]:
    """scale/unit/factor for a value in the unit of `column` (a rate when the column is binary)."""
    if _binary(c, column):
        return {"scale": "percentage_points" if difference else "percent", "factor": 100.0}
    unit = c.nodes()[column].unit
    if unit and unit.strip().lower() in _CURRENCIES:
        return {"scale": "currency", "unit_label": unit, "factor": 1.0}
    return {"scale": "unit", "unit_label": unit or f"the units `{column}` is recorded in", "factor": 1.0}


def _other_columns(c: WorldContract, plan: ReconcilePlan, entity: str, recipe: Any) -> dict[str, list[str]]:
    """Files recording each grouping, filter and date column the recipe reads (searching the entity's parents too)."""
    cols = [getattr(recipe, "by", None), *(w.column for w in recipe.where)]
    if recipe.op == "pre_post":
        cols.append(c.entity(entity).time_column)
    out: dict[str, list[str]] = {}
    for col in dict.fromkeys(x for x in cols if x):
        for e in [entity, *c.ancestors(entity)]:
            if files := _files(plan, e, col):
                out[col] = files
                break
        else:
            out[col] = []
    return out


def answer_facets(c: WorldContract, plan: ReconcilePlan, ph: Phenomenon) -> AnswerFacets:
    """The complete spec of a phenomenon's value (every recipe kind of `recipes.py`)."""
    r: Any = ph.recipe
    entity = recipe_entity(c, r)
    ent = c.entity(entity)
    key = ent.key or (c.entity(ent.parent).key if ent.parent else None) or entity
    # the kind of row in words, not in backticks: "the `invoices` records" read as a table named `invoices`, and the
    # file holding them (`billing.sqlite`, table `billing`) has none
    population = f"the {singular(entity).replace('_', ' ')} records, one row per `{key}`" + (
        f" and `{ent.time_column}`" if ent.kind == "panel" and ent.time_column else "") + \
        " (each record counted once: drop repeated copies of the same record)"
    base: dict[str, Any] = dict(name=ph.id, population=population, filters=_filters(c, r),
                                window=Window(all_dates=True), decimals=statement_decimals(ph.statement),
                                other_columns=_other_columns(c, plan, entity, r))
    op = r.op
    if op in ("mean", "group_mean"):
        filters = base.pop("filters") + ([Filter(column=r.by, value=r.group)] if op == "group_mean" else [])
        what = "share of rows with the value 1" if _binary(c, r.variable) else "arithmetic mean"
        return AnswerFacets(quantity="mean", measure=_measure(c, plan, r.variable), filters=filters,
                            aggregation=f"{what} of `{r.variable}` over the rows, leaving blank values out",
                            **_numeric_scale(c, r.variable, difference=False), **base)
    if op == "mean_diff":
        comp = Comparison(a=Side(label=f"{r.by} {r.groups[0]}", filters=[Filter(column=r.by, value=r.groups[0])]),
                          b=Side(label=f"{r.by} {r.groups[1]}", filters=[Filter(column=r.by, value=r.groups[1])]))
        a, b = comp.names()
        return AnswerFacets(quantity="difference", measure=_measure(c, plan, r.variable), comparison=comp,
                            aggregation=f"mean of `{r.variable}` over {a}'s rows minus its mean over {b}'s rows, "
                                        "blank values left out", **_numeric_scale(c, r.variable, difference=True),
                            **base)
    if op == "share":
        return AnswerFacets(quantity="share", measure=_measure(c, plan, r.variable), scale="percent", factor=100.0,
                            aggregation=f"share of the rows (blank `{r.variable}` left out) whose `{r.variable}` "
                                        f"equals {r.value!r}", **base)
    if op == "slope":
        scale = _numeric_scale(c, r.y, difference=True)
        x_unit = c.nodes()[r.x].unit if r.x in c.nodes() else None
        x_unit = singular(x_unit) if x_unit else None  # "USD per seat", "per one seat", not "per one seats"
        per = f"one {x_unit} of `{r.x}`" if x_unit and not _binary(c, r.x) else f"one unit of `{r.x}`"
        if scale.get("unit_label"):
            scale["unit_label"] = f"{scale['unit_label']} per {x_unit or f'unit of {r.x}'}"
        how = "0/1 indicator" if _binary(c, r.x) else "numeric"
        return AnswerFacets(quantity="slope", measure=_measure(c, plan, r.y), x=_measure(c, plan, r.x),
                            aggregation=f"ordinary least-squares slope (with intercept) of `{r.y}` on the {how} "
                                        f"`{r.x}`: the change in `{r.y}` per {per}, over rows where both are "
                                        "recorded", **scale, **base)
    if op == "corr":
        return AnswerFacets(quantity="correlation", measure=_measure(c, plan, r.y), x=_measure(c, plan, r.x),
                            scale="coefficient", aggregation=f"Pearson correlation of `{r.x}` and `{r.y}` over rows "
                                                             "where both are recorded", **base)
    if op == "pre_post":
        when = c.event(r.event).date
        col = ent.time_column
        span = dt.timedelta(days=r.window_days) if r.window_days is not None else None
        # posting dates (a documented delay) would move rows across the split: the windows are on event dates
        posted = any(st.fn == "shift_dates" for src in plan.entity_sources(ent.name) for st in src.steps)
        after = Window(column=col, start=when, end=when + span if span else None, event_dates=posted)
        before = Window(column=col, start=when - span if span else None, end=when, event_dates=posted)
        comp = Comparison(a=Side(label=f"after {r.event.replace('_', ' ')}", window=after),
                          b=Side(label=f"before {r.event.replace('_', ' ')}", window=before))
        a, b = comp.names()
        base["window"] = Window(column=col, start=before.start, end=after.end, event_dates=posted) if span \
            else Window(all_dates=True)
        return AnswerFacets(quantity="difference", measure=_measure(c, plan, r.variable), comparison=comp,
                            aggregation=f"mean of `{r.variable}` over {a}'s rows minus its mean over {b}'s rows "
                                        f"({a} and {b} split by `{col}` at {when.isoformat()}), blank values left "
                                        "out",
                            **_numeric_scale(c, r.variable, difference=True), **base)
    if op == "partial_corr":
        held = ", ".join(f"`{v}`" for v in r.controls)
        labels = [v for v in r.controls if c.nodes()[v].kind == "categorical"]
        dummies = (f" ({', '.join(f'`{v}`' for v in labels)} as one 0/1 column per label, its alphabetically first "
                   "label left out)") if labels else ""
        return AnswerFacets(quantity="partial_correlation", measure=_measure(c, plan, r.y), x=_measure(c, plan, r.x),
                            controls=[_measure(c, plan, v) for v in r.controls], scale="coefficient",
                            aggregation=f"partial correlation of `{r.x}` and `{r.y}` holding {held} fixed: regress "
                                        f"`{r.x}` and `{r.y}` each on {held} by ordinary least squares with an "
                                        f"intercept{dummies}, then take the Pearson correlation of the two "
                                        "residuals, over rows where all of these are recorded", **base)
    if op == "lagged_corr":
        parent = c.entity(ent.parent)  # type: ignore[arg-type]
        lag = (f"pair `{r.x}` of period t-{r.lag} with `{r.y}` of period t within the same `{parent.key}`, periods "
               f"counted in the order of the distinct `period` values; pairs missing either value left out")
        return AnswerFacets(quantity="lagged_correlation", measure=_measure(c, plan, r.y), x=_measure(c, plan, r.x),
                            scale="coefficient", lag=lag,
                            aggregation=f"Pearson correlation of `{r.x}` lagged by {r.lag} period(s) with `{r.y}`",
                            **base)
    if op == "distinct_count":
        k = c.entity(r.entity).key
        return AnswerFacets(quantity="count", measure=_measure(c, plan, k), scale="count", decimals=0,
                            aggregation=f"number of distinct `{k}` values across these files, after writing every "
                                        "id spelling the same way (blank ids left out)",
                            **{k2: v for k2, v in base.items() if k2 != "decimals"})
    if op == "top_group":
        return AnswerFacets(quantity="top_group", measure=_measure(c, plan, r.variable), scale="label",
                            aggregation=f"the `{r.by}` label whose rows have the highest mean `{r.variable}`",
                            **{k2: v for k2, v in base.items() if k2 != "decimals"})
    raise ValueError(f"phenomenon {ph.id}: no answer spec for recipe op {op!r}")


@lru_cache(maxsize=8)
def _world_specs(world_dir: str) -> dict[str, AnswerFacets]:
    c = load_contract(Path(world_dir))
    plan, _ = build_plan(Path(world_dir), c)
    return {p.id: answer_facets(c, plan, p) for p in c.phenomena}


_LOCK = threading.Lock()  # concurrent rows ask at once: plan once, and never import a reader in two threads


def world_answer_specs(world_dir: str | Path) -> dict[str, AnswerFacets]:
    """Answer specs of every phenomenon of a built world (cached: a built world never changes)."""
    with _LOCK:
        return _world_specs(str(Path(world_dir).resolve()))


def named_files(facets: list[AnswerFacets]) -> set[str]:
    """Every data file the answer specs of a task name (measure, the other variable, grouping/filter/date columns)."""
    out: set[str] = set()
    for f in facets:
        out.update(f.measure.files, f.x.files if f.x else [], *f.other_columns.values())
    return out


def systems_named(world_dir: str | Path, facets: list[AnswerFacets]) -> set[str]:
    """Systems with a file among those the task names: the only ones whose defects the task can depend on."""
    files = named_files(facets)
    with _LOCK:
        plan = _world_plan(str(Path(world_dir).resolve()))
    return {s.system for s in plan.sources if any(part.path in files for part in s.parts)}


@lru_cache(maxsize=8)
def _world_plan(world_dir: str) -> ReconcilePlan:
    return build_plan(Path(world_dir), load_contract(Path(world_dir)))[0]
