"""The session's setup kept whole: after a cell that undid it, the setup runs again and the model is told.

For a question over two linked tables (or one table with a unit change), the session runs code before the model's
first cell — the tables loaded, stacked, joined, units made good — and the task turn shows that code as run
(agents/analyst.py `Opening`). The 1.5B model often loads the files again anyway. A faithful copy of the setup
is harmless; a load of its own into `df` loses the joined columns (at 3750f22, with the setup said in words,
every cell of the first 7 setup questions read the ledger into `df` or `gl`, then looked for the lookup table's
columns in it until its turns ran out: `df[df["size_class"] == "large"]`, KeyError). So after a cell that reads
the setup's files again into the names it made (:func:`reloads`) and leaves `df` without columns the setup's
`df` had, the setup runs again and the observation says which columns came back (:func:`lost_note`). Blocking
such cells instead was tried (2f2eb3f): told "not run", the model answered without a cell, then wrote the same
load again. A cell that copies the setup and then keeps some of its rows or adds columns has kept the setup's work
and is left alone (:data:`KEPT`): at f4ca853 such cells (the setup copied, then `df = df[df["score"] < 100]`) had
their own filters undone by the setup run again, five times in one question.

The other way to lose the setup's work is to cut its frame to one group and then look for another group in it
(`df = df[df["arm"] == "A"]`, then `df[df["arm"] == "B"]`: agents/line_fixes.py `refiltered`). A model cannot make
a joined `df` whole again by its load call, so after such a cell the setup runs again too (:func:`cut_frame`,
:func:`restored_note`). Inference (graphs/analyst.py) and RL rollouts (training/rollout.py) do the same.
"""

from __future__ import annotations

import ast
from typing import Any

from worldsmith.agents.analyst import feedback
from worldsmith.agents.line_fixes import refiltered

#: the guard kind that counts a setup run again (core/schemas.py GuardKind)
KIND = "setup_restored"
#: run in the session after the setup and after a cell that read its files again: `df`'s columns, shape and the
#: sum of its numbers (a unit change undone moves it); prints nothing when there is no `df`
PROBE = ('print("\\x1f".join(map(str, df.columns)) + "\\x1e" + str(df.shape) + "\\x1e"'
         ' + repr(round(float(df.select_dtypes("number").sum().sum()), 6))'
         ' if isinstance(globals().get("df"), pd.DataFrame) else "")')

#: the name the session keeps a copy of the setup's `df` under (:data:`KEEP`); the model is never shown it
COPY = "_ws_setup_df"
#: run in the session right after the setup: keeps a copy of its `df`, then prints :data:`PROBE`'s line
KEEP = (f'{COPY} = df.copy() if isinstance(globals().get("df"), pd.DataFrame) else None\n' + PROBE)
#: run after a cell that read the setup's files again: prints 1 when `df` still has every column of the setup's
#: `df` with the setup's values on each of its rows, and some but only rows the setup's `df` had (the model kept
#: some rows or added columns of its own: the setup's work is there), else 0 (an empty join of the model's own is 0)
KEPT = (f'_ws_s = globals().get("{COPY}")\n'
        '_ws_d = globals().get("df")\n'
        'print(int(isinstance(_ws_s, pd.DataFrame) and isinstance(_ws_d, pd.DataFrame)'
        ' and len(_ws_d) > 0 and set(_ws_s.columns) <= set(_ws_d.columns) and _ws_d.index.is_unique'
        ' and bool(_ws_d.index.isin(_ws_s.index).all())'
        ' and _ws_d[list(_ws_s.columns)].equals(_ws_s.loc[_ws_d.index, list(_ws_s.columns)])))\n'
        'del _ws_s, _ws_d')


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None


def _targets(node: ast.Assign) -> list[str]:
    out: list[str] = []
    for target in node.targets:
        elts = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        out += [e.id for e in elts if isinstance(e, ast.Name)]
    return out


def _files_read(node: ast.AST) -> list[str]:
    """The paths given as literal strings to the reader calls (`pd.read_csv("a.csv")`, `read_excel(path=...)`)
    under `node`."""
    out = []
    for call in ast.walk(node):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if not name.startswith("read_"):
            continue
        args = list(call.args[:1]) + [k.value for k in call.keywords if k.arg in ("io", "filepath_or_buffer",
                                                                                     "path", "path_or_buf")]
        out += [a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return out


def _made(setup: str) -> set[str]:
    tree = _parse(setup)
    return {n for stmt in tree.body if isinstance(stmt, ast.Assign) for n in _targets(stmt)} if tree else set()


def reloads(code: str, setup: str) -> list[str]:
    """The names the setup made at its top level that `code` assigns again from a read of a file the setup read
    (`df = pd.read_excel("data/ledger.xlsx", ...)`, `gl = pd.concat([pd.read_excel(...), ...])`), in the cell's
    order; [] when there is none, or either does not parse."""
    made, cell = _parse(setup), _parse(code)
    if made is None or cell is None:
        return []
    names = _made(setup)
    files = set(_files_read(made))
    out: list[str] = []
    for node in ast.walk(cell):
        if isinstance(node, ast.Assign) and files.intersection(_files_read(node.value)):
            out += [n for n in _targets(node) if n in names and n not in out]
    return out


def undone(setup_probe: str, probed: str) -> list[str] | None:
    """None when `df` is as the setup left it (the two :data:`PROBE` outputs agree, or the setup's gave nothing);
    else the setup's columns `df` no longer has (maybe none: rows or values changed)."""
    if not setup_probe.strip() or probed.strip() == setup_probe.strip():
        return None
    had = setup_probe.strip().split("\x1e")[0].split("\x1f")
    has = set(probed.strip().split("\x1e")[0].split("\x1f")) if probed.strip() else set()
    return [c for c in had if c and c not in has]


def reloaded_note(names: list[str], lost: list[str]) -> str:
    """Said after the setup ran again because the cell read its files into `names` and `df` lost the columns
    `lost` (or, with none, the rows or values the setup made)."""
    what = (feedback("setup lost columns", lost=", ".join(f"`{c}`" for c in lost)) if lost
            else feedback("setup lost values"))
    return feedback("setup reloaded", names=", ".join(f"`{n}`" for n in names), what=what)


def cut_frame(code: str, setup: str) -> str | None:
    """The setup's frame that `code` cut to one group and then filtered for another (`refiltered`), or None."""
    cut = refiltered(code) if setup else None
    return cut[0] if cut and cut[0] in _made(setup) else None


def restored_note(frame: str) -> str:
    """Said after the setup ran again because `frame` was cut (:func:`cut_frame`)."""
    return feedback("setup restored", frame=frame)


async def _printed(sb: Any, code: str) -> str:
    """What `code` prints in the session `sb` ('' when it fails)."""
    out = await sb.run(code)
    return (out.stdout or "") if out.ok else ""


async def probe(sb: Any) -> str:
    """:data:`PROBE`'s output in the session `sb` ('' when it fails)."""
    return await _printed(sb, PROBE)


async def snapshot(sb: Any) -> str:
    """Run right after the setup in `sb`: keeps a copy of its `df` there and returns :data:`PROBE`'s output."""
    return await _printed(sb, KEEP)


async def kept(sb: Any) -> bool:
    """Whether `df` in `sb` is the setup's `df` with some of its rows kept or columns added (:data:`KEPT`)."""
    return (await _printed(sb, KEPT)).strip() == "1"


async def again(sb: Any, code: str, setup: str, setup_probe: str) -> str | None:
    """Run in `sb` after the cell `code`: when it read the setup's files again into the names the setup made and
    left `df` otherwise than `setup_probe` says the setup did (not merely fewer rows or more columns), or cut the
    setup's frame to one group and filtered for another, the setup runs again; returns the note saying so, or None."""
    if names := reloads(code, setup):
        lost = undone(setup_probe, await probe(sb))
        if lost == [] and await kept(sb):  # the setup copied, then rows kept or columns added: its work is there
            lost = None
        if lost is not None and (await sb.run(setup)).ok:
            return reloaded_note(names, lost)
    elif (frame := cut_frame(code, setup)) and (await sb.run(setup)).ok:
        return restored_note(frame)
    return None
