"""Phenomenon recipes: declarative specs evaluated the same way on canonical and reconciled data.

`recipe_call` turns a recipe into (kernel function name, keyword arguments); evaluating a recipe is
calling that kernel on the wide table of the recipe's entity. The reference-solution generator
prints the very same call, so the auditor and the solution cannot drift apart.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pandas as pd

from . import kernels
from worldsmith.core.world_contract import WorldContract
from worldsmith.core.world_contract_types import Recipe

TIME_COLUMNS = ("date", "period")


def recipe_columns(recipe: Recipe) -> list[str]:
    """Variables a recipe reads (excluding `where` columns)."""
    names = [getattr(recipe, f) for f in ("variable", "by", "x", "y") if getattr(recipe, f, None)]
    return list(dict.fromkeys([*names, *getattr(recipe, "controls", [])]))


def where_columns(recipe: Recipe) -> list[str]:
    return [c.column for c in recipe.where]


def column_entity(contract: WorldContract, column: str) -> str | None:
    """Entity owning a column: a node, or an entity key; None for time columns or unknown names."""
    nodes = contract.nodes()
    if column in nodes:
        return nodes[column].entity
    for e in contract.entities:
        if e.key == column:
            return e.name
    return None


def recipe_entity(contract: WorldContract, recipe: Recipe) -> str:
    """The table a recipe runs on: the deepest entity whose ancestors own every other column."""
    owners = {column_entity(contract, c) for c in [*recipe_columns(recipe), *where_columns(recipe)]}
    if recipe.op == "distinct_count":
        owners.add(recipe.entity)  # type: ignore[union-attr]
    owners.discard(None)
    for cand in sorted(owners):  # type: ignore[arg-type]
        reach = {cand, *contract.ancestors(cand)}
        if owners <= reach:
            return cand  # type: ignore[return-value]
    raise ValueError(f"recipe {recipe.op} mixes columns of entities {sorted(owners)} that are not on "
                     "one parent chain; use columns of one entity and its parents")


def _date(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.date) else value


def recipe_call(contract: WorldContract, recipe: Recipe) -> tuple[str, dict[str, Any]]:
    """(kernel function name, kwargs without the DataFrame) for a recipe."""
    r: Any = recipe
    ent = contract.entity(recipe_entity(contract, recipe))
    if r.op == "mean":
        return "op_mean", {"variable": r.variable}
    if r.op == "group_mean":
        return "op_group_mean", {"variable": r.variable, "by": r.by, "group": r.group}
    if r.op == "mean_diff":
        return "op_mean_diff", {"variable": r.variable, "by": r.by, "group_a": r.groups[0], "group_b": r.groups[1]}
    if r.op == "share":
        return "op_share", {"variable": r.variable, "value": r.value}
    if r.op == "slope":
        return "op_slope", {"x": r.x, "y": r.y}
    if r.op == "corr":
        return "op_corr", {"x": r.x, "y": r.y}
    if r.op == "pre_post":
        return "op_pre_post", {"variable": r.variable, "date_column": ent.time_column,
                               "event_date": contract.event(r.event).date.isoformat(),
                               "window_days": r.window_days}
    if r.op == "lagged_corr":
        parent = contract.entity(ent.parent)  # type: ignore[arg-type]
        return "op_lagged_corr", {"x": r.x, "y": r.y, "unit_column": parent.key, "time_column": "period",
                                  "lag": r.lag}
    if r.op == "partial_corr":
        return "op_partial_corr", {"x": r.x, "y": r.y, "controls": list(r.controls)}
    if r.op == "distinct_count":
        return "op_distinct_count", {"key": contract.entity(r.entity).key}
    if r.op == "top_group":
        return "op_top_group", {"variable": r.variable, "by": r.by}
    raise ValueError(f"unknown recipe op {r.op!r}")


def where_args(recipe: Recipe) -> list[tuple[str, str, Any]]:
    return [(c.column, c.op, _date(c.value)) for c in recipe.where]


def evaluate(contract: WorldContract, recipe: Recipe, wide: pd.DataFrame) -> float | str:
    """Value of a recipe on a wide table (canonical or reconciled) of its entity."""
    fn, kwargs = recipe_call(contract, recipe)
    frame = kernels.apply_where(wide, where_args(recipe)) if recipe.where else wide
    return getattr(kernels, fn)(frame, **kwargs)
