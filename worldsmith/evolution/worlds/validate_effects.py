"""Validation of no-effect and conditional claims (`core.world_contract_claims`): names, kinds, entities, and
claims the contract itself contradicts."""

from __future__ import annotations

from worldsmith.core.world_contract import NodeInfo, WorldContract

from .problems import Problems

_NUMERIC = ("numeric", "binary", "count")


def check_claims(c: WorldContract, nodes: dict[str, NodeInfo], p: Problems) -> None:
    seen: set[str] = set()
    observed = {v for s in c.systems for v in s.variables}
    for i, cl in enumerate(c.claims):
        path = f"claims[{i}]({cl.id})"
        if not cl.id.isidentifier() or cl.id in seen:
            p.add("bad_name", f"{path}.id", f"{cl.id!r} is not a unique snake_case name", "use e.g. 'promo_no_churn'")
        seen.add(cl.id)
        unknown = [x for x in (cl.source, cl.target) if x not in nodes]
        if unknown:
            p.add("unknown_variable", path, f"{unknown} are not declared variables", f"declared: {sorted(nodes)}")
            continue
        src, tgt = nodes[cl.source], nodes[cl.target]
        if src.kind not in _NUMERIC:
            p.add("claim_kind", f"{path}.source", f"{cl.source} is {src.kind}; a claimed effect is per unit of a "
                  "numeric or binary source", "claim about a numeric or 0/1 column")
        if tgt.kind not in _NUMERIC:
            p.add("claim_kind", f"{path}.target", f"{cl.target} is {tgt.kind}; effects are measured on numbers")
        if src.entity not in (tgt.entity, *c.ancestors(tgt.entity)):
            p.add("claim_entity", path, f"{cl.source} ({src.entity}) is not on the rows of {cl.target} "
                  f"({tgt.entity}) or their parents", "claim about a source the target's rows carry")
        direct = [str(e.id) for e in c.incoming(cl.target) if cl.source in e.sources]
        if cl.kind == "no_effect" and direct:
            p.add("claim_contradicted", path, f"the contract's own edges {direct} make {cl.source} move "
                  f"{cl.target}", "drop the claim or the edge")
        if cl.kind == "conditional":
            chain = (tgt.entity, *c.ancestors(tgt.entity))
            time = c.entity(tgt.entity).time_column
            cols = {n for n, x in nodes.items() if x.entity in chain} | {c.entity(e).key for e in chain} | {time}
            bad = [w.column for w in cl.when if w.column not in cols]
            if bad:
                p.add("unknown_variable", f"{path}.when", f"condition columns {bad} are not on the rows of "
                      f"{cl.target} ({tgt.entity}) or their parents", f"use one of {sorted(x for x in cols if x)}")
            if cl.effect == 0:
                p.add("impossible_param", f"{path}.effect", "a conditional effect of 0 is a no-effect claim",
                      "use kind 'no_effect'")
            elif abs(cl.effect) <= cl.bound:
                p.add("impossible_param", f"{path}.bound", f"bound {cl.bound:g} does not separate the effect "
                      f"{cl.effect:g} from none", "make the bound smaller than |effect|")
        unseen = [x for x in (cl.source, cl.target) if x not in observed]
        if unseen:
            p.warn("unobserved", path, f"no system records {unseen}: the claim can never be confirmed",
                   "add them to a system's variables")
