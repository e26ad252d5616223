"""`worldsmith grade RESPONSES.jsonl`: the golden table through the command line, both denominators, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.core.golden import GOLDEN, golden_rows
from worldsmith.cli import app

runner = CliRunner()


def test_grade_json_agrees_with_every_golden_line() -> None:
    r = runner.invoke(app, ["grade", str(GOLDEN), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    rows = golden_rows()
    assert out["rule"] == "official" and out["n"] == len(rows) == len(out["responses"])
    for row, graded in zip(rows, out["responses"]):
        want = {k: (False if v is None else v) for k, v in row["official_correct"].items()}
        assert {i["name"]: i["correct"] for i in graded["items"]} == want, row["case"]
        assert graded["id"] == row["case"]


def _write(tmp_path: Path, *rows: object) -> Path:
    p = tmp_path / "responses.jsonl"
    p.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return p


def test_both_denominators_on_a_hand_computed_file(tmp_path: Path) -> None:
    path = _write(tmp_path,
                  {"label": [["a", "1"], ["b", "2"]], "response": "@a[1] @b[2]"},   # 2/2
                  {"label": [["a", "1"], ["b", "2"]], "response": "@a[1] @b[3]"},   # 1/2
                  {"label": [["x", "5"]], "response": ""},                          # empty
                  {"label": [["x", "5"]], "response": None, "id": 7})               # empty
    out = json.loads(runner.invoke(app, ["grade", str(path), "--json"]).stdout)
    off, con = out["accuracies"]["official"], out["accuracies"]["conservative"]
    assert out["n_empty"] == 2
    assert off == {"by_question": 0.5, "by_sub_question": 0.75, "proportional": 0.75, "n": 2}
    assert con == {"by_question": 0.25, "by_sub_question": 0.5, "proportional": 0.375, "n": 4}


def test_human_output_lists_verdicts_and_the_two_columns(tmp_path: Path) -> None:
    path = _write(tmp_path, {"label": [["a", "1"], ["b", "2"]], "response": "@a[1] @b[3]"},
                  {"label": [["x", "5"]], "response": ""})
    r = runner.invoke(app, ["grade", str(path)])
    assert r.exit_code == 0, r.output
    assert "line 1: a: right, b: wrong" in r.stdout
    assert "line 2: x: wrong [empty response]" in r.stdout
    assert "official" in r.stdout and "conservative" in r.stdout
    sub_line = next(line for line in r.stdout.splitlines() if line.startswith("accuracy by sub-question"))
    assert sub_line.split()[-2:] == ["50.00%", "33.33%"]  # official (empty left out), conservative


def test_tolerant_rule_is_selectable(tmp_path: Path) -> None:
    path = _write(tmp_path, {"label": [["x", "1234"]], "response": "@x[1,234]"})
    assert json.loads(runner.invoke(app, ["grade", str(path), "--json"]).stdout)["responses"][0]["passed"] is False
    out = runner.invoke(app, ["grade", str(path), "--rule", "tolerant", "--json"])
    assert json.loads(out.stdout)["responses"][0]["passed"] is True


@pytest.mark.parametrize(("line", "message"), [
    ("not json", "responses.jsonl:2: invalid JSON"),
    ('{"response": "@x[1]"}', "responses.jsonl:2: expected"),
    ('{"label": [["x"]], "response": "@x[1]"}', "[name, value] pairs"),
    ('{"label": [["x", "1"]], "response": 5}', "responses.jsonl:2: 'response' must be a string"),
])
def test_malformed_line_is_named_and_exits_2(tmp_path: Path, line: str, message: str) -> None:
    path = _write(tmp_path, {"label": [["x", "1"]], "response": "@x[1]"}, line)
    r = runner.invoke(app, ["grade", str(path)])
    assert r.exit_code == 2
    assert message in " ".join(r.output.split())


def test_bad_usage_exits_2(tmp_path: Path) -> None:
    assert runner.invoke(app, ["grade", str(tmp_path / "missing.jsonl")]).exit_code == 2
    path = _write(tmp_path, {"label": [["x", "1"]], "response": "@x[1]"})
    r = runner.invoke(app, ["grade", str(path), "--rule", "loose"])
    assert r.exit_code == 2 and "official or tolerant" in r.output
