"""The deterministic engine: contract + seed -> canonical state.

Generation is layer by layer: entity skeletons (ids, parents, dates) in parent order, then every
DAG node in topological order. Each layer draws from its own generator, seeded from
(seed, layer name) through numpy's SeedSequence, so editing one variable never reshuffles the
draws of unrelated ones. Everything is vectorised; a million rows is routine.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
import pandas as pd

from worldsmith.core.world_contract import Entity, NodeInfo, WorldContract
from .grain import derive_values
from .mechanisms import contribution, sigmoid
from .relink import parent_step, relink_day, revised_parents
from .recipes import evaluate, recipe_columns, recipe_entity, where_columns
from .validate import check_contract, edge_graph, entity_rows

ENGINE_VERSION = "1.1"  # 1.1: the answer key leaves out values no system recorded
MIN_ENTITY_ROWS = 10
FIRST_NAMES = ["Ada", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kira", "Luca",
               "Maya", "Noah", "Olga", "Pavel", "Quinn", "Rosa", "Sami", "Tara", "Umar", "Vera", "Wei", "Yara"]
LAST_NAMES = ["Adams", "Baker", "Costa", "Dubois", "Evans", "Fischer", "Garcia", "Haddad", "Ivanova", "Jensen",
              "Kim", "Lopez", "Moreau", "Nakamura", "Okafor", "Patel", "Rossi", "Schmidt", "Tanaka", "Weber"]


def rng_for(seed: int, *layer: str) -> np.random.Generator:
    """Generator for one layer: depends only on the seed and the layer's name."""
    words = np.frombuffer(hashlib.sha256("/".join(layer).encode()).digest()[:16], dtype=np.uint32)
    return np.random.default_rng(np.random.SeedSequence(entropy=int(seed), spawn_key=tuple(int(w) for w in words)))


def id_width(n: int) -> int:
    return max(5, len(str(n)))


def format_ids(prefix: str, numbers: np.ndarray, width: int) -> np.ndarray:
    """Canonical spelling PREFIX-000123 for an int array, as an object array."""
    out = np.empty(len(numbers), dtype=object)
    fmt = f"{prefix}-%0{width}d"  # %-formatting is ~2x faster than nested f-string specs
    out[:] = [fmt % i for i in numbers.tolist()]
    return out


def column(values: object) -> object:
    """Keep strings as object dtype (pandas 3 would otherwise convert them to arrow strings and back)."""
    if isinstance(values, np.ndarray) and values.dtype == object:
        return pd.Series(values, dtype=object, copy=False)
    return values


def scaled(contract: WorldContract, rows: int | None) -> WorldContract:
    """Copy of a contract whose largest table has about `rows` rows; other tables keep their ratios."""
    if rows is None:
        return contract
    base = {e.name: entity_rows(contract, e) for e in contract.entities}
    factor = rows / max(base.values())
    data = contract.model_dump(mode="json")
    for e in data["entities"]:
        fixed = any(a["distribution"]["type"] == "fixed" for a in e["attributes"])
        if e["kind"] != "panel" and not fixed:  # fixed attributes list one value per row
            e["count"] = max(MIN_ENTITY_ROWS, int(round(e["count"] * factor)))
    return WorldContract.model_validate(data)


@dataclass
class Skeleton:
    n: int
    parent_idx: np.ndarray | None = None  # row index into the parent table
    days: np.ndarray | None = None  # days since timeline start (event date / period start)
    n_periods: int = 0  # panels: rows are unit-major, n_periods per unit
    parent_after: np.ndarray | None = None  # a relinked entity: each row's parent from relink_day on
    relink_day: float = 0.0


@dataclass
class CanonicalState:
    """The truth: one DataFrame per entity (canonical ids, full precision), kept apart from observed files."""

    contract: WorldContract
    seed: int
    tables: dict[str, pd.DataFrame]
    skeletons: dict[str, Skeleton] = field(repr=False, default_factory=dict)

    @property
    def rows(self) -> int:
        return int(sum(len(t) for t in self.tables.values()))

    def wide(self, entity: str, columns: list[str] | None = None) -> pd.DataFrame:
        """Entity table with every ancestor's columns attached through the foreign keys."""
        df = self.tables[entity]
        keep = (lambda c: True) if columns is None else (lambda c: c in columns)
        idx = np.arange(len(df))
        cur = self.contract.entity(entity)
        cols = {c: df[c] for c in df.columns if keep(c)}
        days = self.skeletons[entity].days
        while cur.parent is not None:
            idx = parent_step(self.skeletons[cur.name], idx, days)
            cur = self.contract.entity(cur.parent)
            for c, v in self.tables[cur.name].items():
                if c not in cols and keep(c):
                    cols[c] = column(np.asarray(v.to_numpy())[idx])
        return pd.DataFrame(cols)

    def without(self, cells: dict[str, np.ndarray]) -> CanonicalState:
        """A copy with the given cells (variable -> canonical row mask of its entity) blanked."""
        tables = dict(self.tables)
        for var, rows in cells.items():
            ent = self.contract.node(var).entity
            if tables[ent] is self.tables[ent]:
                tables[ent] = tables[ent].copy()
            tables[ent][var] = tables[ent][var].where(~rows)
        return CanonicalState(self.contract, self.seed, tables, self.skeletons)

    def phenomenon_values(self, kept: dict[str, np.ndarray] | None = None) -> dict[str, float | str]:
        """Every phenomenon's value; `kept` (entity -> rows the exports keep, see `observe.kept_rows`) restricts an
        entity to the records that were not cancelled, the population every expected value is about."""
        out: dict[str, float | str] = {}
        for p in self.contract.phenomena:
            need = [*recipe_columns(p.recipe), *where_columns(p.recipe), *self._keys()]
            entity = recipe_entity(self.contract, p.recipe)
            wide = self.wide(entity, need)
            if kept and entity in kept:
                wide = wide[kept[entity]].reset_index(drop=True)
            out[p.id] = evaluate(self.contract, p.recipe, wide)
        return out

    def _keys(self) -> list[str]:
        return [str(e.key) for e in self.contract.entities if e.key] + ["date", "period"]


def _entity_order(contract: WorldContract) -> list[Entity]:
    g = nx.DiGraph()
    g.add_nodes_from(e.name for e in contract.entities)
    g.add_edges_from((e.parent, e.name) for e in contract.entities if e.parent)
    return [contract.entity(n) for n in nx.lexicographical_topological_sort(g)]


def _skeleton(contract: WorldContract, e: Entity, sk: dict[str, Skeleton], seed: int) -> Skeleton:
    rng = rng_for(seed, "skeleton", e.name)
    span = contract.timeline.days
    if e.kind == "panel":
        periods = contract.timeline.periods()
        units = sk[e.parent].n  # type: ignore[index]
        offs = ((periods - pd.Timestamp(contract.timeline.start)).days).to_numpy()
        return Skeleton(n=units * len(periods), parent_idx=np.repeat(np.arange(units), len(periods)),
                        days=np.tile(offs, units).astype(float), n_periods=len(periods))
    n = int(e.count)  # type: ignore[arg-type]
    parent_idx = None
    if e.parent is not None:
        m = sk[e.parent].n
        if e.parent_skew > 0:
            w = np.cumsum(rng.lognormal(0.0, e.parent_skew, m))
            parent_idx = np.minimum(np.searchsorted(w, rng.random(n) * w[-1], side="right"), m - 1)
        else:
            parent_idx = rng.integers(0, m, n)
    days = np.sort(rng.integers(0, span, n)).astype(float) if e.kind == "event" else None
    if e.relink is not None and parent_idx is not None:
        after = revised_parents(parent_idx, sk[e.parent].n, e.relink.share,  # type: ignore[index]
                                rng_for(seed, "relink", e.name))
        return Skeleton(n=n, parent_idx=parent_idx, days=days, parent_after=after,
                        relink_day=relink_day(contract, e))
    return Skeleton(n=n, parent_idx=parent_idx, days=days)


class _View:
    """RowView over arrays being generated, aligned with one entity's rows."""

    def __init__(self, contract: WorldContract, entity: str, sk: dict[str, Skeleton], values: dict[str, np.ndarray],
                 owner: dict[str, str]):
        self.c, self.entity, self.sk, self.values, self.owner = contract, entity, sk, values, owner

    def col(self, name: str) -> np.ndarray:
        src, idx, cur = self.owner[name], None, self.entity
        days = self.sk[self.entity].days
        while cur != src:
            idx = parent_step(self.sk[cur], np.arange(self.sk[cur].n) if idx is None else idx, days)
            cur = self.c.entity(cur).parent  # type: ignore[assignment]
        v = self.values[name]
        return v if idx is None else v[idx]

    def days(self) -> np.ndarray:
        return self.sk[self.entity].days  # type: ignore[return-value]

    def lagged(self, name: str, lag: int) -> np.ndarray:
        s = self.sk[self.entity]
        x = self.col(name).astype(float).reshape(-1, s.n_periods)
        out = np.full_like(x, np.nan)
        out[:, lag:] = x[:, :-lag]
        return out.reshape(-1)


def _draw_root(n: NodeInfo, size: int, rng: np.random.Generator) -> np.ndarray:
    d = n.distribution
    if d.type == "normal":
        return rng.normal(d.mean, d.sd, size)
    if d.type == "lognormal":
        return rng.lognormal(d.mu, d.sigma, size)
    if d.type == "uniform":
        return rng.uniform(d.low, d.high, size)
    if d.type == "poisson":
        return rng.poisson(d.lam, size).astype(np.int64)
    if d.type == "bernoulli":
        return (rng.random(size) < d.p).astype(np.int64)
    if d.type == "categorical":
        cum = np.cumsum(np.asarray(d.probs, dtype=float))
        codes = np.minimum(np.searchsorted(cum / cum[-1], rng.random(size), side="right"), len(cum) - 1)
        return np.asarray(d.categories, dtype=object)[codes]
    if d.type == "fixed":
        return np.asarray(d.values, dtype=object if d.labelled else float)
    if d.type == "person_name":
        first = np.asarray(FIRST_NAMES, dtype=object)[rng.integers(0, len(FIRST_NAMES), size)]
        return first + " " + np.asarray(LAST_NAMES, dtype=object)[rng.integers(0, len(LAST_NAMES), size)]
    raise ValueError(f"{n.name}: unknown distribution {d.type!r}")


def _caused(contract: WorldContract, n: NodeInfo, view: _View, size: int, rng: np.random.Generator) -> np.ndarray:
    add = np.full(size, float(n.intercept))
    logf = np.zeros(size)
    for edge in contract.incoming(n.name):
        contrib, mult = contribution(contract, edge, view, n.kind)
        if edge.mechanism.type == "lag":
            contrib = np.nan_to_num(contrib, nan=0.0)  # the first periods have no history
        if mult:
            logf += contrib
        else:
            add += contrib
    if n.kind == "binary":
        return (rng.random(size) < sigmoid(add + logf)).astype(np.int64)
    mu = add * np.exp(logf)
    if n.kind == "count":
        return rng.poisson(np.clip(mu, 0, None)).astype(np.int64)
    if n.noise.type == "normal" and n.noise.sd > 0:
        mu = mu + rng.normal(0.0, n.noise.sd, size)
    elif n.noise.type == "multiplicative" and n.noise.sd > 0:
        mu = mu * np.exp(rng.normal(-n.noise.sd ** 2 / 2, n.noise.sd, size))
    return mu


def _clip(n: NodeInfo, v: np.ndarray) -> np.ndarray:
    if n.bounds is None or n.kind not in ("numeric", "count"):
        return v
    return np.clip(v, n.bounds.lower, n.bounds.upper).astype(v.dtype)


def generate(contract: WorldContract, seed: int, rows: int | None = None) -> CanonicalState:
    """Canonical state of a (validated) contract; `rows` rescales the largest table."""
    contract = check_contract(scaled(contract, rows))
    sk: dict[str, Skeleton] = {}
    for e in _entity_order(contract):
        sk[e.name] = _skeleton(contract, e, sk, seed)
    nodes = contract.nodes()
    owner = {name: n.entity for name, n in nodes.items()}
    values: dict[str, np.ndarray] = {}
    ends: dict[str, np.ndarray] = {}
    g = edge_graph(contract).copy()
    for e in contract.entities:  # an aggregate of rows that end with a flag waits for the flag (validation refuses a cycle)
        for name, n in nodes.items():
            d = n.derive
            if e.ends_with and d is not None and d.op == "aggregate" and nodes[d.of].entity == e.name:
                g.add_edge(str(e.ends_with), name)
    for name in nx.lexicographical_topological_sort(g):
        if name not in nodes:
            continue  # pseudo nodes (@time, @event:...) carry no values
        n = nodes[name]
        size = sk[n.entity].n
        if n.derive is not None:
            view = _View(contract, n.entity, sk, values, owner)
            values[name] = derive_values(contract, name, view, sk, values)
        elif contract.incoming(name):
            view = _View(contract, n.entity, sk, values, owner)
            values[name] = _clip(n, _caused(contract, n, view, size, rng_for(seed, "node", name)))
        else:
            values[name] = _clip(n, _draw_root(n, size, rng_for(seed, "node", name)))
        for e in contract.entities:  # rows end as soon as their flag exists: later aggregates see only kept rows
            if e.ends_with == name:
                ends[e.name] = _end_rows(contract, e, sk, values, nodes, seed)
    tables = {e.name: _table(contract, e, sk, values, nodes) for e in contract.entities}
    for e in contract.entities:
        if e.name in ends:  # the parent's end date, kept in the truth (no variable, so no system exports it)
            start = pd.Timestamp(contract.timeline.start)
            tables[str(e.parent)][str(e.end_column)] = start + pd.to_timedelta(np.floor(ends[e.name]), unit="D")
    return CanonicalState(contract=contract, seed=seed, tables=tables, skeletons=sk)


def _end_rows(contract: WorldContract, e: Entity, sk: dict[str, Skeleton], values: dict[str, np.ndarray],
              nodes: dict[str, NodeInfo], seed: int) -> np.ndarray:
    """`ends_with`: a parent flagged 1 ends on a day drawn over the timeline and its rows after that day are dropped
    (no invoice after churn). Rows are independent draws, so dropping some leaves the others' values as generated.
    Returns the end day per parent row (NaN: never ends)."""
    flag = np.asarray(values[str(e.ends_with)])
    rng = rng_for(seed, "ends", e.name)
    end = np.where(flag == 1, rng.uniform(0, contract.timeline.days, len(flag)), np.nan)
    s = sk[e.name]
    keep = ~(s.days > end[s.parent_idx])  # type: ignore[index, operator]  # NaN end: every row stays
    sk[e.name] = Skeleton(n=int(keep.sum()), parent_idx=s.parent_idx[keep], days=s.days[keep])  # type: ignore[index]
    for name, n in nodes.items():
        if n.entity == e.name and name in values:  # the rest are drawn later, at the kept rows' size
            values[name] = values[name][keep]
    return end


def _table(contract: WorldContract, e: Entity, sk: dict[str, Skeleton], values: dict[str, np.ndarray],
           nodes: dict[str, NodeInfo]) -> pd.DataFrame:
    s = sk[e.name]
    cols: dict[str, object] = {}
    if e.kind != "panel":
        cols[e.key] = format_ids(e.id_prefix, np.arange(1, s.n + 1), id_width(s.n))  # type: ignore[index]
    if e.parent is not None:
        p = contract.entity(e.parent)
        m = sk[p.name].n
        cols[p.key] = format_ids(p.id_prefix, s.parent_idx + 1, id_width(m))  # type: ignore[index, operator]
    if e.time_column is not None:
        cols[e.time_column] = pd.Timestamp(contract.timeline.start) + pd.to_timedelta(s.days, unit="D")
    for name, n in nodes.items():
        if n.entity == e.name:
            v = values[name]
            cols[name] = pd.Categorical(v, categories=n.distribution.categories) if n.kind == "categorical" \
                else column(v)
    return pd.DataFrame({k: column(v) for k, v in cols.items()})
