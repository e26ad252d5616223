"""World-engine benchmark: scale (10^4..10^6 canonical rows), audit pass rate, audit claims, xlsx reading cost.

Scale: for each size, a child process builds the `operations_supply_chain` template world and reports the time of
each stage (generate, project, write, audit) and its peak RSS. A baseline, measured in the same child, re-writes
the same final observed tables with plain pandas writers (to_csv / to_parquet / to_json / to_excel / to_sql);
the ratio total / baseline is what the target (<= 3x) refers to. Medians over --repeats runs.

Audit claims: --claims random contracts, each built as claimed and as zero-effect twins (one per mechanism type it
uses): sensitivity (true worlds passed) and specificity (twins failed), per mechanism.
xlsx cost: every reference solution of a 10^5-row finance world (its ledger is an xlsx workbook, one sheet per
year), each run in its own interpreter.

Audit pass rate: --worlds random template variants (random_contract, small rows) are built and audited; the share
of edges and of phenomena that pass is reported (only passing phenomena become tasks).

    python benchmarks/worlds.py                     # 1e4, 1e5 (3 runs) and 1e6 (1 run) + 50 audit worlds
    python benchmarks/worlds.py --sizes 10000 --worlds 10 --json out.json
    python benchmarks/worlds.py --sizes --worlds 0 --claims 50 --xlsx-rows 0   # only the audit claims
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

TEMPLATE = "operations_supply_chain"


def _baseline_write(world: Path, scratch: Path) -> float:
    """Seconds to write the world's final observed tables with pandas' own writers."""

    from worldsmith.evolution.worlds import load_world
    from worldsmith.evolution.worlds.reconcile import FrameCache, find_parts

    w = load_world(world)
    cache = FrameCache(world)
    tables = [(s.format, p.path, p.part, cache.get(p)) for s in w.contract.systems for p in find_parts(world, s)]
    scratch.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for i, (fmt, _path, part, df) in enumerate(tables):
        target = scratch / f"t{i}"
        if fmt == "csv":
            df.to_csv(target, index=False)
        elif fmt == "csv.gz":
            df.to_csv(target, index=False, compression="gzip")
        elif fmt == "parquet":
            df.to_parquet(target, index=False)
        elif fmt == "json":
            df.to_json(target, orient="records")
        elif fmt == "jsonl":
            df.to_json(target, orient="records", lines=True)
        elif fmt == "xlsx":
            df.to_excel(target.with_suffix(".xlsx"), sheet_name=str(part), index=False)
        elif fmt == "sqlite":
            with sqlite3.connect(target) as con:
                df.to_sql(str(part), con, index=False)
    return time.perf_counter() - t0


def child(rows: int, seed: int, out: Path) -> dict:
    from worldsmith.evolution.worlds import build_world, load_template

    c = load_template(TEMPLATE, rows=rows)
    t0 = time.perf_counter()
    res = build_world(c, seed, out / "world", overwrite=True)
    total = time.perf_counter() - t0
    baseline = _baseline_write(out / "world", out / "baseline")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return {"rows": rows, "canonical_rows": sum(res.entity_rows.values()), "total_s": total,
            "baseline_write_s": baseline, "peak_rss_bytes": peak, **{f"{k}_s": v for k, v in res.timings.items()},
            "audit": res.audit_summary}


def run_child(rows: int, seed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="wsbench-") as tmp:
        cmd = [sys.executable, __file__, "--child", str(rows), str(seed), tmp]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"benchmark child for {rows} rows failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def scale(sizes: list[int], repeats: dict[int, int]) -> list[dict]:
    rows_out = []
    print(f"\n== scale: template {TEMPLATE}, cpus={os.cpu_count()}, load avg={os.getloadavg()[0]:.1f}")
    print(f"{'rows':>9} {'runs':>4} {'generate':>9} {'project':>8} {'write':>7} {'audit':>7} {'total':>7} "
          f"{'baseline':>8} {'ratio':>6} {'peakRSS':>8}")
    for n in sizes:
        runs = [run_child(n, seed) for seed in range(repeats.get(n, 1))]
        med = {k: statistics.median(r[k] for r in runs) for k in
               ("generate_s", "project_s", "write_s", "audit_s", "total_s", "baseline_write_s", "peak_rss_bytes")}
        med["ratio"] = med["total_s"] / med["baseline_write_s"]
        med.update(rows=n, canonical_rows=runs[0]["canonical_rows"], runs=len(runs), audit=runs[0]["audit"])
        rows_out.append(med)
        print(f"{n:>9} {len(runs):>4} {med['generate_s']:>9.2f} {med['project_s']:>8.2f} {med['write_s']:>7.2f} "
              f"{med['audit_s']:>7.2f} {med['total_s']:>7.2f} {med['baseline_write_s']:>8.2f} {med['ratio']:>5.1f}x "
              f"{med['peak_rss_bytes'] / 2**30:>7.2f}G")
    return rows_out


def audit_rate(worlds: int, rows: int) -> dict:
    from worldsmith.evolution.worlds import build_world, random_contract, read_audit

    edges, phen, inv = Counter(), Counter(), Counter()
    failed: list[str] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="wsaudit-") as tmp:
        for seed in range(worlds):
            c = random_contract(seed, rows=rows)
            out = Path(tmp) / str(seed)
            build_world(c, seed, out)
            r = read_audit(out)
            for x in r.edges:
                edges[x.status] += 1
                if x.status == "fail":
                    failed.append(f"{c.id} edge {x.id}: {x.reason}")
            for x in r.phenomena:
                phen[x.status] += 1
                if x.status == "fail":
                    failed.append(f"{c.id} phenomenon {x.id}: {x.reason}")
            for x in r.invariants:
                inv[x.status] += 1
            shutil.rmtree(out)
    judged = edges["pass"] + edges["fail"]
    result = {"worlds": worlds, "rows": rows, "edges": dict(edges), "phenomena": dict(phen), "invariants": dict(inv),
              "edge_pass_rate": edges["pass"] / judged if judged else None,
              "phenomenon_pass_rate": phen["pass"] / sum(phen.values()) if phen else None,
              "seconds": time.perf_counter() - t0, "failures": failed}
    print(f"\n== audit pass rate: {worlds} random template variants at {rows} rows ({result['seconds']:.0f}s)")
    print(f"edges: {edges['pass']}/{judged} passed ({100 * result['edge_pass_rate']:.1f}%), {edges['skip']} skipped")
    print(f"phenomena: {phen['pass']}/{sum(phen.values())} recoverable ({100 * result['phenomenon_pass_rate']:.1f}%)"
          " - only these are emitted as tasks, so 100% of emitted phenomena pass by construction")
    print(f"invariants: {inv['pass']}/{sum(inv.values())} passed")
    for f in failed:
        print("  -", f)
    return result


def _mechanism_label(e) -> str:
    """An edge's mechanism type, with what modulates it ('linear+gate', 'linear+moderators')."""
    label = e.mechanism.type
    if e.gate is not None:
        label += "+gate"
    if e.heterogeneity is not None and len(e.heterogeneity.columns) > 1:
        label += "+moderators"
    return label


def audit_claims(worlds: int, rows: int) -> dict:
    """Sensitivity and specificity of the audit: each random contract is built as claimed (the audit must pass it) and,
    for every mechanism type among the edges its audit could judge, as a zero-effect twin: one edge of that type (drawn
    per seed) has its magnitudes set to zero while contract.json keeps the claim (the audit must fail it). Derived
    variables and fixed attributes (exact relations) get a twin too: the relation broken, the claim kept."""
    import numpy as np

    from worldsmith.evolution.worlds import build_world, random_contract, read_audit
    from worldsmith.evolution.worlds.audit_claims import zero_effect_twin

    true_ok, twins, twin_failed = 0, 0, 0
    per_mech: dict[str, Counter] = {}
    misses: list[str] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="wsclaims-") as tmp:
        for seed in range(worlds):
            c = random_contract(seed, rows=rows)
            out = Path(tmp) / f"{seed}-true"
            build_world(c, seed, out)
            r = read_audit(out)
            true_ok += r.passed
            if not r.passed:
                misses.append(f"true {c.id}: " + "; ".join(f"{x.kind} {x.id}: {x.reason}" for x in r.failures()))
            mech_of = {str(e.id): _mechanism_label(e) for e in c.edges}
            mech_of |= {f"derived:{v.name}": f"derived {v.derive.op}" for v in c.variables if v.derive}
            mech_of |= {f"fixed:{a.name}": "fixed attribute" for e in c.entities for a in e.attributes
                        if a.distribution.type == "fixed"}
            mech_of |= {f"relink:{e.name}": "relink" for e in c.entities if e.relink is not None}
            judged: dict[str, list[str]] = {}
            for x in [*r.edges, *(i for i in r.invariants if i.id in mech_of)]:
                if x.status != "skip":
                    judged.setdefault(mech_of[x.id], []).append(x.id)
                    m = per_mech.setdefault(mech_of[x.id], Counter())
                    m["true_edges"] += 1
                    m["true_edges_passed"] += x.passed
            rng = np.random.default_rng(seed)
            for mech, ids in sorted(judged.items()):
                edge = ids[int(rng.integers(0, len(ids)))]
                twin_out = Path(tmp) / f"{seed}-twin"
                build_world(c, seed, twin_out, generated_from=zero_effect_twin(c, edge))
                t = read_audit(twin_out)
                per_mech[mech]["twins"] += 1
                per_mech[mech]["twins_failed"] += not t.passed
                twins += 1
                twin_failed += not t.passed
                if t.passed:
                    misses.append(f"twin {c.id} (zeroed {edge}) passed")
                shutil.rmtree(twin_out)
            shutil.rmtree(out)
    result = {"worlds": worlds, "rows": rows, "twins": twins, "sensitivity": true_ok / worlds,
              "specificity": twin_failed / twins if twins else None,
              "per_mechanism": {k: dict(v) for k, v in sorted(per_mech.items())},
              "seconds": time.perf_counter() - t0, "misses": misses}
    print(f"\n== audit claims: {worlds} random contracts at {rows} rows, each true and as zero-effect twins (one per "
          f"mechanism it uses) ({result['seconds']:.0f}s)")
    print(f"sensitivity (true worlds passed): {true_ok}/{worlds} = {100 * result['sensitivity']:.1f}%")
    if twins:
        print(f"specificity (twins failed):       {twin_failed}/{twins} = {100 * result['specificity']:.1f}%")
    print(f"{'mechanism':<20} {'twins failed':>12} {'true claims passed':>19}")
    for k, v in result["per_mechanism"].items():
        print(f"{k:<20} {v.get('twins_failed', 0):>5}/{v.get('twins', 0):<6} {v.get('true_edges_passed', 0):>10}/"
              f"{v.get('true_edges', 0):<8}")
    for m in misses:
        print("  -", m)
    return result


def xlsx_cost(rows: int, template: str = "finance", seed: int = 0, world: Path | None = None) -> dict:
    """Seconds to run every reference solution of a world whose largest table is an xlsx workbook (finance: the
    general ledger, one sheet per year), each in its own interpreter as the task pipeline runs them."""
    from worldsmith.evolution.worlds import build_world, load_template, parse_answer, reference_solution_code

    with tempfile.TemporaryDirectory(prefix="wsxlsx-") as tmp:
        out = world or Path(tmp) / "w"
        c = load_template(template, rows=rows)
        build_world(c, seed, out, audit=False)
        runs = []
        for p in c.phenomena:
            script = Path(tmp) / f"{p.id}.py"
            script.write_text(reference_solution_code(out, p.id))
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, str(script)], cwd=out, capture_output=True, text=True, check=False)
            runs.append({"id": p.id, "seconds": time.perf_counter() - t0, "ok": done.returncode == 0,
                         "value": parse_answer(done.stdout, p.id), "xlsx_reads": script.read_text().count(".xlsx")})
    total = sum(r["seconds"] for r in runs)
    print(f"\n== xlsx reading cost: {template} at {rows} rows, {len(runs)} reference solutions: {total:.1f}s")
    for r in runs:
        print(f"  {r['id']:<28} {r['seconds']:>6.1f}s  sheet reads: {r['xlsx_reads']}  "
              f"{'ok' if r['ok'] else 'FAILED'} {r['value']}")
    return {"template": template, "rows": rows, "total_s": total, "solutions": runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", nargs=3, metavar=("ROWS", "SEED", "DIR"), help=argparse.SUPPRESS)
    ap.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--repeats", type=int, default=3, help="runs per size below 10^6 (10^6 runs --big-repeats)")
    ap.add_argument("--big-repeats", type=int, default=1)
    ap.add_argument("--worlds", type=int, default=50, help="random contracts for the audit pass rate (0 = skip)")
    ap.add_argument("--audit-rows", type=int, default=5000)
    ap.add_argument("--claims", type=int, default=50, help="random contracts x {true, zero-effect twin} (0 = skip)")
    ap.add_argument("--xlsx-rows", type=int, default=100_000, help="rows of the xlsx reading benchmark (0 = skip)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(int(a.child[0]), int(a.child[1]), Path(a.child[2]))))
        return
    report: dict = {}
    if a.sizes:
        report["scale"] = scale(a.sizes, {n: (a.big_repeats if n >= 1_000_000 else a.repeats) for n in a.sizes})
    if a.worlds:
        report["audit"] = audit_rate(a.worlds, a.audit_rows)
    if a.claims:
        report["claims"] = audit_claims(a.claims, a.audit_rows)
    if a.xlsx_rows:
        report["xlsx"] = xlsx_cost(a.xlsx_rows)
    if a.json:
        a.json.write_text(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
