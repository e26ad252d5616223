"""Shipped contract templates (one per domain), personas, and seeded random variants.

Templates keep the engine useful when the contract-writing model is weak: a task pipeline can
always fall back to `load_template(domain)` or `random_contract(seed, domain)`.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
from pydantic import BaseModel

from worldsmith.core.world_contract import Domain, Persona, WorldContract
from .engine import scaled
from .validate import check_contract, entity_rows

_MAGNITUDES = ("coef", "jump", "vmax", "amplitude")
_STYLES = ("canonical", "lower_nopad", "alias_underscore", "nodash")
_RATE_CAP = {"missing": 0.3, "duplicates": 0.05, "delay": 1.0}


class TemplateInfo(BaseModel):
    id: str
    domain: str
    title: str
    entities: list[str]
    variables: int
    edges: int
    mechanisms: list[str]
    systems: int
    phenomena: int


def _pkg_dir(name: str) -> Any:
    return resources.files("worldsmith.evolution.worlds").joinpath(name)


@lru_cache(maxsize=None)
def _template_json(domain: str) -> str:
    path = _pkg_dir("templates").joinpath(f"{domain}.json")
    if not path.is_file():
        raise KeyError(f"no template for domain {domain!r}; domains: {[d.value for d in Domain]}")
    return path.read_text(encoding="utf-8")


def list_templates() -> list[TemplateInfo]:
    out = []
    for d in Domain:
        c = WorldContract.model_validate_json(_template_json(d.value))
        out.append(TemplateInfo(id=c.id, domain=d.value, title=c.title, entities=[e.name for e in c.entities],
                                variables=len(c.nodes()), edges=len(c.edges),
                                mechanisms=sorted({e.mechanism.type for e in c.edges}), systems=len(c.systems),
                                phenomena=len(c.phenomena)))
    return out


def load_template(domain_or_id: str, rows: int | None = None) -> WorldContract:
    """A template by domain (e.g. 'finance') or contract id (e.g. 'finance_branches'), optionally rescaled."""
    by_id = {t.id: t.domain for t in list_templates()} if domain_or_id not in {d.value for d in Domain} else {}
    domain = by_id.get(domain_or_id, domain_or_id)
    return scaled(WorldContract.model_validate_json(_template_json(domain)), rows)


def personas(domain: str | None = None) -> list[Persona]:
    data = json.loads(_pkg_dir("personas").joinpath("personas.json").read_text(encoding="utf-8"))
    keys = [domain] if domain else sorted(data)
    return [Persona.model_validate(p) for k in keys for p in data[k]]


def _rng(seed: int, domain: str) -> np.random.Generator:
    word = int.from_bytes(hashlib.sha256(domain.encode()).digest()[:4], "little")
    return np.random.default_rng(np.random.SeedSequence([int(seed), word]))


def _scale_mechanism(m: dict[str, Any], rng: np.random.Generator) -> None:
    for key in _MAGNITUDES:
        if key in m and isinstance(m[key], (int, float)):
            m[key] = float(m[key]) * float(rng.uniform(0.8, 1.25))
    if m.get("levels"):
        m["levels"] = {k: float(v) * float(rng.uniform(0.8, 1.25)) for k, v in m["levels"].items()}


def _perturb_system(s: dict[str, Any], rng: np.random.Generator) -> None:
    if rng.random() < 0.5:
        s["id_style"] = _STYLES[int(rng.integers(0, len(_STYLES)))]
    kept = []
    for d in s["defects"]:
        if rng.random() < 0.25:
            continue  # drop this defect in this variant
        if d["type"] in _RATE_CAP and "rate" in d and d["type"] != "delay":
            d["rate"] = float(min(_RATE_CAP[d["type"]], d["rate"] * rng.uniform(0.5, 1.5)))
        kept.append(d)
    s["defects"] = kept


def random_contract(seed: int, domain: str | None = None, rows: int | None = None, grafts: int = 2) -> WorldContract:
    """A deterministic variant of a template: magnitudes and noise x U(0.8, 1.25) (signs kept), some defects
    dropped or re-rated, id spellings reshuffled, rows rescaled (x U(0.5, 1.5) unless `rows` is given), and up to
    `grafts` constructs of the richer contract language (shapes, percent events, calendars, gates, moderators,
    ratios, aggregates) grafted onto its variables (`random_mechanisms`)."""
    if domain is None:
        names = sorted(d.value for d in Domain)
        domain = names[int(np.random.default_rng(int(seed)).integers(0, len(names)))]
    rng = _rng(seed, domain)
    data = json.loads(_template_json(domain))
    exact = {i["total"] for i in data["invariants"] if i["kind"] == "sum"}  # sums must stay exact
    for e in data["edges"]:
        if e["target"] in exact:
            continue
        _scale_mechanism(e["mechanism"], rng)
        if e.get("heterogeneity"):
            h = e["heterogeneity"]
            h["multipliers"] = {k: float(v) * float(rng.uniform(0.85, 1.15)) for k, v in h["multipliers"].items()}
    for v in data["variables"]:
        if v.get("noise", {}).get("sd"):
            v["noise"]["sd"] = float(v["noise"]["sd"]) * float(rng.uniform(0.8, 1.25))
    for s in data["systems"]:
        _perturb_system(s, rng)
    factor = float(rng.uniform(0.5, 1.5))
    data["id"] = f"{data['id']}~r{seed}"
    c = WorldContract.model_validate(data)
    if rows is None:
        base = max(entity_rows(c, e) for e in c.entities)
        rows = max(200, int(base * factor))
    c = check_contract(scaled(c, rows))
    if grafts:
        from .random_mechanisms import graft_mechanisms

        c = check_contract(graft_mechanisms(c, seed, _rng(seed, domain + "/grafts"), grafts))
    return c
