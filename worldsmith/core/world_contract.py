"""The world contract: what a world is, written before any file exists.

A contract names the entities (tables), the variables (columns) and the causal edges between
them (a DAG with a mechanism per edge), the shared events, the observation systems that turn the
canonical state into imperfect files, and the phenomena (recomputable statements) tasks are built on.
Structural checks live in the pydantic models; semantic checks (cycles, unknown names, impossible
parameters) in `worldsmith.evolution.worlds.validate.validate_contract`, which reports every problem at once.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from enum import Enum
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, model_validator

from worldsmith.core.world_contract_claims import Claim
from worldsmith.core.world_coherence import PlausibilityRule
from worldsmith.core.world_contract_derived import Derivation
from worldsmith.core.world_contract_rich import Calendar, Gate, Relink
from worldsmith.core.world_contract_types import (SOURCELESS, Defect, Distribution, Heterogeneity, Invariant, Mechanism,
                                                  Noise, Recipe, Tolerance)

SCHEMA_VERSION = "1.0"


class Domain(str, Enum):
    commercial_growth = "commercial_growth"
    customer_pricing = "customer_pricing"
    finance = "finance"
    operations_supply_chain = "operations_supply_chain"
    people = "people"
    risk_fraud = "risk_fraud"
    clinical = "clinical"
    epidemiology = "epidemiology"
    bioinformatics = "bioinformatics"
    experimental_science = "experimental_science"
    environment_geospatial = "environment_geospatial"
    energy_iot = "energy_iot"
    public_policy = "public_policy"
    education = "education"
    social_science_survey = "social_science_survey"
    transportation = "transportation"


VariableKind = Literal["numeric", "binary", "categorical", "count", "text"]
FileFormat = Literal["csv", "xlsx", "json", "jsonl", "parquet", "sqlite", "csv.gz", "txt"]  # txt: a free-text log
IdStyle = Literal["canonical", "lower_nopad", "alias_underscore", "nodash"]
GRAIN_FREQ = {"day": "D", "week": "W-MON", "month": "MS"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def singular(name: str) -> str:
    """customers -> customer, facilities -> facility, boxes -> box (for default id column names)."""
    if name.endswith("ies") and len(name) > 4:
        return name[:-3] + "y"
    if name.endswith(("sses", "xes", "ches", "shes")):
        return name[:-2]
    if name.endswith("s") and not name.endswith("ss") and len(name) > 3:
        return name[:-1]
    return name


class Persona(_Strict):
    name: str
    role: str
    organisation: str
    goal: str


class Timeline(_Strict):
    start: dt.date
    end: dt.date
    grain: Literal["day", "week", "month"] = "month"

    def periods(self) -> pd.DatetimeIndex:
        """Period start dates of the panel grid (weeks start on Monday, months on the 1st)."""
        return pd.date_range(pd.Timestamp(self.start), pd.Timestamp(self.end), freq=GRAIN_FREQ[self.grain])

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1


class Bounds(_Strict):
    lower: float | None = None
    upper: float | None = None


class Attribute(_Strict):
    """An exogenous column of an entity, drawn from its distribution (a root of the DAG)."""

    name: str
    distribution: Distribution
    unit: str | None = None
    bounds: Bounds | None = None
    decimals: int | None = 2
    description: str = ""

    @property
    def kind(self) -> VariableKind:
        if self.distribution.type == "fixed":
            return "categorical" if self.distribution.labelled else "numeric"
        return {"categorical": "categorical", "bernoulli": "binary", "poisson": "count",
                "person_name": "text"}.get(self.distribution.type, "numeric")  # type: ignore[return-value]


class Entity(_Strict):
    """A table. static: `count` rows; event: `count` dated rows; panel: one row per parent x period."""

    name: str
    id_prefix: str | None = Field(default=None, description="letters; canonical ids are <id_prefix>-<zero-padded "
                                  "number>, e.g. C-00012 (not used by panels)")
    alias: str | None = Field(default=None, description="word used by 'alias_underscore' id spellings, e.g. CUST")
    kind: Literal["static", "event", "panel"] = "static"
    count: int | None = Field(default=None, description="rows (static/event); panels have parent rows x periods")
    parent: str | None = Field(default=None, description="entity each row belongs to (foreign key)")
    parent_skew: float = Field(default=0.0, description="0: children spread uniformly over parents; "
                               ">0: lognormal sigma of parent activity")
    key: str | None = Field(default=None, description="id column; default <singular name>_id")
    attributes: list[Attribute] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list, description="categorical attributes that define groups")
    ends_with: str | None = Field(default=None, description="event entities: a binary variable of the parent; a "
                                  "parent whose value is 1 ends on a day drawn over the timeline (canonical column "
                                  "`<variable>_date` of the parent) and has no rows after it (nothing billed after "
                                  "churn)")
    relink: Relink | None = Field(default=None, description="the parent link revised at a date for a share of rows")
    description: str = ""

    @property
    def end_column(self) -> str | None:
        """The parent's canonical end-date column when rows stop at the parent's end (`ends_with`)."""
        return f"{self.ends_with}_date" if self.ends_with else None

    @model_validator(mode="after")
    def _defaults(self) -> "Entity":
        if self.key is None and self.kind != "panel":
            self.key = f"{singular(self.name)}_id"
        if self.alias is None and self.kind != "panel":
            self.alias = self.name[:4].upper()
        return self

    @property
    def time_column(self) -> str | None:
        return {"event": "date", "panel": "period"}.get(self.kind)


class Variable(_Strict):
    """An endogenous column (or a root with its own distribution) of one entity."""

    name: str
    entity: str
    kind: VariableKind = "numeric"
    unit: str | None = None
    bounds: Bounds | None = None
    distribution: Distribution | None = Field(default=None, description="required when nothing causes it")
    intercept: float = Field(default=0.0, description="baseline on the target scale (binary: logit)")
    noise: Noise = Field(default_factory=Noise)
    decimals: int | None = 2
    derive: Derivation | None = Field(default=None, description="computed exactly from other variables (ratio, "
                                      "stock-and-flow balance, aggregate of a finer grain); no edges, no noise")
    description: str = ""


class Edge(_Strict):
    id: str | None = None
    sources: list[str] = Field(default_factory=list, description="0 for seasonal/step_event, 2 for interaction")
    target: str
    mechanism: Mechanism
    heterogeneity: Heterogeneity | None = None
    gate: Gate | None = Field(default=None, description="the effect acts only while a variable is below/above a "
                              "threshold")
    description: str = ""

    def default_id(self) -> str:
        left = "+".join(self.sources) if self.sources else self.mechanism.type
        return f"{left}->{self.target}"


class Event(_Strict):
    name: str
    date: dt.date
    description: str


class Confounder(_Strict):
    variable: str
    cause: str
    effect: str
    note: str = ""


class ObservationSystem(_Strict):
    name: str
    description: str = ""
    entity: str
    variables: list[str]
    format: FileFormat = "csv"
    file: str | None = Field(default=None, description="file stem; default = system name")
    partition: Literal["none", "year", "quarter"] = Field(default="none", description="year: one file/sheet/table "
                                                          "per year (stem_2024); quarter: one per quarter (stem_2024Q1)")
    id_style: IdStyle = "canonical"
    date_format: str = "%Y-%m-%d"
    dictionary: bool = Field(default=True, description="False: the system is missing from data_dictionary.md")
    defects: list[Defect] = Field(default_factory=list)

    @property
    def stem(self) -> str:
        return self.file or self.name


class Phenomenon(_Strict):
    id: str = Field(description="snake_case; also the answer tag name")
    statement: str = Field(description="natural-language template; {value} is replaced by the computed value")
    recipe: Recipe
    tolerance: Tolerance = Field(default_factory=Tolerance)
    kind: Literal["cause", "consequence", "descriptive"] = "descriptive"
    edges: list[str] = Field(default_factory=list, description="ids of the edges this phenomenon reflects")


class NodeInfo(BaseModel):
    """A DAG node: an entity attribute or a variable, seen uniformly."""

    name: str
    entity: str
    kind: VariableKind
    unit: str | None = None
    bounds: Bounds | None = None
    distribution: Any = None
    intercept: float = 0.0
    noise: Noise = Field(default_factory=Noise)
    decimals: int | None = 2
    is_attribute: bool = False
    derive: Any = None
    description: str = ""


class WorldContract(_Strict):
    schema_version: Literal["1.0"] = SCHEMA_VERSION
    id: str
    title: str
    domain: Domain
    persona: Persona
    timeline: Timeline
    entities: list[Entity]
    variables: list[Variable] = Field(default_factory=list)
    edges: list[Edge] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    calendars: list[Calendar] = Field(default_factory=list, description="shared event days common to all entities")
    confounders: list[Confounder] = Field(default_factory=list)
    invariants: list[Invariant] = Field(default_factory=list)
    systems: list[ObservationSystem] = Field(default_factory=list)
    phenomena: list[Phenomenon] = Field(default_factory=list)
    claims: list[Claim] = Field(default_factory=list, description="no-effect and conditional effect claims")
    plausibility: list[PlausibilityRule] = Field(default_factory=list, description="domain rules checked at "
                                                 "validation and on the generated world (world_coherence)")
    description: str = ""

    @model_validator(mode="after")
    def _edge_ids(self) -> "WorldContract":
        """Give unnamed edges stable ids; a second edge between the same nodes gets its mechanism appended."""
        taken = {e.id for e in self.edges if e.id is not None}
        for e in self.edges:
            if e.id is None:
                cand = e.default_id()
                if cand in taken:
                    cand = f"{cand}[{e.mechanism.type}]"
                k = 2
                base = cand
                while cand in taken:
                    cand, k = f"{base}#{k}", k + 1
                e.id = cand
                taken.add(cand)
        return self

    # -- lookups (the contract is treated as immutable once validated)
    def entity(self, name: str) -> Entity:
        for e in self.entities:
            if e.name == name:
                return e
        raise KeyError(f"unknown entity {name!r}; known: {[e.name for e in self.entities]}")

    def nodes(self) -> dict[str, NodeInfo]:
        out: dict[str, NodeInfo] = {}
        for e in self.entities:
            for a in e.attributes:
                out[a.name] = NodeInfo(name=a.name, entity=e.name, kind=a.kind, unit=a.unit, bounds=a.bounds,
                                       distribution=a.distribution, decimals=a.decimals, is_attribute=True,
                                       noise=Noise(type="none"), description=a.description)
        for v in self.variables:
            out.setdefault(v.name, NodeInfo(**v.model_dump(exclude={"distribution", "derive"}),
                                            distribution=v.distribution, derive=v.derive))
        return out

    def node(self, name: str) -> NodeInfo:
        nodes = self.nodes()
        if name not in nodes:
            raise KeyError(f"unknown variable {name!r}; known: {sorted(nodes)}")
        return nodes[name]

    def event(self, name: str) -> Event:
        for ev in self.events:
            if ev.name == name:
                return ev
        raise KeyError(f"unknown event {name!r}; known: {[e.name for e in self.events]}")

    def calendar(self, name: str) -> Calendar:
        for cal in self.calendars:
            if cal.name == name:
                return cal
        raise KeyError(f"unknown calendar {name!r}; known: {[x.name for x in self.calendars]}")

    def ancestors(self, entity: str) -> list[str]:
        """Parent chain of an entity, nearest first (stops on a loop; validation reports loops)."""
        known = {e.name: e for e in self.entities}
        chain: list[str] = []
        cur = known[entity].parent if entity in known else None
        while cur is not None and cur in known and cur not in chain and cur != entity:
            chain.append(cur)
            cur = known[cur].parent
        return chain

    def incoming(self, target: str) -> list[Edge]:
        return [e for e in self.edges if e.target == target]

    def system(self, name: str) -> ObservationSystem:
        for s in self.systems:
            if s.name == name:
                return s
        raise KeyError(f"unknown observation system {name!r}")

    def phenomenon(self, pid: str) -> Phenomenon:
        for p in self.phenomena:
            if p.id == pid:
                return p
        raise KeyError(f"unknown phenomenon {pid!r}; known: {[p.id for p in self.phenomena]}")

    def edge_nodes(self, edge: Edge) -> list[str]:
        """DAG nodes an edge touches; sourceless mechanisms hang off a pseudo node (time / event)."""
        if edge.mechanism.type in SOURCELESS:
            m: Any = edge.mechanism
            pseudo = {"seasonal": "@time", "calendar": f"@calendar:{getattr(m, 'calendar', '')}"}.get(
                m.type, f"@event:{getattr(m, 'event', '')}")
            return [pseudo, edge.target]
        return [*edge.sources, edge.target]

    def canonical_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

    def sha256(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()


def contract_json_schema() -> dict[str, Any]:
    """JSON schema of WorldContract (what an LLM contract writer is asked to produce)."""
    return WorldContract.model_json_schema()
