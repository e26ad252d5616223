"""Benchmark summaries and the side-by-side table (benchmarks/dabench_dev.py, generated_bench.py, compare.py).

A summary is a small JSON object per benchmark run: what ran (benchmark, model, samples, threads), accuracy by
question (conservative: an empty answer is wrong; with several samples the mean over samples, i.e. pass@1, and
`voted_accuracy`, self-consistency at inference: the answer of the largest cluster of agreeing samples), the
per-question outcomes and times, and the guard counts found in the trajectories. It is built from an eval run
directory (results.json + trajectories/), so any past run can be summarised too.

Intervals are Wilson score intervals at 95% over questions: samples of one question are not independent draws,
so n is the number of questions and k the (possibly fractional) number answered right. Combining runs of the
same benchmark (other seeds or thread counts) gives the min-max of their accuracies and a pooled interval over
all their question-runs (k and n summed; an optimistic interval, since runs repeat the same questions).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from worldsmith.core.store import atomic_write_text

Z95 = 1.959963984540054  # two-sided 95% normal quantile


def wilson_interval(k: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for k successes out of n (k may be fractional: a mean over samples)."""
    if n <= 0:
        raise ValueError(f"a Wilson interval needs n >= 1, got n={n}")
    if not 0 <= k <= n:
        raise ValueError(f"a Wilson interval needs 0 <= k <= n, got k={k}, n={n}")
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def guard_counts(trajectories: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Guards fired, by kind, over raw trajectory records; a record without a `guards` field adds nothing.

    `guards` may be a list of records (`{"kind": ...}`), a list of kind names, or a mapping kind -> count."""
    counts: Counter[str] = Counter()
    for traj in trajectories:
        guards = traj.get("guards") or []
        if isinstance(guards, dict):
            counts.update({str(k): int(v) for k, v in guards.items()})
            continue
        for g in guards:
            counts[str(g.get("kind") or g.get("name") or "unknown") if isinstance(g, dict) else str(g)] += 1
    return dict(sorted(counts.items()))


def _trajectories(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Every trajectory record of a run, by its path relative to the run directory (as results.json names it)."""
    return {p.relative_to(run_dir).as_posix(): json.loads(p.read_text(encoding="utf-8"))
            for p in sorted((run_dir / "trajectories").rglob("*.json"))}


def _benchmark_name(run_dir: Path) -> str:
    """The tasks folder's name from the run's eval_request event (e.g. 'dabench-dev')."""
    request = _eval_request(run_dir)
    return Path(request["tasks"]).name if request and request.get("tasks") else run_dir.name


def voted_correct(records: Mapping[str, dict[str, Any]], samples: Sequence[dict[str, Any]]) -> bool:
    """Self-consistency at inference over one question's samples: the answer of the largest cluster of agreeing
    answers (training/consistency.py; ties to the earliest; with no answer at all, the first sample) is the one
    given, so the question counts as right when the sample it came from passed. `records`: the run's trajectories
    by path (a sample without one has no answer)."""
    from worldsmith.core.schemas import Trajectory
    from worldsmith.training.consistency import consistent, trajectory_answer

    answers = [trajectory_answer(Trajectory.model_validate(records[s["path"]])) if s.get("path") in records else None
               for s in samples]
    result = consistent(answers)
    chosen = result.majority_indices[0] if result.majority_indices else 0
    return bool(samples[chosen]["passed"]) if samples else False


def _eval_request(run_dir: Path) -> dict[str, Any] | None:
    """The run's last eval_request event (the tasks folder, its size and the samples asked for)."""
    from worldsmith.core.store import read_jsonl

    requests = [e for e in read_jsonl(run_dir / "events.jsonl") if e.get("event") == "eval_request"]
    return requests[-1] if requests else None


def stopped_report(run_dir: str | Path, tasks: str | Path | None = None) -> dict[str, Any]:
    """The report of an eval run that stopped before its end (killed, or still running), over the questions whose
    every sample is graded, as results.json would give it, plus "partial": {"complete", "in_run"}. `tasks`: the
    task set (default: the folder its eval_request event names)."""
    from worldsmith.training.evaluate import completed_task_results, load_tasks
    from worldsmith.training.metrics import build_report

    run_dir = Path(run_dir)
    request = _eval_request(run_dir)
    if request is None:
        raise FileNotFoundError(f"{run_dir}: no results.json and no eval_request event — not an eval run directory")
    folder = Path(tasks or request["tasks"])
    if not folder.is_dir():
        raise FileNotFoundError(f"{run_dir}: its task set {folder} is not here; a stopped run is read against its "
                                "tasks (pass the folder, e.g. compare.py --tasks DIR)")
    samples = int(request.get("samples") or 1)
    results = completed_task_results(load_tasks(folder), run_dir, samples)
    if not results:
        raise ValueError(f"{run_dir}: no question has all {samples} sample(s) graded yet")
    report = build_report(results, samples=samples, run_dir=str(run_dir)).model_dump(mode="json")
    return report | {"partial": {"complete": len(results), "in_run": int(request.get("n_tasks") or len(results))}}


def summary_from_run_dir(run_dir: str | Path, *, benchmark: str | None = None, tasks: str | Path | None = None,
                         **meta: Any) -> dict[str, Any]:
    """The summary of an eval run directory (results.json and trajectories/); of a stopped one, over its complete
    questions (:func:`stopped_report`, with "partial" set). With several samples a question is also scored by
    its first sample (greedy under eval.greedy_first), by the vote, and by any sample (pass@k)."""
    run_dir = Path(run_dir)
    path = run_dir / "results.json"
    report = (json.loads(path.read_text(encoding="utf-8")) if path.is_file()
              else stopped_report(run_dir, tasks))
    records = _trajectories(run_dir)
    questions = []
    several = report["samples"] > 1
    for t in report["tasks"]:
        samples = t["samples"]
        questions.append({"task_id": t["task_id"], "level": t.get("level"),
                          "correct": sum(s["passed"] for s in samples) / max(len(samples), 1),
                          "time_s": round(statistics.fmean(s.get("time_s", 0.0) for s in samples), 3) if samples else 0.0,
                          **({"voted": voted_correct(records, samples), "first": bool(samples[0]["passed"]),
                              "any": any(s["passed"] for s in samples)} if several else {})})
    o = report["overall"]
    times = [s.get("time_s", 0.0) for t in report["tasks"] for s in t["samples"]]
    by_level: dict[str, dict[str, float]] = {}
    for q in questions:
        lv = by_level.setdefault(q["level"] or "(unknown)", {"n": 0, "correct": 0.0})
        lv["n"] += 1
        lv["correct"] += q["correct"]
    return {"benchmark": benchmark or _benchmark_name(run_dir), **_run_meta(run_dir), **meta,
            "samples": report["samples"],
            "n_questions": o["n_tasks"], "n_correct": round(sum(q["correct"] for q in questions), 6),
            "accuracy": o["accuracy_by_question"], "accuracy_by_sub_question": o["accuracy_by_sub_question"],
            "proportional_accuracy": o["proportional_accuracy"], "n_empty": o.get("n_empty", 0),
            "n_errors": o.get("n_errors", 0), "median_s": statistics.median(times) if times else None,
            "guards": guard_counts(records.values()), "by_level": dict(sorted(by_level.items())),
            **({"n_voted_correct": sum(q["voted"] for q in questions),
                "voted_accuracy": sum(q["voted"] for q in questions) / max(len(questions), 1),
                "n_first_correct": sum(q["first"] for q in questions),
                "n_any_correct": sum(q["any"] for q in questions)} if several else {}),
            **({"partial": report["partial"]} if report.get("partial") else {}),
            "question_s": _question_seconds(report),
            "questions": questions, "run_dir": str(run_dir)}


def _run_meta(run_dir: Path) -> dict[str, Any]:
    """The model and turn limit a run directory's config.json records (what the benchmark scripts pass as meta)."""
    path = run_dir / "config.json"
    if not path.is_file():
        return {}
    try:
        from worldsmith.core.config import Settings

        settings = Settings.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except ValueError:
        return {}
    return {"model": settings.llm.for_role("agent").model, "max_turns": settings.analyst.max_turns}


def _question_seconds(report: dict[str, Any]) -> float | None:
    """Median wall time a question costs: the sum over its samples (what answering it with all of them takes)."""
    per_q = [sum(s.get("time_s", 0.0) for s in t["samples"]) for t in report["tasks"] if t["samples"]]
    return statistics.median(per_q) if per_q else None


def summarize_run(result: dict[str, Any], *, benchmark: str, **meta: Any) -> dict[str, Any]:
    """The summary of what `app.eval.evaluate_path` returned (its run directory is read back)."""
    return summary_from_run_dir(result["run_dir"], benchmark=benchmark, **meta)


def write_summary(path: str | Path, summary: dict[str, Any]) -> Path:
    return atomic_write_text(path, json.dumps(summary, indent=1) + "\n")


def load_summary(path: str | Path, tasks: str | Path | None = None) -> dict[str, Any]:
    """A summary JSON file, or an eval run directory summarised on the fly (a stopped one over its complete
    questions, read against `tasks` or the task set it names)."""
    path = Path(path)
    if path.is_dir():
        return summary_from_run_dir(path, tasks=tasks)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: neither a summary JSON file nor an eval run directory")
    data = json.loads(path.read_text(encoding="utf-8"))
    missing = [k for k in ("benchmark", "n_questions", "n_correct", "samples") if k not in data]
    if missing:
        raise ValueError(f"{path}: not a benchmark summary (missing {', '.join(missing)})")
    return data


def combine(summaries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Runs of one benchmark pooled: accuracy min-max over runs and a Wilson interval over all question-runs."""
    if not summaries:
        raise ValueError("combine needs at least one summary")
    names = sorted({s["benchmark"] for s in summaries})
    if len(names) > 1:
        raise ValueError(f"runs of different benchmarks cannot be pooled: {', '.join(names)}")
    k = sum(s["n_correct"] for s in summaries)
    n = sum(s["n_questions"] for s in summaries)
    accs = [s["n_correct"] / s["n_questions"] for s in summaries]
    # a question record's time_s is the mean over its samples; what the question cost is that times the samples
    times = [q["time_s"] * s["samples"] for s in summaries for q in s.get("questions", [])]
    guards: Counter[str] = Counter()
    for s in summaries:
        guards.update(s.get("guards") or {})
    recorded = any(s.get("guards") is not None for s in summaries)
    lo, hi = wilson_interval(k, n)
    return {"benchmark": names[0], "runs": len(summaries), "samples": sorted({s["samples"] for s in summaries}),
            "n_questions": sorted({s["n_questions"] for s in summaries}), "k": k, "n": n, "accuracy": k / n,
            "ci95": (lo, hi), "min": min(accs), "max": max(accs),
            "median_s": statistics.median(times) if times else None,
            "guards": dict(sorted(guards.items())) if recorded else None,
            "partial": any(s.get("partial") for s in summaries)}


# --------------------------------------------------------------------------------------------- paired


def first_outcomes(summary: Mapping[str, Any]) -> dict[str, bool]:
    """Question id → solved, by its first sample when a run has several (greedy under eval.greedy_first): the
    binary outcome a paired test needs."""
    return {q["task_id"]: bool(q["first"]) if "first" in q else q["correct"] >= 1.0 for q in summary["questions"]}


def mcnemar_exact(gained: int, lost: int) -> float:
    """Two-sided exact McNemar test: under "no change" each discordant question (solved by one run only) is a fair
    coin, so the p-value is the binomial test of `gained` out of `gained + lost` at 0.5; 1.0 with no discordant
    question."""
    from scipy.stats import binomtest

    n = gained + lost
    return 1.0 if n == 0 else float(binomtest(gained, n, 0.5).pvalue)


def paired_comparison(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """Before and after on the questions both runs graded: solved counts, the questions gained and lost, the exact
    McNemar p-value over those discordant questions, and Wilson intervals for reference. Paired: the same
    questions, so what differs between the runs is the model, not the draw of questions — a gain of 2 on 30
    with none lost is less likely under chance than two overlapping intervals make it look."""
    a, b = first_outcomes(before), first_outcomes(after)
    common = [t for t in a if t in b]
    if not common:
        raise ValueError("the two runs share no question: compare evals of the same task set")
    gained = [t for t in common if b[t] and not a[t]]
    lost = [t for t in common if a[t] and not b[t]]
    k_a, k_b, n = sum(a[t] for t in common), sum(b[t] for t in common), len(common)
    return {"n": n, "before": k_a, "after": k_b, "gained": gained, "lost": lost,
            "p_value": mcnemar_exact(len(gained), len(lost)),
            "before_ci95": wilson_interval(k_a, n), "after_ci95": wilson_interval(k_b, n),
            "only_before": [t for t in a if t not in b], "only_after": [t for t in b if t not in a],
            "before_run": {k: before.get(k) for k in ("benchmark", "model", "run_dir")},
            "after_run": {k: after.get(k) for k in ("benchmark", "model", "run_dir")}}


def paired_text(p: Mapping[str, Any], *, alpha: float = 0.05) -> str:
    """The comparison in a few lines: counts with intervals, the gained and lost questions, the test's verdict."""
    def ids(xs: Sequence[str]) -> str:
        return ", ".join(xs[:8]) + (f" … ({len(xs)})" if len(xs) > 8 else "") if xs else "none"

    def side(label: str, k: int, ci: Sequence[float], run: Mapping[str, Any]) -> str:
        model = f" ({run['model']})" if run.get("model") else ""
        return f"{label}: {k}/{p['n']} {_pct(k / p['n'])} [95% {_pct(ci[0])}–{_pct(ci[1])}]{model}"

    discordant = len(p["gained"]) + len(p["lost"])
    verdict = ("a change beyond chance" if p["p_value"] < alpha else "not beyond chance") + f" at {alpha:.0%}"
    lines = [side("before", p["before"], p["before_ci95"], p["before_run"]),
             side("after ", p["after"], p["after_ci95"], p["after_run"]),
             f"gained {len(p['gained'])}: {ids(p['gained'])}", f"lost {len(p['lost'])}: {ids(p['lost'])}",
             f"exact McNemar test over the {discordant} question(s) only one run solved: p = {p['p_value']:.3g}, "
             f"{verdict}"]
    if p["only_before"] or p["only_after"]:
        lines.append(f"left out (graded in one run only): {len(p['only_before'])} before, {len(p['only_after'])} "
                     "after")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- strata


def files_needed(task: Mapping[str, Any]) -> int:
    """How many data files a generated task's answers need: the files its answer specs name for the measure, the
    x variable and every other column (0 when it has no specs)."""
    files: set[str] = set()
    for answer in task.get("answers") or []:
        spec = answer.get("spec") or {}
        for part in (spec.get("measure"), spec.get("x")):
            files.update((part or {}).get("files") or [])
        for where in (spec.get("other_columns") or {}).values():
            files.update(where or [])
    return len(files)


#: the strata's option names (generated_bench.py --files) → their labels in summaries and tables
FILE_STRATA = {"one": "one file", "several": "several files"}


def file_strata(tasks_jsonl: str | Path) -> dict[str, str]:
    """Task id → "one file" or "several files" (what its answers need), for the tasks of a JSONL task set."""
    out = {}
    for line in Path(tasks_jsonl).read_text(encoding="utf-8").splitlines():
        if line.strip():
            task = json.loads(line)
            out[task["id"]] = FILE_STRATA["one"] if files_needed(task) <= 1 else FILE_STRATA["several"]
    return out


def stratum(summary: Mapping[str, Any], strata: Mapping[str, str], label: str) -> dict[str, Any] | None:
    """The part of a summary whose questions fall in `label` (None when none does), as a summary of its own
    benchmark "<benchmark> (<label>)"; per-question guards are not recorded, so a stratum has none."""
    qs = [q for q in summary.get("questions", []) if strata.get(q["task_id"]) == label]
    if not qs:
        return None
    return {"benchmark": f"{summary['benchmark']} ({label})", "samples": summary["samples"], "n_questions": len(qs),
            "n_correct": sum(q["correct"] for q in qs), "questions": qs, "guards": None}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _row(c: dict[str, Any]) -> str:
    spread = f"{_pct(c['min'])}–{_pct(c['max'])}" if c["runs"] > 1 else "—"
    guards = "—" if c["guards"] is None else ", ".join(f"{k} {v}" for k, v in c["guards"].items()) or "0"
    med = f"{c['median_s']:.1f}" if c["median_s"] is not None else "—"
    nq = "/".join(map(str, c["n_questions"])) + (" (run stopped)" if c.get("partial") else "")
    samples = "/".join(map(str, c["samples"]))
    return (f"| {c['benchmark']} | {c['runs']} | {samples} | {nq} | {_pct(c['accuracy'])} "
            f"| {_pct(c['ci95'][0])}–{_pct(c['ci95'][1])} | {spread} | {med} | {guards} |")


def compare_table(groups: Sequence[Sequence[dict[str, Any]]], strata: Mapping[str, str] | None = None) -> str:
    """Markdown: one row per benchmark (its runs pooled), then the gap between the first two benchmarks. With
    `strata` (task id → label, e.g. :func:`file_strata`), each benchmark whose questions have labels also gets a
    row per label, and the first benchmark's gap to each such row is given."""
    combined = [combine(g) for g in groups]
    parts = []
    for g in groups if strata else []:
        labels = sorted({strata[q["task_id"]] for s in g for q in s.get("questions", []) if q["task_id"] in strata})
        if len(labels) < 2:  # a run of one stratum only (generated_bench.py --files) is already that row
            continue
        for label in labels:
            parts.append(combine([p for s in g if (p := stratum(s, strata, label)) is not None]))
    header = ("| benchmark | runs | samples | questions | accuracy | 95% CI (Wilson) | min–max over runs "
              "| median s/question | guards |")
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    lines += [_row(c) for c in combined]
    if len(combined) >= 2:
        a, b = combined[0], combined[1]
        gap = 100 * (a["accuracy"] - b["accuracy"])
        lines += ["", f"Gap {a['benchmark']} − {b['benchmark']}: {gap:+.1f} points (pooled accuracies)."]
    if any(n > 1 for c in combined for n in c["samples"]):
        lines += ["", "With several samples a question, accuracy is pass@1 (the mean over its samples) and the time "
                      "is all its samples'; the vote and pass@k: `compare.py RUN_DIR --detail`."]
    if parts:
        lines += ["", "By the files a question's answer needs:", "", header, lines[1]] + [_row(c) for c in parts]
        lines += [""] + [f"Gap {combined[0]['benchmark']} − {c['benchmark']}: "
                         f"{100 * (combined[0]['accuracy'] - c['accuracy']):+.1f} points." for c in parts]
    return "\n".join(lines)


def print_summary(s: dict[str, Any]) -> None:
    lo, hi = wilson_interval(s["n_correct"], s["n_questions"])
    if s.get("partial"):
        print(f"run stopped: {s['partial']['complete']} of its {s['partial']['in_run']} questions have every "
              "sample graded; the figures below are over those")
    print(f"workload: {s['n_questions']} {s['benchmark']} questions × {s['samples']} sample(s), "
          f"model {s.get('model', '?')}, {s.get('max_turns', '?')} turns max, threads {s.get('threads') or 'all'}")
    print(f"accuracy by question {_pct(s['accuracy'])} (95% Wilson {_pct(lo)}–{_pct(hi)}), "
          f"by sub-question {_pct(s['accuracy_by_sub_question'])}, proportional {_pct(s['proportional_accuracy'])}; "
          f"{s['n_empty']} empty, {s['n_errors']} errors")
    for level, m in s["by_level"].items():
        print(f"  {level:<9} {m['correct']:.1f}/{m['n']} right")
    if s.get("voted_accuracy") is not None:
        lo, hi = wilson_interval(s["n_voted_correct"], s["n_questions"])
        print(f"self-consistency over the {s['samples']} samples (the largest cluster of agreeing answers): "
              f"{s['n_voted_correct']}/{s['n_questions']} = {_pct(s['voted_accuracy'])} (95% Wilson {_pct(lo)}–{_pct(hi)})")
        if s.get("n_first_correct") is not None:
            print(f"first sample alone: {s['n_first_correct']}/{s['n_questions']}; any of the {s['samples']} "
                  f"(pass@{s['samples']}): {s['n_any_correct']}/{s['n_questions']}")
    if s.get("median_s") is not None:
        print(f"time per sample: median {s['median_s']:.1f} s"
              + (f"; per question (all samples): median {s['question_s']:.1f} s" if s.get("question_s") else ""))
    print("guards: " + (", ".join(f"{k} {v}" for k, v in s["guards"].items()) or "none recorded"))
    print(f"run: {s['run_dir']}")
