"""Shared contracts (DESIGN.md, "Key contracts").

Every artifact that crosses a module boundary or touches disk is one of these models. They are read back
through the same model, so a field added here is a field every pipeline agrees on.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from worldsmith.core.answer_spec import AnswerFacets
from worldsmith.core.grading import tolerant
from worldsmith.core.rubric_grading import net_score

SCHEMA_VERSION = "1"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Model(BaseModel):
    """Base for contracts: unknown fields are an error, so a typo never silently drops data."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# --------------------------------------------------------------------------------------------- answers


class Tolerance(Model):
    """Numeric tolerance: a value passes if it is within `abs` OR within `rel` (relative) of the expected one."""

    abs: float | None = Field(None, ge=0, description="absolute tolerance, same unit as the value")
    rel: float | None = Field(None, ge=0, description="relative tolerance as a fraction (0.03 = 3%)")

    def accepts(self, expected: float, got: float) -> bool:
        return tolerant(self.abs, self.rel).numbers(expected, got)


class AnswerSpec(Model):
    """One closed-form sub-answer, written by a solver as `@name[value]`."""

    name: str = Field(pattern=r"^\w+$")
    value: float | int | str | bool
    tolerance: Tolerance | None = None
    unit: str | None = None
    description: str | None = None
    spec: AnswerFacets | None = Field(None, description="every facet of the quantity (core/answer_spec.py)")


class DeliverableSpec(Model):
    format: Literal["answer_tags", "json", "markdown", "xlsx"] = "answer_tags"
    description: str = ""
    answer_names: list[str] = Field(default_factory=list, description="names expected as @name[value]")
    filename: str | None = Field(None, description="file the solver must write for json/markdown/xlsx deliverables")


# --------------------------------------------------------------------------------------------- rubric

RubricSection = Literal["computation", "insight", "method", "presentation"]


class Criterion(Model):
    """An atomic, checkable rubric item (DESIGN.md, Rubric)."""

    id: str
    section: RubricSection
    polarity: Literal["+", "-"] = "+"
    type: Literal["filter", "preference"] = "preference"
    observable: str = Field(description="what to look for in the deliverable")
    satisfy: str = Field(description="what counts as meeting the item (for '-' items: committing the error)")
    violate: str = Field("", description="what counts as not meeting it")
    expected_value: float | str | None = None
    tolerance: Tolerance | None = None
    unit: str | None = Field(None, description="unit of expected_value, read by core.grading.tolerant")
    names: list[str] = Field(default_factory=list, description="data files the deliverable must name (by name or "
                             "stem); checked without a judge (core.rubric_grading.check_names)")
    source: Literal["gt", "generated"] = "generated"
    confidence: float = Field(1.0, ge=0, le=1)
    weight: float = Field(1.0, gt=0)

    @property
    def deterministic(self) -> bool:
        """Items with a numeric expected value, or with `names`, can be graded without an LLM."""
        return bool(self.names) or (isinstance(self.expected_value, (int, float))
                                    and not isinstance(self.expected_value, bool))


class Rubric(Model):
    criteria: list[Criterion] = Field(default_factory=list)
    notes: str = ""

    @model_validator(mode="after")
    def _unique_ids(self) -> Rubric:
        seen: set[str] = set()
        for c in self.criteria:
            if c.id in seen:
                raise ValueError(f"duplicate criterion id {c.id!r}")
            seen.add(c.id)
        return self

    def section(self, name: RubricSection) -> list[Criterion]:
        return [c for c in self.criteria if c.section == name]

    def score(self, met: dict[str, bool]) -> float:
        """Net points normalised to [0, 1].

        `met[id]` is True when a positive item is satisfied or a negative item's error is committed.
        Unlisted valid insights get no credit and no penalty: only listed items count.
        """
        return net_score([c.model_dump() for c in self.criteria], met)


# --------------------------------------------------------------------------------------------- tasks


class WorkspaceFile(Model):
    path: str = Field(description="path relative to the workspace root, '/'-separated")
    sha256: str
    size: int = Field(ge=0)


class WorkspaceRef(Model):
    """The initial workspace a solver starts from: files plus one content hash over them."""

    files: list[WorkspaceFile] = Field(default_factory=list)
    content_hash: str = ""
    root: str | None = Field(None, description="where the files live when the task is not packaged (read in place)")


class Provenance(Model):
    source: Literal["world", "evolution", "taxonomy", "benchmark", "manual"]
    world_id: str | None = None
    evolution_path: list[str] = Field(default_factory=list)
    category: str | None = None
    composition_chain: list[str] = Field(default_factory=list)
    benchmark: str | None = None
    original_id: str | None = None
    produced_by: list[str] = Field(default_factory=list, description="e.g. 'llm:qwen2.5-coder-1.5b', 'template:x', 'engine'")


class Difficulty(Model):
    level: Literal["easy", "medium", "hard"] | None = None
    evolution_depth: int | None = None
    pass_rate: float | None = Field(None, ge=0, le=1)
    n_attempts: int = 0


class Task(Model):
    schema_version: str = SCHEMA_VERSION
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    kind: Literal["closed_form", "report"]
    instruction: str = Field(min_length=1)
    workspace: WorkspaceRef = Field(default_factory=WorkspaceRef)
    deliverable: DeliverableSpec = Field(default_factory=DeliverableSpec)
    answers: list[AnswerSpec] = Field(default_factory=list)
    rubric: Rubric | None = None
    provenance: Provenance
    difficulty: Difficulty = Field(default_factory=Difficulty)
    category: str | None = None
    split: Literal["train", "test", "dev"] | None = None
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _kind_consistent(self) -> Task:
        if self.kind == "closed_form" and not self.answers:
            raise ValueError(f"task {self.id}: a closed_form task needs at least one answer")
        if self.kind == "report" and (self.rubric is None or not self.rubric.criteria):
            raise ValueError(f"task {self.id}: a report task needs a rubric with at least one criterion")
        names = [a.name for a in self.answers]
        if len(names) != len(set(names)):
            raise ValueError(f"task {self.id}: duplicate answer names {names}")
        return self

    def public_view(self) -> dict[str, Any]:
        """What a solver may see: never answers, rubric or generation artifacts."""
        return {"id": self.id, "instruction": self.instruction, "deliverable": self.deliverable.model_dump(),
                "files": [f.path for f in self.workspace.files]}


# --------------------------------------------------------------------------------------------- trajectories


class Action(Model):
    kind: Literal["code", "answer"]
    content: str


class ExecSummary(Model):
    duration_s: float = 0.0
    ok: bool = True
    error_type: str | None = None
    timed_out: bool = False
    truncated: bool = False
    files_changed: list[str] = Field(default_factory=list)


class Step(Model):
    index: int = Field(ge=0)
    raw: str = Field("", description="the assistant turn exactly as the model produced it")
    thought: str = ""
    action: Action | None = None
    observation: str | None = Field(None, description="interpreter output shown to the model (without wrapper tags)")
    void: bool = False
    void_reason: str | None = None
    execution: ExecSummary | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    call: int | None = Field(None, ge=0, description="index of the model call that produced it in Trajectory.calls")

    @model_validator(mode="after")
    def _void_has_no_action(self) -> Step:
        if self.void and self.action is not None:
            raise ValueError("a void step cannot carry an action")
        return self


ChatRole = Literal["system", "user", "assistant"]


class RecordedMessage(Model):
    """One message of a model call exactly as the provider received it, plus what training needs to know."""

    role: ChatRole
    content: str
    trainable: bool = Field(False, description="True only for a valid assistant turn the model produced in this "
                                               "trajectory and no answer guard sent back; prompts, worked examples, "
                                               "feedback and observations never train")
    source: str = Field("", description="what wrote it: system, example, task, interpreter, feedback, nudge, model, "
                                        "model_void, history (earlier questions of a chat thread), guard:<kind> "
                                        "(an answer guard's re-ask)")


class ModelCall(Model):
    """One model call of a trajectory: the training record (messages as sent, sampling, raw completion)."""

    index: int = Field(ge=0)
    messages: list[RecordedMessage] = Field(description="the request's messages, byte-identical to what was sent")
    templates: dict[str, str] = Field(default_factory=dict,
                                      description="prompt template id -> 'sha256:<hex>' of the files that built them")
    completion: str = Field("", description="the completion text exactly as the provider returned it")
    reply: str = Field("", description="the assistant message this call adds to the conversation (the canonical "
                                       "rendering of the parsed turn; the closed raw text for a void turn)")
    action: Action | None = None
    void_reason: str | None = None
    repaired: str | None = Field(None, description="what lenient parsing fixed to read the completion (its strict "
                                                   "parse error); None when the completion was well-formed")
    dropped: str | None = Field(None, description="why this completion never entered the conversation (the turn was "
                                                  "sampled again from the same messages); None for kept completions")
    sampling: dict[str, Any] = Field(default_factory=dict, description="max_tokens, temperature, top_p, seed, stop")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str = ""
    cached: bool = False
    model: str = ""
    provider: str = ""


class PostProcess(Model):
    """A change made to the model's answer after the fact, recorded beside it (never a silent rewrite)."""

    kind: Literal["round_decimals", "strip_placeholder"]
    before: str
    after: str
    reason: str = ""


GuardKind = Literal["no_evidence", "example_copy", "names", "self_correlation", "out_of_range", "unshown",
                    "report_sources", "setup_restored"]
#: guards that, still firing on the final answer, make it unsupported (graded wrong, never a teacher trajectory)
BLOCKING_GUARDS: frozenset[str] = frozenset({"no_evidence", "example_copy"})
#: guards that, still firing on the final answer, leave it no training credit: the blocking ones, and `unshown` (a
#: number or name no output showed). Inference keeps an unshown answer and lets the grade decide; training must not
#: reward (RL) or imitate (SFT) a right guess — the 0.5B student named dabench-252's country from the prompt's sample
#: rows and passed
UNPAID_GUARDS: frozenset[str] = BLOCKING_GUARDS | {"unshown"}


class GuardFiring(Model):
    """A guard on a final answer that fired (agents/answer_guards.py). `reasked`: the model was told so in a user
    message recorded with source `guard:<kind>`; otherwise the answer was kept (the guard's one re-ask was spent or
    the turn limit left none), and a blocking kind (no_evidence, example_copy) made the trajectory `unsupported`.
    One kind judges a code cell, not an answer: `setup_restored` (agents/setup_guard.py), the session's setup run
    again after a cell undid it; `step` is that cell's, and the model was told in its observation."""

    kind: GuardKind
    step: int = Field(ge=0, description="index of the answer step it judged (Step.index)")
    detail: str = Field(description="what fired, as the feedback told the model")
    reasked: bool


class Grade(Model):
    grader: Literal["closed_form", "rubric", "consistency", "judge", "reward"]
    score: float = Field(ge=0, le=1)
    passed: bool
    details: list[dict[str, Any]] = Field(default_factory=list)
    note: str = ""


def _old_deliverables(v: object) -> object:
    """Records older than the texts kept a list of names, always empty: nothing was read."""
    return {} if isinstance(v, list) and not v else v


class Trajectory(Model):
    schema_version: str = SCHEMA_VERSION
    id: str
    task_id: str
    model: str
    provider: str = ""
    label: Literal["sampled", "oracle", "reference", "chat"] = "sampled"
    sample_index: int = 0
    system_prompt: str = ""
    user_prompt: str = ""
    steps: list[Step] = Field(default_factory=list)
    calls: list[ModelCall] = Field(default_factory=list, description="every model call, in order")
    final_answer: str | None = Field(None, description="the model's own final answer")
    postprocess: list[PostProcess] = Field(default_factory=list)
    graded_answer: str | None = Field(None, description="what the grader sees: final_answer after `postprocess` "
                                                        "(None in records older than this field: grade final_answer)")
    deliverables: Annotated[dict[str, str], BeforeValidator(_old_deliverables)] = Field(
        default_factory=dict, description="report tasks: the text files and workbooks the solver left in its "
                                          "workspace, as the report verifier reads them; graded with the answer")
    status: Literal["answered", "unsupported", "max_turns", "context_full", "error", "running"] = Field(
        "running", description="unsupported: answered, but a blocking guard still fired on the final answer (no "
                               "successful cell touched the data, or it copies the worked example); graded wrong, "
                               "never trains. context_full: the conversation outgrew the model's context before "
                               "an answer (`error` says by how much)")
    error: str | None = None
    guards: list[GuardFiring] = Field(default_factory=list, description="every guard that fired, in order")
    grades: list[Grade] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    time_s: float = 0.0
    started_at: datetime = Field(default_factory=utcnow)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def has_void_turn(self) -> bool:
        return any(s.void for s in self.steps)

    @property
    def answer_to_grade(self) -> str | None:
        """The answer a grader scores: the post-processed one when post-processing ran, else the model's own."""
        return self.graded_answer if self.graded_answer is not None else self.final_answer

    def messages(self) -> list[RecordedMessage]:
        """The whole conversation as the model saw and wrote it: the last call's messages plus its reply.
        Empty for trajectories without recorded calls (older records, engine-made oracle runs)."""
        if not self.calls:
            return []
        last = self.calls[-1]
        reply = RecordedMessage(role="assistant", content=last.reply or last.completion,
                                trainable=last.action is not None, source="model" if last.action else "model_void")
        return [*last.messages, reply]


# --------------------------------------------------------------------------------------------- evolution


class Finding(Model):
    """A verified (or refuted) statement about a workspace, produced by executor + validator."""

    id: str
    node_id: str
    statement: str
    evidence: str = Field("", description="numbers and the code path that produced them")
    script: str | None = Field(None, description="workspace-relative path of the script that reproduces it")
    status: Literal["supported", "revised", "unsupported", "pending"] = "pending"
    confidence: float = Field(0.5, ge=0, le=1)
    depends_on: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    created_at: datetime = Field(default_factory=utcnow)

    @field_validator("statement")
    @classmethod
    def _nonempty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("a finding needs a non-empty statement")
        return v


class TaskIndexEntry(Model):
    """One line of a collection's index.jsonl."""

    id: str
    kind: Literal["closed_form", "report"]
    split: Literal["train", "test", "dev"] | None = None
    category: str | None = None
    level: Literal["easy", "medium", "hard"] | None = None
    source: str
    group: str | None = Field(None, description="split unit: world id or workspace root; tasks of one group share a split")
    path: str = Field(description="package directory relative to the collection root")
    content_hash: str
