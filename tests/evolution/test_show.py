"""`worldsmith evolve show RUN`: the exploration graph's picture, findings table and report section."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from worldsmith.cli import app
from worldsmith.core.workspace_types import Node
from worldsmith.evolution.workspace import WorkspaceStore
from worldsmith.evolution.workspace.render import layered_layout, markdown_section

runner = CliRunner()
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def build_run(run: Path) -> None:
    """root 1 → 2 supported, 3 unsupported, 4 revised (child of 2), 5 failed (child of 2)."""
    g = WorkspaceStore(run / "workspace").graph
    g.add_node(mode="root", status="supported")
    g.add_node(mode="deepen", parents=[1], depends_on="f1")
    g.set_status(2, "supported", conclusion="South revenue is 20 | north 10")
    g.add_node(mode="search", parents=[1])
    g.set_status(3, "unsupported", conclusion="a wrong claim")
    g.add_node(mode="deepen", parents=[2], depends_on="f2")
    g.set_status(4, "revised", conclusion="The promotion doubled south revenue (+100%)")
    g.add_node(mode="decompose", parents=[2])
    g.set_status(5, "failed")


def test_show_draws_a_png_and_lists_verified_findings(tmp_path: Path) -> None:
    run = tmp_path / "run"
    build_run(run)
    out = tmp_path / "pics" / "graph.png"
    r = runner.invoke(app, ["evolve", "show", str(run), "--out", str(out)], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    assert out.read_bytes()[:8] == PNG_MAGIC and out.stat().st_size > 5000
    # four analysis nodes: the initial workspace is not one (the verdict mix and the node budget never count it)
    assert "4 analysis nodes besides the initial workspace, max depth 2; supported 1, revised 1, unsupported 1, " \
           "failed 1" in r.output
    assert "verified findings (2)" in r.output
    assert "South revenue is 20" in r.output and "promotion doubled" in r.output
    assert "a wrong claim" not in r.output  # unsupported: not a verified finding


def test_show_json_and_default_image_path(tmp_path: Path) -> None:
    run = tmp_path / "run"
    build_run(run)
    r = runner.invoke(app, ["evolve", "show", str(run), "--json"])
    assert r.exit_code == 0, r.output
    view = json.loads(r.output)
    assert view["status_counts"] == {"supported": 2, "revised": 1, "unsupported": 1, "failed": 1}
    assert [(f["finding"], f["node"], f["depth"], f["status"], f["depends_on"]) for f in view["findings"]] == [
        ("f2", 2, 1, "supported", "f1"), ("f4", 4, 2, "revised", "f2")]
    assert Path(view["image"]) == run / "exploration_graph.png" and (run / "exploration_graph.png").is_file()
    assert "![exploration graph](exploration_graph.png)" in view["markdown"]  # relative to the run's report


def test_show_refuses_a_folder_without_a_graph(tmp_path: Path) -> None:
    r = runner.invoke(app, ["evolve", "show", str(tmp_path)])
    assert r.exit_code == 2 and "no exploration graph" in r.output
    assert runner.invoke(app, ["evolve", "show", str(tmp_path / "nope")]).exit_code == 2


def test_markdown_section_escapes_cells(tmp_path: Path) -> None:
    run = tmp_path / "run"
    build_run(run)
    md = markdown_section(WorkspaceStore(run / "workspace").graph, image="g.png")
    assert "4 analysis nodes besides the initial workspace, max depth 2; supported 1, revised 1, unsupported 1, " \
           "failed 1." in md
    assert "| f2 | 2 | 1 | deepen | supported | f1 | South revenue is 20 \\| north 10 |" in md
    assert "| f4 | 4 | 2 | deepen | revised | f2 | The promotion doubled south revenue (+100%) |" in md
    assert "### Verified findings (2)" in md and "![exploration graph](g.png)" in md


def test_layered_layout_by_hand() -> None:
    def node(i: int, depth: int, parents: list[int]) -> Node:
        return Node(id=i, mode="root" if not parents else "deepen", depth=depth, parents=parents)

    # 1 → {2, 3}; 3 → 4; 2 → 5: layer 2 is ordered by parent x, so 5 (under 2) comes before 4 (under 3)
    pos = layered_layout([node(1, 0, []), node(2, 1, [1]), node(3, 1, [1]), node(4, 2, [3]), node(5, 2, [2])])
    assert pos == {1: (0.0, 0.0), 2: (-0.5, -1.0), 3: (0.5, -1.0), 5: (-0.5, -2.0), 4: (0.5, -2.0)}


def test_a_first_word_that_is_no_subcommand_goes_to_run() -> None:
    """The hook `worldsmith evolve DATA_DIR` relies on: with a `run` command, a folder name is routed to it."""
    import typer

    from worldsmith.commands.evolve import DefaultCommandGroup

    demo = typer.Typer(cls=DefaultCommandGroup)
    seen: list[str] = []

    @demo.command("run")
    def run_cmd(data_dir: str, steps: int = 1) -> None:
        seen.append(f"run {data_dir} {steps}")

    @demo.command("show")
    def show_cmd(run: str) -> None:
        seen.append(f"show {run}")

    assert runner.invoke(demo, ["./data", "--steps", "3"]).exit_code == 0
    assert runner.invoke(demo, ["run", "./other"]).exit_code == 0
    assert runner.invoke(demo, ["show", "RUN"]).exit_code == 0
    assert seen == ["run ./data 3", "run ./other 1", "show RUN"]
    missing = runner.invoke(app, ["evolve", str(Path("no-such-data-folder"))])
    assert missing.exit_code == 2 and "no such data folder" in missing.output  # routed to `run`, which checks it
