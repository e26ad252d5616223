"""Generated benchmark (generated-v4): closed-form world tasks the analyst was never tuned on, frozen in the repo.

Every question is a world task with a complete answer spec (issue 10), written by the project itself from a fixed
seed list: one template world per (domain, seed, rows) in SEED_LIST, built by the engine, audited, and given
tasks with template requests (no LLM anywhere, so the build is deterministic). Up to PER_WORLD closed-form
tasks per world are kept, distinct kinds of quantity first, and ordered round robin over the worlds (so
`--limit 11` asks one question of every world). The frozen set lives in benchmarks/data/generated-v4/:

    tasks.jsonl     one Task per line (instruction, answers with their specs); workspace root = worlds/<world_id>
    manifest.json   the seed list and, per question: seed, template, task id, level, question, expected answers,
                    answer spec
    worlds/<id>/data/   the observed files the questions are asked about (shared by the world's questions)
    SHA256SUMS      every file above with its hash: two builds are identical when these are

    python benchmarks/generated_bench.py --build [--out-dir DIR]     # rebuild (byte-identical to the repo's)
    python benchmarks/generated_bench.py [--model qwen2.5-coder-1.5b] [--limit N] [--samples 1] [--threads N]
                                         [--max-turns 6] [--out summary.json] [--resume RUN_DIR] [--cache]
                                         [--files one|several]   # the questions that need one data file, or several
                                         [--ids ID,ID…|@FILE]    # only these questions (a subset to compare a change on)

Running it is the same as benchmarks/dabench_dev.py (same options, same eval harness and grader,
core/grading.py through the tasks' answer specs); --out writes the summary that benchmarks/compare.py reads.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout: import this checkout's worldsmith
    sys.path.insert(0, str(ROOT))

from worldsmith.core.schemas import Task
from worldsmith.core.store import sha256_file

#: v2 (2026-12-05): a comparison whose group labels are the letters A and B names its sides X and Y (v1 asked
#: "A minus B, where A = carrier B"); the other 42 questions and every data file are v1's, byte for byte.
#: v1 stays in benchmarks/data/generated-v1 for comparison (`--data benchmarks/data/generated-v1`)
#: v3 (2026-12-07): each answer line's example value ("e.g. 12.35") lies more than three tolerances from the true
#: value (`core.answer_spec.with_example`); in v2, copying engagement_performance_corr's "e.g. 0.43" passed (true
#: 0.4236, ±0.04). Questions, answers and data files are otherwise v2's; v2 stays in benchmarks/data/generated-v2
#: v4 (2026-12-07): the population names the kind of row in words ("the shipment records, one row per
#: `shipment_id`"), not in backticks ("the `shipments` records" read as a table name, and a file's table may be
#: named otherwise: customer_pricing's sqlite table is `billing`). Everything else is v3's; v3 stays beside it
NAME = "generated-v4"
DATA = ROOT / "benchmarks" / "data" / NAME
#: (domain, seed, canonical rows): one template world each; never edit in place — a new list is a new version
SEED_LIST: tuple[tuple[str, int, int], ...] = (
    ("finance", 1101, 300),
    ("customer_pricing", 1102, 300),
    ("commercial_growth", 1103, 300),
    ("operations_supply_chain", 1104, 300),
    ("people", 1105, 300),
    ("clinical", 1106, 200),
    ("epidemiology", 1107, 200),
    ("energy_iot", 1108, 300),
    ("education", 1109, 300),
    ("transportation", 1110, 300),
    ("environment_geospatial", 1111, 200),
)
PER_WORLD = 4
MAX_TASKS = 12  # tasks written per world before the closed-form selection


def _select(tasks: list[Task], per_world: int) -> list[Task]:
    """Closed-form tasks, one per kind of quantity first (mean, share, slope, ...), in the collection's order."""
    closed = [t for t in tasks if t.kind == "closed_form" and t.answers and all(a.spec for a in t.answers)]
    picked: list[Task] = []
    seen: set[str] = set()
    for t in closed:
        kind = t.answers[0].spec.quantity
        if kind not in seen and len(picked) < per_world:
            picked.append(t)
            seen.add(kind)
    picked += [t for t in closed if t not in picked][: per_world - len(picked)]
    return [t for t in closed if t in picked]


async def _world_tasks(domain: str, seed: int, rows: int, scratch: Path) -> tuple[str, list[Task], Path]:
    """(template id, its tasks, the built world's folder): `worldsmith world new --tasks` without an LLM."""
    from worldsmith.app.runtime import make_runtime
    from worldsmith.app.world import build_world_run
    from worldsmith.core.config import load_settings
    from worldsmith.core.taskpkg import TaskCollection

    settings = load_settings(overrides={"runs_dir": str(scratch / "runs"), "llm": {"cache": False}})
    rt = make_runtime(settings)
    out = scratch / f"{domain}-{seed}"
    request = {"domain": domain, "topic": None, "seed": seed, "rows": rows, "out_dir": str(out),
               "contract_source": "template", "overwrite": True, "make_tasks": True, "max_tasks": MAX_TASKS,
               "use_llm": False}
    _run, final = await build_world_run(rt, request)
    if not final.get("world", {}).get("world_id"):
        raise RuntimeError(f"{domain} seed {seed}: the world was not built ({final.get('contract_errors')})")
    return final["template_id"], TaskCollection(out / "tasks").tasks(), out


def _freeze(task: Task) -> Task:
    root = f"worlds/{task.provenance.world_id}"  # the world id with its seed: one folder per (template, seed)
    return task.model_copy(update={"workspace": task.workspace.model_copy(update={"root": root}),
                                   "split": "test"})


def _manifest_row(task: Task, domain: str, seed: int, template: str) -> dict[str, Any]:
    return {"task_id": task.id, "domain": domain, "template": template, "seed": seed,
            "world_id": task.provenance.world_id, "level": task.difficulty.level,
            "quantity": task.answers[0].spec.quantity, "question": task.instruction,
            "expected": {a.name: a.value for a in task.answers},
            "tolerance": {a.name: a.tolerance.model_dump(exclude_none=True) if a.tolerance else None
                          for a in task.answers},
            "answer_specs": [a.spec.model_dump(mode="json") for a in task.answers],
            "files": [f.path for f in task.workspace.files]}


def build(out_dir: Path = DATA, seed_list: tuple[tuple[str, int, int], ...] = SEED_LIST,
          per_world: int = PER_WORLD) -> Path:
    """Build the frozen benchmark into out_dir (replaced as a whole, atomically); returns out_dir."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="genbench-") as tmp:
        scratch, stage = Path(tmp) / "scratch", Path(tmp) / "stage"
        per_seed: list[list[tuple[Task, dict[str, Any]]]] = []
        for domain, seed, rows in seed_list:
            template, tasks, world_dir = asyncio.run(_world_tasks(domain, seed, rows, scratch))
            chosen = _select(tasks, per_world)
            if not chosen:
                raise RuntimeError(f"{domain} seed {seed}: no closed-form task with a complete answer spec")
            for f in sorted({f.path for t in chosen for f in t.workspace.files}):
                target = stage / "worlds" / chosen[0].provenance.world_id / f
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(world_dir / f, target)
            per_seed.append([(_freeze(t), _manifest_row(t, domain, seed, template)) for t in chosen])
        # round robin over the worlds (each one's first question, then each one's second, ...): `--limit N`
        # then samples N worlds, not the first world's questions
        ordered = [world[rank] for rank in range(per_world) for world in per_seed if rank < len(world)]
        frozen = [t for t, _ in ordered]
        manifest = [row for _, row in ordered]
        stage.mkdir(parents=True, exist_ok=True)
        (stage / "tasks.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in frozen), encoding="utf-8")
        body = {"name": NAME, "seed_list": [list(s) for s in seed_list], "per_world": per_world,
                "n_questions": len(manifest), "questions": manifest}
        (stage / "manifest.json").write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        files = sorted(p for p in stage.rglob("*") if p.is_file())
        sums = "".join(f"{sha256_file(p)}  {p.relative_to(stage).as_posix()}\n" for p in files)
        (stage / "SHA256SUMS").write_text(sums, encoding="utf-8")
        _replace_dir(stage, out_dir)
    return out_dir


def _replace_dir(src: Path, dest: Path) -> None:
    """Move src into dest's place; the old dest stays until the new one is complete."""
    tmp = dest.parent / f".{dest.name}.new"
    old = dest.parent / f".{dest.name}.old"
    for p in (tmp, old):
        if p.exists():
            shutil.rmtree(p)
    shutil.copytree(src, tmp)
    if dest.exists():
        dest.rename(old)
    tmp.rename(dest)
    if old.exists():
        shutil.rmtree(old)


def stratum_ids(data: Path, files: str | None) -> list[str] | None:
    """The ids of the set's questions whose answers need one data file ("one") or several ("several"), in the
    set's order; None (every question) without `files`."""
    if files is None:
        return None
    from worldsmith.training.bench_summary import FILE_STRATA, file_strata

    return [tid for tid, s in file_strata(data / "tasks.jsonl").items() if s == FILE_STRATA[files]]


async def run_bench(rt: Any, data: Path = DATA, *, limit: int | None = None, samples: int = 1,
                    run_path: Path | None = None, progress: Any = None, files: str | None = None,
                    only: list[str] | None = None, **meta: Any) -> dict[str, Any]:
    """Evaluate the analyst of runtime `rt` on the frozen set (the eval harness, graded by core/grading.py
    through each answer's spec), or on its questions of one stratum (`files`: "one" or "several" data files),
    or on the questions `only` lists (a subset to compare a change on: its figure is not the set's);
    returns the benchmark summary (training/bench_summary.py)."""
    from worldsmith.app.eval import evaluate_path
    from worldsmith.training.bench_summary import FILE_STRATA, file_strata, summarize_run

    ids = stratum_ids(data, files)
    if only:
        unknown = sorted(set(only) - set(file_strata(data / "tasks.jsonl")))
        if unknown:
            raise SystemExit(f"--ids: not questions of {data / 'tasks.jsonl'}: {', '.join(unknown)}")
        ids = [i for i in (ids if ids is not None else only) if i in only]
    result = await evaluate_path(rt, data, samples=samples, limit=limit, ids=ids, run_path=run_path,
                                 progress=progress)
    # a stratum is its own benchmark row in compare.py, named as compare.py --by-files names it
    set_name = _set_name(data)
    name = set_name if files is None else f"{set_name} ({FILE_STRATA[files]})"
    return summarize_run(result, benchmark=name, **meta)


def _set_name(data: Path) -> str:
    """The name a set's manifest gives it (generated-v1 when run with `--data benchmarks/data/generated-v1`)."""
    try:
        return str(json.loads((Path(data) / "manifest.json").read_text(encoding="utf-8"))["name"])
    except (OSError, ValueError, KeyError):
        return NAME


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The command line's run: the embedded model, its threads and turn limit from the options."""
    from worldsmith.app.runtime import make_runtime
    from worldsmith.commands.evaluate import progress_reporter
    from worldsmith.core.config import load_settings

    llm: dict[str, Any] = {"default": {"provider": "embedded", "model": args.model}, "cache": args.cache}
    if args.threads:
        llm["default"]["n_threads"] = args.threads
    settings = load_settings(overrides={"llm": llm, "analyst": {"max_turns": args.max_turns}})
    rt = make_runtime(settings)
    progress, on_progress = progress_reporter(show=True)
    with progress:
        return asyncio.run(run_bench(rt, args.data, limit=args.limit, samples=args.samples, run_path=args.resume,
                                     progress=on_progress, files=args.files, only=_ids(args.ids), model=args.model,
                                     threads=args.threads,
                                     max_turns=settings.analyst.max_turns))


def _ids(value: str | None) -> list[str] | None:
    """--ids: comma-separated question ids, or @FILE with one id per line."""
    if not value:
        return None
    text = Path(value[1:]).read_text() if value.startswith("@") else value.replace(",", "\n")
    return [line.strip() for line in text.splitlines() if line.strip()]


def main() -> None:
    from worldsmith.training.bench_summary import print_summary, write_summary

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", action="store_true", help="rebuild the frozen set from SEED_LIST (no model run)")
    ap.add_argument("--out-dir", type=Path, default=DATA, help="where --build writes the set")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp CPU threads (default: every CPU)")
    ap.add_argument("--out", type=Path, default=None, help="write the summary JSON here (for compare.py)")
    ap.add_argument("--resume", type=Path, default=None)
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--files", choices=["one", "several"], default=None,  # bench_summary.FILE_STRATA
                    help="only the questions whose answers need one data file (as a DABench question) or several")
    ap.add_argument("--ids", default=None, help="only these questions: ID,ID,… or @FILE (one id per line)")
    ap.add_argument("--cache", action="store_true", help="reuse cached LLM responses (times are then not real)")
    args = ap.parse_args()
    if args.build:
        out = build(args.out_dir)
        n = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["n_questions"]
        print(f"{n} questions in {out} (SHA256SUMS lists every file)")
        return
    summary = run(args)
    print_summary(summary)
    if args.out:
        write_summary(args.out, summary)
        print(f"summary: {args.out}")


if __name__ == "__main__":
    main()
