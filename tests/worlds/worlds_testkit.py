"""Helpers for the world-engine tests (imported as a plain module: tests/ is not a package)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from worldsmith.evolution.worlds import WorldContract

TEMPLATE_DIR = Path(__file__).resolve().parents[2] / "worldsmith" / "evolution" / "worlds" / "templates"


def template_data(domain: str) -> dict[str, Any]:
    return json.loads((TEMPLATE_DIR / f"{domain}.json").read_text())


def mini_contract(**over: Any) -> dict[str, Any]:
    """A tiny valid contract (one static + one event entity) for unit tests; keys in `over` replace the defaults."""
    data: dict[str, Any] = {
        "id": "mini", "title": "Mini world", "domain": "commercial_growth",
        "persona": {"name": "Ann", "role": "analyst", "organisation": "Acme", "goal": "test"},
        "timeline": {"start": "2023-01-01", "end": "2024-12-31", "grain": "month"},
        "entities": [
            {"name": "customers", "id_prefix": "C", "count": 400, "attributes": [
                {"name": "region", "distribution": {"type": "categorical", "categories": ["north", "south"],
                                                    "probs": [0.5, 0.5]}},
                {"name": "income", "distribution": {"type": "normal", "mean": 50.0, "sd": 10.0}, "unit": "kUSD"}]},
            {"name": "orders", "id_prefix": "O", "kind": "event", "count": 4000, "parent": "customers",
             "attributes": [{"name": "discount", "distribution": {"type": "uniform", "low": 0, "high": 30},
                             "bounds": {"lower": 0, "upper": 30}, "unit": "pct"}]}],
        "variables": [{"name": "amount", "entity": "orders", "unit": "USD", "intercept": 50.0,
                       "noise": {"type": "normal", "sd": 2.0}, "bounds": {"lower": 0}}],
        "edges": [{"sources": ["income"], "target": "amount", "mechanism": {"type": "linear", "coef": 0.8}},
                  {"sources": ["discount"], "target": "amount", "mechanism": {"type": "linear", "coef": -0.5}}],
        "systems": [
            {"name": "crm", "entity": "customers", "variables": ["region", "income"], "format": "csv"},
            {"name": "shop", "entity": "orders", "variables": ["discount", "amount"], "format": "csv"}],
        "phenomena": [{"id": "mean_amount", "statement": "Orders average {value:.2f} USD.",
                       "recipe": {"op": "mean", "variable": "amount"}}],
    }
    data.update(copy.deepcopy(over))
    return data


def contract(data: dict[str, Any]) -> WorldContract:
    return WorldContract.model_validate(data)
