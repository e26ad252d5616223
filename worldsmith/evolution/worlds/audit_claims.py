"""What a contract claims, for the auditor and its negative controls.

An edge claims its mechanism's magnitudes (direction and size; `audit_edges.judge` tests the observed estimate against
them with a sampling tolerance). A phenomenon claims the edges it reflects: those it names in `edges`, plus the direct
edges between the recipe's own columns (x -> y of a slope or correlation, `by` -> variable of a group contrast, the
event's step into a before/after mean, the lag of a lagged correlation). Recomputing a phenomenon on the observed files
only shows the files agree with the world's canonical state; its claimed edges show the world agrees with the contract,
so a world generated with an effect at zero fails even though its files are faithful.

`zero_effect_twin` builds the negative control: the same contract with one edge's magnitudes set to zero (and
without a sum invariant the zeroed edge would break, so that the twin stays a valid contract to generate from).
"""

from __future__ import annotations

from typing import Any

from worldsmith.core.world_contract import Edge, Phenomenon, WorldContract

_MAGNITUDES = {"linear": ("coef",), "logistic": ("coef",), "multiplicative": ("coef",), "threshold": ("jump",),
               "saturating": ("vmax",), "lag": ("coef",), "seasonal": ("amplitude",), "step_event": ("jump",),
               "interaction": ("coef",), "power": ("coef",), "piecewise": ("slopes",), "binned": ("effects",),
               "event_percent": ("percent",), "calendar": ("jump",)}


def _reflects(e: Edge, recipe: Any) -> bool:
    op = recipe.op
    if op in ("slope", "corr", "partial_corr"):
        return e.target == recipe.y and recipe.x in e.sources
    if op == "lagged_corr":
        return e.target == recipe.y and recipe.x in e.sources and e.mechanism.type == "lag"
    if op in ("mean_diff", "group_mean", "top_group"):
        return e.target == recipe.variable and recipe.by in e.sources
    if op == "pre_post":
        return e.target == recipe.variable and e.mechanism.type in ("step_event", "event_percent") \
            and getattr(e.mechanism, "event", None) == recipe.event
    return False  # mean, share, distinct_count describe a level, not an effect


def phenomenon_claims(c: WorldContract, ph: Phenomenon) -> list[str]:
    """Ids of the edges a phenomenon asserts (declared ones first, then those implied by its recipe)."""
    ids = list(ph.edges)
    ids += [str(e.id) for e in c.edges if _reflects(e, ph.recipe) and str(e.id) not in ids]
    return ids


def _broken_relation_twin(c: WorldContract, check_id: str) -> WorldContract:
    """The twin of an exact relation: a derived variable that does not respond to its inputs (a constant 0), fixed
    attribute values that are not the contract's (numbers: all equal to their mean; labels: rotated by one), or a
    mapping that is never revised (relink share 0)."""
    data = c.model_dump(mode="json")
    kind, name = check_id.split(":", 1)
    for e in data["entities"]:
        if kind == "relink" and e["name"] == name and e.get("relink"):
            e["relink"]["share"] = 0.0  # the mapping is never revised
            return WorldContract.model_validate(data)
    if kind == "derived":
        for v in data["variables"]:
            if v["name"] == name and v.get("derive"):
                v["derive"], v["intercept"], v["noise"] = None, 0.0, {"type": "none", "sd": 0.0}
                v["distribution"] = {"type": "normal", "mean": 0.0, "sd": 0.0}
                return WorldContract.model_validate(data)
    for e in data["entities"]:
        for a in e["attributes"]:
            if kind == "fixed" and a["name"] == name and a["distribution"]["type"] == "fixed":
                vals = a["distribution"]["values"]
                if any(isinstance(x, str) for x in vals):
                    labels = list(dict.fromkeys(vals))
                    a["distribution"]["values"] = [labels[(labels.index(x) + 1) % len(labels)] for x in vals]
                else:
                    a["distribution"]["values"] = [sum(vals) / len(vals)] * len(vals)
                return WorldContract.model_validate(data)
    raise KeyError(f"no derived variable or fixed attribute for {check_id!r} in contract {c.id}")


def zero_effect_twin(c: WorldContract, edge_id: str) -> WorldContract:
    """The contract with edge `edge_id`'s effect set to zero (magnitudes and per-label levels); all else unchanged.
    `derived:<variable>`, `fixed:<attribute>` and `relink:<entity>` (the ids of those checks) break that relation
    instead."""
    if edge_id.startswith(("derived:", "fixed:", "relink:")):
        return _broken_relation_twin(c, edge_id)
    data = c.model_dump(mode="json")
    for e in data["edges"]:
        if e["id"] != edge_id:
            continue
        m = e["mechanism"]
        for key in _MAGNITUDES[m["type"]]:
            m[key] = [0.0] * len(m[key]) if isinstance(m[key], list) else 0.0
        if m.get("levels"):
            m["levels"] = {k: 0.0 for k in m["levels"]}
        # the twin only generates data; a sum invariant over the zeroed edge's target would make it an invalid
        # contract, while the claimed contract (which the audit reads) keeps it
        data["invariants"] = [i for i in data["invariants"] if not (i["kind"] == "sum" and i["total"] == e["target"])]
        return WorldContract.model_validate(data)
    raise KeyError(f"no edge {edge_id!r} in contract {c.id}; edges: {[e.id for e in c.edges]}")
