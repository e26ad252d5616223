"""Evaluation metrics and the report: pass@1, pass@k, DABench's three accuracies, breakdowns, Markdown.

DABench (Hu et al. 2024, eval_closed_form.py) reports three accuracies:
- accuracy by question: a question is right when every sub-answer is;
- accuracy by sub-question: correct sub-answers / all sub-answers;
- proportional accuracy: mean over questions of the fraction of its sub-answers that are right.
Each is given under two denominators (core/grading.dabench_accuracies): the conservative one counts ALL
questions (an empty or failed response is wrong: `accuracy_by_question`, …), the official one leaves out
questions whose response is empty, as the official script does (`official_accuracy_by_question`, …).
With several samples each is computed per sample index and averaged (so conservative by-question accuracy = pass@1).
A report (rubric) task counts as one sub-question (right when it passes); its proportional value is its score.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from math import comb
from typing import Any

from pydantic import BaseModel, Field

from worldsmith.core.grading import Outcome, dabench_accuracies
from worldsmith.core.runs import batch_status
from worldsmith.core.schemas import utcnow

NO_CATEGORY = "(none)"
NO_LEVEL = "(unknown)"


class GuardTally(BaseModel):
    """How often one answer guard fired (agents/answer_guards.py): on how many answers, how many of those the model
    was re-asked about, and in how many trajectories it fired at least once."""

    fired: int = 0
    reasked: int = 0
    trajectories: int = 0


def tally_guards(firings: Iterable[Any]) -> dict[str, GuardTally]:
    """One trajectory's GuardFiring records → per-kind tallies."""
    out: dict[str, GuardTally] = {}
    for g in firings:
        t = out.setdefault(g.kind, GuardTally(trajectories=1))
        t.fired += 1
        t.reasked += int(g.reasked)
    return out


def _sum_tallies(tallies: Iterable[dict[str, GuardTally]]) -> dict[str, GuardTally]:
    out: dict[str, GuardTally] = {}
    for per_kind in tallies:
        for kind, t in per_kind.items():
            acc = out.setdefault(kind, GuardTally())
            acc.fired, acc.reasked, acc.trajectories = (acc.fired + t.fired, acc.reasked + t.reasked,
                                                        acc.trajectories + t.trajectories)
    return dict(sorted(out.items()))


class SampleResult(BaseModel):
    sample_index: int
    status: str
    passed: bool
    score: float = Field(ge=0, le=1)
    sub_correct: int = 0
    sub_total: int = 1
    error: str | None = None
    empty: bool = Field(False, description="the response was empty (or the solve failed): left out of the official "
                                           "denominators, wrong in the conservative ones")
    resumed: bool = False
    path: str = Field("", description="trajectory file relative to the run directory")
    time_s: float = 0.0
    guards: dict[str, GuardTally] = Field(default_factory=dict, description="answer guards that fired, by kind")
    resampled: int = Field(0, description="turns sampled again because they repeated a failed code cell")


class TaskResult(BaseModel):
    task_id: str
    kind: str
    category: str | None = None
    level: str | None = None
    samples: list[SampleResult]

    @property
    def n_correct(self) -> int:
        return sum(1 for s in self.samples if s.passed)


class Metrics(BaseModel):
    n_tasks: int
    samples: int
    pass_at_1: float
    pass_at_k: dict[int, float] = Field(description="unbiased pass@k for k = 1..samples")
    accuracy_by_question: float = Field(description="conservative: over all questions, an empty response is wrong")
    accuracy_by_sub_question: float
    proportional_accuracy: float
    official_accuracy_by_question: float = Field(0.0, description="official: questions with an empty response "
                                                                   "left out of the denominator")
    official_accuracy_by_sub_question: float = 0.0
    official_proportional_accuracy: float = 0.0
    n_empty: int = Field(0, description="samples with an empty response (solve errors included)")
    mean_score: float
    n_errors: int = Field(description="samples whose solve raised")
    n_unsupported: int = Field(0, description="samples whose answer a blocking guard left unsupported (graded wrong)")
    guards: dict[str, GuardTally] = Field(default_factory=dict, description="answer guards that fired, by kind")
    n_resampled: int = Field(0, description="turns sampled again because they repeated a failed code cell")


class EvalReport(BaseModel):
    run_dir: str = ""
    samples: int
    strict: bool | None = None
    overall: Metrics
    by_category: dict[str, Metrics] = Field(default_factory=dict)
    by_level: dict[str, Metrics] = Field(default_factory=dict)
    tasks: list[TaskResult] = Field(default_factory=list)
    n_solved_now: int = 0
    n_resumed: int = 0
    llm_faults: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per role: faults retried and calls given up on, by kind, and empty "
        "completions, during this run (llm.accounting.fault_summary).")
    elapsed_s: float = 0.0
    created_at: datetime = Field(default_factory=utcnow)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimator 1 - C(n-c, k) / C(n, k) (Chen et al. 2021); with k == n: any sample correct."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def _mean(xs: Iterable[float]) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def compute_metrics(results: list[TaskResult], samples: int) -> Metrics:
    """Metrics over the given tasks; a missing sample counts as wrong (unanswered = wrong)."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    per_sample = []
    for s in range(samples):
        picked = [_sample(r, s) for r in results]
        per_sample.append(dabench_accuracies(
            Outcome(p.sub_correct, p.sub_total, p.empty, p.score) if p else Outcome(0, 1, True, 0.0) for p in picked))

    def avg(denominator: str, key: str) -> float:
        return _mean(a[denominator][key] for a in per_sample)
    correct = [sum(1 for s in range(samples) if (p := _sample(r, s)) and p.passed) for r in results]
    return Metrics(
        n_tasks=len(results), samples=samples,
        pass_at_1=_mean(c / samples for c in correct),
        pass_at_k={k: _mean(pass_at_k(samples, c, k) for c in correct) for k in range(1, samples + 1)},
        accuracy_by_question=avg("conservative", "by_question"),
        accuracy_by_sub_question=avg("conservative", "by_sub_question"),
        proportional_accuracy=avg("conservative", "proportional"),
        official_accuracy_by_question=avg("official", "by_question"),
        official_accuracy_by_sub_question=avg("official", "by_sub_question"),
        official_proportional_accuracy=avg("official", "proportional"),
        n_empty=sum(1 for r in results for p in r.samples if p.empty),
        mean_score=_mean(p.score for r in results for s in range(samples) if (p := _sample(r, s))),
        n_errors=sum(1 for r in results for p in r.samples if p.status == "error"),
        n_unsupported=sum(1 for r in results for p in r.samples if p.status == "unsupported"),
        guards=_sum_tallies(p.guards for r in results for p in r.samples),
        n_resampled=sum(p.resampled for r in results for p in r.samples),
    )


def _sample(r: TaskResult, s: int) -> SampleResult | None:
    for p in r.samples:
        if p.sample_index == s:
            return p
    return None


def build_report(results: list[TaskResult], *, samples: int, strict: bool | None = None, run_dir: str = "",
                 elapsed_s: float = 0.0) -> EvalReport:
    cats: dict[str, list[TaskResult]] = defaultdict(list)
    levels: dict[str, list[TaskResult]] = defaultdict(list)
    for r in results:
        cats[r.category or NO_CATEGORY].append(r)
        levels[r.level or NO_LEVEL].append(r)
    level_order = {"easy": 0, "medium": 1, "hard": 2}
    ordered_levels = sorted(levels.items(), key=lambda kv: (level_order.get(kv[0], 9), kv[0]))
    return EvalReport(
        run_dir=run_dir, samples=samples, strict=strict, overall=compute_metrics(results, samples),
        by_category={k: compute_metrics(v, samples) for k, v in sorted(cats.items())},
        by_level={k: compute_metrics(v, samples) for k, v in ordered_levels},
        tasks=results,
        n_solved_now=sum(1 for r in results for p in r.samples if not p.resumed),
        n_resumed=sum(1 for r in results for p in r.samples if p.resumed),
        elapsed_s=round(elapsed_s, 3),
    )


# --------------------------------------------------------------------------------------------- Markdown


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _cell(s: object) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _metrics_table(title: str, rows: dict[str, Metrics], k: int) -> list[str]:
    head = f"| {title} | tasks | pass@1 |" + (f" pass@{k} |" if k > 1 else "") + \
        " acc. by question | acc. by sub-question | proportional | errors |"
    sep = "|" + "---|" * (head.count("|") - 1)
    out = [head, sep]
    for name, m in rows.items():
        cells = [_cell(name), str(m.n_tasks), _pct(m.pass_at_1)]
        if k > 1:
            cells.append(_pct(m.pass_at_k.get(k, 0.0)))
        cells += [_pct(m.accuracy_by_question), _pct(m.accuracy_by_sub_question), _pct(m.proportional_accuracy),
                  str(m.n_errors)]
        out.append("| " + " | ".join(cells) + " |")
    return out


def _denominators_table(rows: dict[str, Metrics]) -> list[str]:
    """The three DABench accuracies side by side: official (empty responses left out) and conservative (all)."""
    out = ["| set | tasks | empty | by question: official / conservative | by sub-question: official / conservative "
           "| proportional: official / conservative |", "|---|---|---|---|---|---|"]
    for name, m in rows.items():
        pairs = [(m.official_accuracy_by_question, m.accuracy_by_question),
                 (m.official_accuracy_by_sub_question, m.accuracy_by_sub_question),
                 (m.official_proportional_accuracy, m.proportional_accuracy)]
        cells = [_cell(name), str(m.n_tasks), str(m.n_empty)] + [f"{_pct(a)} / {_pct(b)}" for a, b in pairs]
        out.append("| " + " | ".join(cells) + " |")
    return out


def _guards_table(m: Metrics) -> list[str]:
    """Guard firings by kind (agents/answer_guards.py) and the answers left unsupported."""
    n = m.n_tasks * m.samples
    out = [f"Unsupported answers (a blocking guard still fired; graded wrong): {m.n_unsupported} of {n} trajectories.",
           "", f"Turns sampled again because they repeated a failed code cell: {m.n_resampled}.", ""]
    if not m.guards:
        return out + ["No guard fired."]
    out += ["| guard | fired (answers) | re-asked | trajectories |", "|---|---|---|---|"]
    out += [f"| {kind} | {t.fired} | {t.reasked} | {t.trajectories} |" for kind, t in m.guards.items()]
    if "setup_restored" in m.guards:  # agents/setup_guard.py judges cells, not answers
        out += ["", "setup_restored counts code cells after which the session's setup ran again (they undid it), "
                "not answers."]
    return out


def format_kinds(counts: dict[str, int], none: str = "0") -> str:
    """Per-kind counts as one phrase, e.g. 'rate_limit 1, server 3' (the report and the eval summary)."""
    return ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items())) or none


def render_report_md(report: EvalReport) -> str:
    k = report.samples
    o = report.overall
    rule = {None: "each task's own rule", True: "official DABench rule (strict)", False: "tolerant"}[report.strict]
    lines = [
        "# Evaluation report", "",
        f"- tasks: {o.n_tasks}, samples per task: {k}, grading: {rule}",
        f"- solved in this run: {report.n_solved_now}, reused from a previous run: {report.n_resumed}, "
        f"solve errors: {o.n_errors}, elapsed: {report.elapsed_s:.1f} s",
        f"- status: {batch_status(o.n_errors, o.n_tasks * k)}",
        f"- run directory: `{report.run_dir}`" if report.run_dir else "",
        "", "## Overall", "",
        *_metrics_table("set", {"all": o}, k),
    ]
    if k > 1:
        lines += ["", "pass@k: " + ", ".join(f"pass@{j} = {_pct(v)}" for j, v in sorted(o.pass_at_k.items()))]
    lines += ["", "## DABench accuracies under both denominators", "",
              "Official: as InfiAgent-DABench's eval_closed_form.py, questions whose response is empty are left out. "
              "Conservative: every question counts, an empty or failed response is wrong.", "",
              *_denominators_table({"all": o, **report.by_level})]
    lines += ["", "## By difficulty level", "", *_metrics_table("level", report.by_level, k)]
    lines += ["", "## By category", "", *_metrics_table("category", report.by_category, k)]
    lines += ["", "## Tasks", "", "| task | category | level | correct samples | mean score | status |",
              "|---|---|---|---|---|---|"]
    for r in report.tasks:
        statuses = ", ".join(sorted({p.status for p in r.samples}))
        lines.append(f"| {_cell(r.task_id)} | {_cell(r.category or '')} | {r.level or ''} | "
                     f"{r.n_correct}/{len(r.samples)} | {_mean(p.score for p in r.samples):.2f} | {statuses} |")
    lines += ["", "## Answer guards", "", *_guards_table(o)]
    if report.llm_faults:
        lines += ["", "## LLM faults", "", "| role | retried | given up | empty completions |", "|---|---|---|---|"]
        for role, f in sorted(report.llm_faults.items()):
            lines.append(f"| {_cell(role)} | {format_kinds(f.get('retried', {}))} | {format_kinds(f.get('failed', {}))} | "
                         f"{f.get('empty_completions', 0)} |")
    errors = [(r.task_id, p) for r in report.tasks for p in r.samples if p.error]
    if errors:
        lines += ["", "## Errors", ""]
        lines += [f"- `{tid}` sample {p.sample_index}: {_cell(p.error)[:300]}" for tid, p in errors]
    return "\n".join(line for line in lines if line is not None) + "\n"


class TurnRates(BaseModel):
    """How well a model keeps the action grammar, over every assistant turn of some trajectories."""

    turns: int
    grammar_valid_rate: float = Field(description="turns whose completion parsed strictly (a <code> or <answer> "
                                                  "action, nothing repaired by lenient parsing)")
    void_rate: float = Field(description="turns with no readable action at all (void turns)")


def turn_rates(trajectories: Iterable[Any]) -> TurnRates:
    """Grammar-valid and void-turn rates of `trajectories` (core.schemas.Trajectory). A turn is a model call; a
    record without calls (older, or engine-made) counts its steps, valid when not void."""
    valid = void = turns = 0
    for traj in trajectories:
        if traj.calls:
            for call in traj.calls:
                turns += 1
                void += call.action is None
                valid += call.action is not None and call.repaired is None
        else:
            for step in traj.steps:
                turns += 1
                void += step.void
                valid += not step.void
    return TurnRates(turns=turns, grammar_valid_rate=valid / turns if turns else 0.0,
                     void_rate=void / turns if turns else 0.0)
