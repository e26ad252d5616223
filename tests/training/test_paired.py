"""Before/after on the same questions (bench_summary.paired_comparison, `worldsmith compare`): hand-made summaries,
p-values computed by hand from the binomial distribution."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worldsmith.cli import app
from worldsmith.training.bench_summary import first_outcomes, mcnemar_exact, paired_comparison


def _summary(path: Path, solved: set[str], ids: list[str], *, model: str = "") -> Path:
    qs = [{"task_id": t, "level": "easy", "correct": 1.0 if t in solved else 0.0, "time_s": 1.0} for t in ids]
    path.write_text(json.dumps({"benchmark": "dabench-dev", "samples": 1, "n_questions": len(ids),
                                "n_correct": len(solved), "accuracy": len(solved) / len(ids), "model": model,
                                "questions": qs}))
    return path


def test_mcnemar_exact_by_hand() -> None:
    # discordant b gained, c lost; two-sided = 2 · P(X ≤ min(b, c)), X ~ Binomial(b + c, 1/2), capped at 1
    assert mcnemar_exact(3, 1) == pytest.approx(2 * (1 + 4) / 16)      # 0.625
    assert mcnemar_exact(2, 0) == pytest.approx(2 * 1 / 4)             # 0.5
    assert mcnemar_exact(6, 1) == pytest.approx(2 * (1 + 7) / 128)     # 0.125
    assert mcnemar_exact(10, 0) == pytest.approx(2 / 1024)             # 0.00195
    assert mcnemar_exact(2, 2) == pytest.approx(1.0)
    assert mcnemar_exact(0, 0) == 1.0


def test_only_the_questions_both_runs_graded_are_paired(tmp_path: Path) -> None:
    ids = [f"q{i}" for i in range(10)]
    before = json.loads(_summary(tmp_path / "b.json", {"q0", "q1"}, ids + ["old"]).read_text())
    after = json.loads(_summary(tmp_path / "a.json", {f"q{i}" for i in range(1, 8)} | {"new"}, ids + ["new"])
                       .read_text())
    p = paired_comparison(before, after)
    assert (p["n"], p["before"], p["after"]) == (10, 2, 7)
    assert p["gained"] == ["q2", "q3", "q4", "q5", "q6", "q7"] and p["lost"] == ["q0"]
    assert p["p_value"] == pytest.approx(0.125)
    assert p["only_before"] == ["old"] and p["only_after"] == ["new"]
    with pytest.raises(ValueError, match="share no question"):
        paired_comparison(before, json.loads(_summary(tmp_path / "c.json", set(), ["x"]).read_text()))


def test_with_several_samples_a_question_counts_by_its_first_sample() -> None:
    summary = {"questions": [{"task_id": "a", "correct": 2 / 3, "first": False},
                             {"task_id": "b", "correct": 1 / 3, "first": True},
                             {"task_id": "c", "correct": 1.0, "first": True}]}
    assert first_outcomes(summary) == {"a": False, "b": True, "c": True}
    assert first_outcomes({"questions": [{"task_id": "a", "correct": 0.5}]}) == {"a": False}


def test_compare_command_prints_the_change_and_its_verdict(tmp_path: Path) -> None:
    ids = [f"dabench-{i}" for i in range(30)]
    before = _summary(tmp_path / "base.json", {"dabench-0"}, ids, model="base.gguf")
    after = _summary(tmp_path / "sft.json", {f"dabench-{i}" for i in range(1, 12)}, ids, model="sft.gguf")
    r = CliRunner().invoke(app, ["compare", str(before), str(after)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "before: 1/30 3.3%" in text and "after : 11/30 36.7%" in text and "(sft.gguf)" in text
    assert "gained 11:" in text and "lost 1: dabench-0" in text
    # 11 gained, 1 lost: 2 · (1 + 12) / 4096 = 0.00635
    assert "over the 12 question(s) only one run solved: p = 0.00635, a change beyond chance at 5%" in text

    r = CliRunner().invoke(app, ["compare", str(before), str(after), "--json"])
    assert json.loads(r.output)["p_value"] == pytest.approx(2 * 13 / 4096)

    r = CliRunner().invoke(app, ["compare", str(tmp_path / "nothing"), str(after)])
    assert r.exit_code == 1 and "neither a summary JSON file nor an eval run directory" in r.output
