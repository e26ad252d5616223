"""Contracts of the evolution agents (issue 13, items 2 and 6): what each agent reads and returns.

Profiler → WorkspaceProfile + DomainProfile; director → Expansion | Composition; proposer → GoalPackage;
executor → ExecutionResult; validator → Verdict; rubric generator → RubricDraft from EvidenceCards; criterion
validator → CriterionVerdict per criterion. The graph that wires them (and the workspace store) take these
types as they are; they import nothing from the agents.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from worldsmith.core.schemas import Finding, Model

Mode = Literal["deepen", "search", "decompose"]
NodeStatus = Literal["pending", "verified", "revised", "unsupported", "failed"]
VerdictKind = Literal["supported", "revised", "unsupported"]
CriterionStatus = Literal["verified", "unverifiable", "over-specified", "refuted"]


def _nonempty(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty")
    return v.strip()


Text = Annotated[str, AfterValidator(_nonempty)]  # a required, non-blank string


def _clip(n: int) -> BeforeValidator:
    return BeforeValidator(lambda v: v[:n] if isinstance(v, str) else v)


#: Free text a model writes is capped the same way: the JSON schema says maxLength, so a grammar-constrained small
#: model cannot loop inside one string (the 1.5B profiler repeated one overview sentence to its 1,536-token budget,
#: in every embedded run), and a longer string from another endpoint is cut, not refused.
Overview = Annotated[str, _clip(700), AfterValidator(_nonempty), Field(max_length=700)]
Note = Annotated[str, _clip(300), Field(max_length=300)]


def _first(n: int) -> BeforeValidator:
    return BeforeValidator(lambda v: v[:n] if isinstance(v, list) else v)


#: Lists a model writes are capped: the JSON schema says maxItems (a grammar-constrained small model cannot run on
#: past it, and a reply stays inside the completion budget) and longer lists from other endpoints are cut, not refused.
Cap3 = _first(3)
Cap6 = _first(6)
Cap12 = _first(12)


# --------------------------------------------------------------------------------------------- profiler


class Artifact(Model):
    path: str = Field(description="file path exactly as the file profile lists it")
    role: str = Field(description="what the file holds, in a few words (e.g. 'one row per invoice')")


class Relation(Model):
    left: str = Field(description="'file.column' on one side")
    right: str = Field(description="'file.column' on the other side")
    kind: str = Field("join", description="join, lookup, same entity under another name, ...")
    note: str = ""


class WorkspaceProfile(Model):
    """The profiler's reading of a workspace (the deterministic file profiles are its input)."""

    overview: Overview = Field(description="2-4 sentences: what the workspace is about")
    artifacts: Annotated[list[Artifact], Cap12] = Field(min_length=1, max_length=12)
    relations: Annotated[list[Relation], Cap6] = Field(default_factory=list, max_length=6,
                                                       description="joins and links between files")
    usage_notes: Annotated[list[Note], Cap6] = Field(default_factory=list, max_length=6,
                                                    description="how the files are meant to be used")
    hazards: Annotated[list[Note], Cap6] = Field(default_factory=list, max_length=6,
                                                description="defects an analyst must handle (missing values, "
                               "duplicates, unit drift, inconsistent ids, ...)")


class DomainProfile(Model):
    domain: str = Field(description="the field the data comes from, e.g. 'subscription retail'")
    work_modes: Annotated[list[str], Cap6] = Field(min_length=1, max_length=6, description="kinds of analysis work that fit (descriptive, "
                                  "diagnostic, forecasting, cohort analysis, ...)")
    methods: Annotated[list[str], Cap6] = Field(default_factory=list, max_length=6,
                                                description="domain methods worth applying")


class ProfilerOutput(Model):
    workspace: WorkspaceProfile
    domain: DomainProfile


# --------------------------------------------------------------------------------------------- the graph as agents see it


def is_verified(finding: Finding) -> bool:
    """Whether later work may build on a finding: the validator supported it, or supported a revised statement."""
    return finding.status in ("supported", "revised")


class NodeRecord(Model):
    """One exploration-graph node, summarised for the director."""

    id: str
    parents: list[str] = Field(default_factory=list)
    mode: Literal["root", "deepen", "search", "decompose", "compose"] = "root"
    depth: int = Field(0, ge=0)
    status: NodeStatus = "pending"
    goal: str = ""
    findings: list[Finding] = Field(default_factory=list)


# --------------------------------------------------------------------------------------------- director


class Direction(Model):
    question: Text = Field(description="the new question, self-contained")
    mode: Mode
    depends_on: str = Field(description="id of the verified finding this direction builds on")
    work_mode: str = Field(description="one of the domain profile's work modes")
    why: Text = Field(description="why it matters, one sentence")


class Expansion(Model):
    kind: Literal["expansion"] = "expansion"
    parent: str = Field(description="id of an eligible (verified) node to expand")
    directions: Annotated[list[Direction], Cap3] = Field(min_length=1, max_length=3)


class Composition(Model):
    kind: Literal["composition"] = "composition"
    sources: Annotated[list[str], Cap3] = Field(min_length=2, max_length=3,
                                                description="ids of >= 2 verified findings, from different nodes")
    relation: Text = Field(description="how the sources relate")
    objective: Text = Field(description="the joint question")
    why: Text = Field(description="why both sources are needed")


DirectorDecision = Annotated[Expansion | Composition, Field(discriminator="kind")]


class DirectorOutput(Model):
    decision: DirectorDecision

    @model_validator(mode="before")
    @classmethod
    def _infer_kind(cls, data: object) -> object:
        """A decision without "kind" is read by its fields (small models drop the tag: its default makes the JSON
        schema's grammar leave it out): "parent"/"directions" make an expansion, "sources" a composition."""
        if isinstance(data, dict) and isinstance(data.get("decision"), dict) and "kind" not in data["decision"]:
            d = data["decision"]
            kind = "composition" if "sources" in d and "directions" not in d else "expansion"
            return {**data, "decision": {**d, "kind": kind}}
        return data


class ExpansionOnly(Model):
    """The director's reply when no composition is possible (fewer than two nodes have verified findings): the
    grammar then offers only an expansion."""

    decision: Expansion


class CompositionOnly(Model):
    """The director's reply when no node can be expanded: the grammar offers only a composition."""

    decision: Composition


# --------------------------------------------------------------------------------------------- proposer


class GoalPackage(Model):
    goal: Text = Field(description="a self-contained analysis goal: what to compute, on which files, what to report")
    depends_on: list[str] = Field(default_factory=list, description="ids of the verified findings it builds on")
    context_summary: str = Field("", description="what is already known, from verified findings only")


# --------------------------------------------------------------------------------------------- executor


class ExecutionResult(Model):
    """`execution_result.json` of one node. `numbers` are the script's `RESULT name = value` lines."""

    node: str
    status: Literal["completed", "failed"]
    goal: str = ""
    observations: list[str] = Field(default_factory=list)
    methodology: str = ""
    conclusion: str = Field("", description="the answer, every number inline")
    numbers: dict[str, float] = Field(default_factory=dict, description="what the script printed as RESULT lines")
    script: str = Field("", description="workdir-relative path of analyze_node<i>.py")
    log: str = Field("", description="workdir-relative path of the analysis log")
    generated_files: list[str] = Field(default_factory=list, description="workdir-relative files the script wrote")
    inputs: list[str] = Field(default_factory=list, description="input file names the script reads")
    error: str | None = None
    attempts: int = Field(0, ge=0, description="script drafts tried")

    @model_validator(mode="after")
    def _failed_says_why(self) -> ExecutionResult:
        if self.status == "failed" and not self.error:
            raise ValueError("a failed execution must say why (error)")
        return self


# --------------------------------------------------------------------------------------------- validator


class ConditionDependency(Model):
    condition: str = Field(description="a choice the claim depends on (a filter, a cleaning rule, a period)")
    effect: str = Field("", description="what happens to the claim without it")


class Verdict(Model):
    verdict: VerdictKind
    ground_truth: str = Field("", description="the statement the evidence supports (the corrected one when revised)")
    issues: list[str] = Field(default_factory=list)
    condition_dependencies: list[ConditionDependency] = Field(default_factory=list)
    reproduced: bool = Field(False, description="the script re-ran in a fresh sandbox and printed the same numbers")
    falsification: str = Field("", description="the alternative check tried and what it printed")
    checked: bool = Field(True, description="an alternative check ran (False: none of the checks written ran, and a "
                                            "supported claim stands on its reproduction alone)")

    @model_validator(mode="after")
    def _supported_has_truth(self) -> Verdict:
        if self.verdict != "unsupported" and not self.ground_truth.strip():
            raise ValueError(f"a {self.verdict} verdict needs the ground_truth statement")
        return self


class ReviewRound(Model):
    round: int = Field(ge=1)
    verdict: Verdict | None = None
    execution_status: Literal["completed", "failed"]
    kept: bool = Field(description="the round's files were promoted into the node (never for a rejected update)")
    note: str = ""


class ReviewOutcome(Model):
    accepted: bool
    verdict: Verdict | None = None
    result: ExecutionResult | None = None
    rounds: list[ReviewRound] = Field(default_factory=list)


# --------------------------------------------------------------------------------------------- dual evidence


class EvidenceCard(Model):
    """What one independent solver run did and found."""

    solver: str = Field(description="who produced it: model/role and temperature, e.g. 'teacher@0.7'")
    operations: list[str] = Field(min_length=1, description="the analysis steps, in order")
    computed_values: dict[str, float] = Field(default_factory=dict)
    conclusions: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list, description="the data files its script read")
    methods: list[str] = Field(default_factory=list, description="the statistical methods its script called")


class RubricCriterion(Model):
    id: str
    dimension: Text = Field(description="one of the rubric's dimensions")
    text: Text = Field(description="one observable requirement of the deliverable")
    type: Literal["filter", "preference"] = Field(description="filter: must hold to pass; preference: earns points")
    provenance: Literal["gt", "generated"] = Field(description="gt: from the verified ground truth; generated: from "
                                                   "the solvers' evidence")
    expected_value: float | None = Field(None, description="the number the deliverable must report, if any")
    tolerance: float | None = Field(None, ge=0, description="relative tolerance of expected_value (0.02 = 2%)")
    #: the data files a deliverable must name (set on the evidence criterion `ev_files`, never by a model: left out
    #: of the JSON schema the generator writes to); graded by name, without a judge
    names: SkipJsonSchema[list[str]] = Field(default_factory=list)


MAX_GT_SHARE = 0.4


def over_gt_share(criteria: list[RubricCriterion]) -> bool:
    """Whether the ground-truth criteria are more than MAX_GT_SHARE of `criteria`."""
    return sum(c.provenance == "gt" for c in criteria) > MAX_GT_SHARE * len(criteria)


class RubricProposal(Model):
    """A rubric as the generator writes it. The generator's screen (`agents.rubric_generator.screened`) drops what
    is no requirement of a deliverable and sets provenance from the evidence; what remains must be a `RubricDraft`."""

    dimensions: list[str] = Field(min_length=4, max_length=7)
    criteria: list[RubricCriterion] = Field(min_length=1, max_length=10)

    @model_validator(mode="before")
    @classmethod
    def _distinct_ids(cls, data: object) -> object:
        """A criterion id written twice is a label slip, not a second criterion's loss: the later ones become
        `<id>_2`, `<id>_3` (the 1.5B generator wrote `evidence` twice in all three drafts and the task was dropped)."""
        if not isinstance(data, dict) or not isinstance(data.get("criteria"), list):
            return data
        seen: dict[str, int] = {}
        taken = {c.get("id") for c in data["criteria"] if isinstance(c, dict)}
        criteria = []
        for c in data["criteria"]:
            if isinstance(c, dict) and isinstance(c.get("id"), str):
                n = seen[c["id"]] = seen.get(c["id"], 0) + 1
                if n > 1:
                    k = n
                    while f"{c['id']}_{k}" in taken:
                        k += 1
                    taken.add(f"{c['id']}_{k}")
                    c = {**c, "id": f"{c['id']}_{k}"}
            criteria.append(c)
        return {**data, "criteria": criteria}


class RubricDraft(RubricProposal):
    """A rubric that keeps the structural rules: distinct dimensions naming every criterion's, distinct ids, at
    most 40% of the criteria from the ground truth."""

    @model_validator(mode="after")
    def _consistent(self) -> RubricDraft:
        dims = {d.strip().lower() for d in self.dimensions}
        if len(dims) != len(self.dimensions):
            raise ValueError("dimensions must be distinct")
        ids = [c.id for c in self.criteria]
        if len(set(ids)) != len(ids):
            raise ValueError(f"criterion ids must be unique, got {ids}")
        unknown = sorted({c.dimension for c in self.criteria if c.dimension.strip().lower() not in dims})
        if unknown:
            raise ValueError(f"criteria name dimensions not in the list: {unknown}")
        gt = sum(c.provenance == "gt" for c in self.criteria)
        if gt > MAX_GT_SHARE * len(self.criteria):
            raise ValueError(f"{gt} of {len(self.criteria)} criteria come from the ground truth; at most "
                             f"{int(MAX_GT_SHARE * 100)}% may")
        return self


class CriterionVerdict(Model):
    criterion: str = Field(description="criterion id")
    status: CriterionStatus
    grounded: bool
    observable: bool
    well_formed: bool
    recomputed: float | None = Field(None, description="the value recomputed from the data, when computable")
    reason: str = ""
    action: Literal["keep", "revise", "drop"]
    revision: str | None = Field(None, description="the criterion's new text when revised")


class RubricValidation(Model):
    verdicts: list[CriterionVerdict]
    criteria: list[RubricCriterion] = Field(description="kept and revised criteria")
    dimensions: list[str]
    dropped: list[str] = Field(default_factory=list, description="ids of dropped criteria")
    notes: list[str] = Field(default_factory=list, description="rubric-level changes (e.g. gt share restored)")


# --------------------------------------------------------------------------------------------- an evolution run


class EvolveBudget(Model):
    """When an evolution run stops: whichever limit is reached first."""

    steps: int = Field(3, ge=1, description="director rounds (each expands one node or composes >= 2)")
    max_depth: int = Field(3, ge=1, description="deepest node allowed (the root is depth 0)")
    max_nodes: int = Field(12, ge=1, description="nodes besides the root")
    review_rounds: int = Field(2, ge=1, description="executor -> validator rounds per node")
    max_tokens: int = Field(2_000_000, ge=1, description="prompt + completion tokens over the whole run")


class EvolveConfig(Model):
    """One evolution run's knobs (written to the run's config.json; a resumed run reads them back)."""

    budget: EvolveBudget = Field(default_factory=EvolveBudget)
    directions: int = Field(2, ge=1, le=3, description="k: directions the director may give per expansion")
    concurrency: int = Field(2, ge=1, description="independent branches executed at once")
    docs: str | None = Field(None, description="a folder of documents (.md/.txt/.pdf) for search mode")
    web_search: bool = Field(False, description="search mode may also query the web (off when offline)")
    duplicate_threshold: float = Field(0.8, gt=0, le=1, description="MiniLM cosine from which a question repeats "
                                       "a remembered one (paraphrases 0.80-0.99, unrelated 0.24-0.35)")
    script_attempts: int = Field(3, ge=1, description="script drafts per executor round")
    timeout_s: float | None = Field(None, gt=0, description="per-script sandbox timeout (seconds); None: the "
                                    "sandbox setting")


class NodeRun(Model):
    """What the evolution graph did for one node (``RUN/nodes/<id>.json``): the plan, the review and the cost."""

    node: int
    mode: Literal["deepen", "search", "decompose", "compose"]
    parents: list[int]
    question: str
    goal: GoalPackage
    retrieved: list[str] = Field(default_factory=list, description="search mode: sources of the retrieved passages")
    review: ReviewOutcome | None = None
    status: Literal["supported", "revised", "unsupported", "failed"]
    tokens: int = Field(0, ge=0)
    error: str | None = None

    @property
    def unchecked(self) -> bool:
        """The validator let the finding stand on its reproduction alone: no alternative check of it ran."""
        return self.review is not None and self.review.verdict is not None and not self.review.verdict.checked
