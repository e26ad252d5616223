"""Layering: each layer imports only the layers below it (CONVENTIONS.md, DESIGN.md).

Two checks per rule: loading every module of the package in a fresh interpreter must not pull a higher layer into
`sys.modules`, and no import statement in the package's source names one, not even inside a function (a deferred
import is still a dependency, only one that fails later).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_FRONT = ("worldsmith.app", "worldsmith.commands", "worldsmith.cli", "worldsmith.ui")
RULES = {  # package: what it must not import
    "worldsmith.core": ("worldsmith.llm", "worldsmith.tools", "worldsmith.training", "worldsmith.agents",
                        "worldsmith.graphs", *_FRONT),
    "worldsmith.llm": ("worldsmith.tools", "worldsmith.training", "worldsmith.agents", "worldsmith.graphs", *_FRONT),
    "worldsmith.tools": ("worldsmith.training", "worldsmith.agents", "worldsmith.graphs", *_FRONT),
    "worldsmith.agents": ("worldsmith.graphs", *_FRONT),
    "worldsmith.training": _FRONT,
    # the workspace store sits on core only (agents and graphs call it, never the other way)
    "worldsmith.evolution.workspace": ("worldsmith.llm", "worldsmith.tools", "worldsmith.training", "worldsmith.agents",
                                       "worldsmith.graphs", "worldsmith.memory", *_FRONT),
    "worldsmith.graphs": _FRONT,
}

_LOAD_ALL = """
import importlib, json, pkgutil, sys
pkg = importlib.import_module(sys.argv[1])
names = [pkg.__name__] + [m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
for name in names:
    importlib.import_module(name)
print(json.dumps({"imported": names, "loaded": sorted(sys.modules)}))
"""


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("package", sorted(RULES))
def test_loading_a_package_loads_no_higher_layer(package: str) -> None:
    out = subprocess.run([sys.executable, "-c", _LOAD_ALL, package], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(data["imported"]) > 3, data["imported"]  # the walk really found the package's modules
    leaked = [m for m in data["loaded"] if _under(m, RULES[package])]
    assert leaked == [], f"importing every module of {package} loaded {leaked}"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import statement in a file, wherever it stands."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.lineno, node.module)]
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


@pytest.mark.parametrize("package", sorted(RULES))
def test_no_import_statement_names_a_higher_layer(package: str) -> None:
    folder = ROOT.joinpath(*package.split("."))
    files = sorted(folder.rglob("*.py"))
    assert files, folder
    bad = [f"{p.relative_to(ROOT)}:{line} imports {mod}" for p in files for line, mod in _imports(p)
           if _under(mod, RULES[package])]
    assert bad == []


def test_the_checks_see_a_violation(tmp_path: Path) -> None:
    """The source scan recognises the import forms it must forbid (so an empty result above means something)."""
    probe = tmp_path / "probe.py"
    probe.write_text("import worldsmith.app.ask\nfrom worldsmith import commands\nimport worldsmith.graphs.runtime\n"
                     "def f():\n    from worldsmith.cli import app\n", encoding="utf-8")
    mods = [m for _, m in _imports(probe)]
    assert [m for m in mods if _under(m, RULES["worldsmith.graphs"])] == [
        "worldsmith.app.ask", "worldsmith.commands", "worldsmith.cli", "worldsmith.cli.app"]
