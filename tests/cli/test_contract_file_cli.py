"""`worldsmith world new OUT --contract FILE`: a hand-written YAML contract builds an audited world; broken files
fail with the field path and a fix, and nothing is built."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from worldsmith.cli import app

runner = CliRunner()
DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "contracts"


def _text(output: str) -> str:
    return " ".join(output.split())


def test_a_yaml_contract_builds_an_audited_world(tmp_path: Path) -> None:
    out = tmp_path / "shop"
    r = runner.invoke(app, ["world", "new", str(out), "--contract", str(DATA / "contract_small.yaml"), "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    assert result["world"]["world_id"] == "small_shop"
    assert result["world"]["audit_summary"]["edge"] == {"pass": 2, "fail": 0, "skip": 0}
    # built as written: the contract's own row counts (no --rows), its files and systems
    orders = pd.read_csv(out / "data" / "shop.csv")
    assert len(orders) == 3000 and {"order_id", "customer_id", "date", "discount", "amount"} <= set(orders.columns)
    # the hand-written slope, recomputed with plain pandas: amount falls 0.5 USD per discount point
    d = orders[["discount", "amount"]].dropna()
    slope = ((d.discount - d.discount.mean()) * (d.amount - d.amount.mean())).sum() / \
        ((d.discount - d.discount.mean()) ** 2).sum()
    assert abs(slope - (-0.5)) < 0.05
    assert json.loads((out / "contract.json").read_text())["title"] == "A small shop"


def test_a_misspelled_field_fails_with_its_path_and_nothing_is_built(tmp_path: Path) -> None:
    out = tmp_path / "broken"
    r = runner.invoke(app, ["world", "new", str(out), "--contract", str(DATA / "contract_bad.yaml")])
    assert r.exit_code == 1
    msg = _text(r.output)
    assert "edges.0.mechanism" in msg and "'linaer'" in msg and "'linear'" in msg
    assert not out.exists()


def test_a_semantic_problem_names_the_edge_and_the_declared_names(tmp_path: Path) -> None:
    r = runner.invoke(app, ["world", "new", str(tmp_path / "w"), "--contract", str(DATA / "contract_bad_source.json")])
    assert r.exit_code == 1
    msg = _text(r.output)
    assert "[error] edges[0](discnt->amount).sources" in msg and "'discnt'" in msg and "declared:" in msg


def test_unreadable_files_say_where(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("id: x\nentities:\n  - name: a\n   count: 3\n")
    r = runner.invoke(app, ["world", "new", str(tmp_path / "w"), "--contract", str(bad)])
    assert r.exit_code == 1 and "not valid YAML at line" in _text(r.output)
    r = runner.invoke(app, ["world", "new", str(tmp_path / "w"), "--contract", str(tmp_path / "nope.yaml")])
    assert r.exit_code == 1 and "does not exist" in _text(r.output)
    r = runner.invoke(app, ["world", "new", str(tmp_path / "w"), "--contract", str(DATA / "contract_small.yaml"),
                            "--domain", "finance"])
    assert r.exit_code != 0 and "--domain" in _text(r.output)


def test_the_shipped_example_contracts_are_valid() -> None:
    from worldsmith.evolution.worlds.contract_file import read_contract_file

    files = sorted(EXAMPLES.glob("*.yaml"))
    assert files, f"no example contracts in {EXAMPLES}"
    for f in files:
        read_contract_file(f)  # raises ContractError with every problem
