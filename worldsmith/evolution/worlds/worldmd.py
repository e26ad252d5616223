"""WORLD.md: the world explained from an analyst's point of view (written by the auditor).

It lists what the data room holds, the pitfalls the auditor had to reconcile, the causal structure
in words with the audit verdict per edge, and which phenomena are recoverable. It sits next to
data/, never inside it: it is a guide for task writers and reviewers, not for solvers.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from worldsmith.core.world_contract import Edge, WorldContract

if TYPE_CHECKING:
    from .artifacts import PhenomenonTruth
    from .audit import AuditReport

_MARK = {"pass": "PASS", "fail": "FAIL", "skip": "skip"}


def _unit(c: WorldContract, name: str) -> str:
    u = c.node(name).unit
    return f" {u}" if u else ""


def describe_edge(c: WorldContract, e: Edge) -> str:
    """One sentence per edge, in the target's units."""
    m: Any = e.mechanism
    t = e.target
    src = e.sources[0] if e.sources else ""
    per = f"per unit of `{src}`" if src else ""
    if m.type in ("linear", "logistic", "multiplicative") and m.levels:
        effects = ", ".join(f"{k}: {v:+g}" for k, v in sorted(m.levels.items()))
        scale = {"linear": _unit(c, t).strip() or "units", "logistic": "log-odds", "multiplicative": "log-factor"}
        text = f"`{src}` shifts `{t}` by label ({effects}; {scale[m.type]}, other labels 0)"
    elif m.type == "linear":
        text = f"`{t}` changes by {m.coef:+g}{_unit(c, t)} {per}"
    elif m.type == "logistic":
        text = f"each unit of `{src}` changes the log-odds of `{t}` by {m.coef:+g}"
    elif m.type == "multiplicative":
        text = f"each unit of `{src}` multiplies `{t}` by exp({m.coef:+g})"
    elif m.type == "threshold":
        text = f"`{t}` jumps by {m.jump:+g} when `{src}` is {m.direction} {m.threshold:g}"
    elif m.type == "saturating":
        text = f"`{src}` raises `{t}` with diminishing returns (up to {m.vmax:+g}, half at {m.half:g})"
    elif m.type == "lag":
        text = f"`{src}` {m.lag} period(s) earlier changes `{t}` by {m.coef:+g} per unit"
    elif m.type == "seasonal":
        text = f"`{t}` follows a seasonal cycle of ±{abs(m.amplitude):g} every {m.period_days:g} days"
    elif m.type == "step_event":
        text = f"`{t}` shifts by {m.jump:+g} from the event `{m.event}` ({c.event(m.event).date})"
    elif m.type == "interaction":
        text = f"`{e.sources[0]}` and `{e.sources[1]}` interact on `{t}` (coef {m.coef:+g})"
    elif m.type == "power":
        text = f"`{t}` changes by {m.coef:+g} x |`{src}` - {m.center:g}|^{m.exponent:g}"
    elif m.type == "piecewise":
        text = f"`{t}` changes per unit of `{src}` by {', '.join(f'{s:+g}' for s in m.slopes)} on the segments " \
               f"split at {', '.join(f'{k:g}' for k in m.knots)}"
    elif m.type == "binned":
        text = f"`{t}` shifts by {', '.join(f'{x:+g}' for x in m.effects)} in the bins of `{src}` from " \
               f"{', '.join(f'{k:g}' for k in m.cuts)} on (relative to the bin below {m.cuts[0]:g})"
    elif m.type == "event_percent":
        text = f"`{t}` changes by {m.percent:+g}% from the event `{m.event}` ({c.event(m.event).date})"
    elif m.type == "calendar":
        text = f"`{t}` shifts by {m.jump:+g} on each day of the calendar `{m.calendar}`"
    else:
        text = f"{e.sources} -> {t} ({m.type})"
    if e.heterogeneity:
        groups = ", ".join(f"{k} x{v:g}" for k, v in sorted(e.heterogeneity.multipliers.items()))
        text += f"; the effect differs by {' x '.join(f'`{x}`' for x in e.heterogeneity.columns)} ({groups})"
    if e.gate:
        text += f"; only while `{e.gate.variable}` is {e.gate.direction} {e.gate.threshold:g}"
    return text


def world_markdown(c: WorldContract, report: "AuditReport", truth: dict[str, "PhenomenonTruth"],
                   world_dir: Path) -> str:
    p = c.persona
    lines = [f"# {c.title}", "", f"*{c.domain.value}* world `{c.id}`. {c.description}".strip(), "",
             f"**Persona.** {p.name}, {p.role} at {p.organisation}. Goal: {p.goal}", "",
             f"**Timeline.** {c.timeline.start} to {c.timeline.end} ({c.timeline.grain}ly grain).", "",
             "## What the data room contains", ""]
    readme = world_dir / "data" / "README.md"
    if readme.exists():
        lines += readme.read_text(encoding="utf-8").splitlines()[2:]
    lines += ["", "## Pitfalls to reconcile", ""]
    lines += [f"- {x}" for x in report.reconciliation] or ["- none found"]
    if report.issues:
        lines += ["", "Unresolved:", ""] + [f"- {x}" for x in report.issues]
    if report.warnings:
        lines += ["", "Warnings:", ""] + [f"- {x}" for x in report.warnings]
    lines += ["", "## Causal structure", ""]
    verdict = {r.id: r for r in report.edges}
    for e in c.edges:
        r = verdict.get(str(e.id))
        tag = f"[{_MARK[r.status]}] " if r else ""
        lines.append(f"- {tag}{describe_edge(c, e)}." + (f" Audit: {r.reason}." if r and r.reason else ""))
    if c.confounders:
        lines += ["", "Confounders (adjust for them before reading a cause-effect slope):", ""]
        lines += [f"- `{x.variable}` drives both `{x.cause}` and `{x.effect}`. {x.note}".rstrip()
                  for x in c.confounders]
    if c.events:
        lines += ["", "Events:", ""] + [f"- {ev.date}: {ev.name} - {ev.description}" for ev in c.events]
    lines += ["", "## Phenomena", "", "| id | recoverable | canonical | from files | statement |",
              "| --- | --- | --- | --- | --- |"]
    for r in report.phenomena:
        t = truth[r.id]
        obs = f"{r.observed:.6g}" if isinstance(r.observed, float) else str(r.observed)
        val = f"{t.value:.6g}" if isinstance(t.value, float) else str(t.value)
        lines.append(f"| `{r.id}` | {'yes' if r.passed else 'no'} | {val} | {obs} | {t.statement} |")
    lines += ["", "## Invariants", ""]
    lines += [f"- [{_MARK[r.status]}] `{r.id}`: {r.reason}" for r in report.invariants] or ["- none declared"]
    if c.claims:
        said = {x.id: x.statement for x in c.claims}
        lines += ["", "## No-effect and conditional claims", ""]
        lines += [f"- [{_MARK[r.status]}] `{r.id}`" + (f" ({said[r.id]})" if said.get(r.id) else "") + f": {r.reason}"
                  for r in report.claims]
    s = report.summary
    lines += ["", "## Audit summary", "",
              f"- edges: {s['edge']['pass']} pass, {s['edge']['fail']} fail, {s['edge']['skip']} skipped",
              f"- invariants: {s['invariant']['pass']} pass, {s['invariant']['fail']} fail, "
              f"{s['invariant']['skip']} skipped",
              f"- phenomena: {s['phenomenon']['pass']} recoverable of {len(report.phenomena)}",
              *([f"- claims: {s['claim']['pass']} hold, {s['claim']['fail']} fail"] if "claim" in s else []),
              "- verdict: every declared claim holds" if report.passed else
              f"- verdict: {len(report.failures())} declared claim(s) fail", ""]
    return "\n".join(lines)
