"""The session's setup kept: a cell that reads the setup's files again into the names the setup made is not run.

For a question over two linked tables (or one table with a unit change), the session runs code before the model's
first cell — the tables loaded, stacked, joined, units made good — and the task turn says in words what `df` holds
(agents/analyst.py `ready_section`). The 1.5B model loads the files anyway: at 3750f22, in each of the first four
generated questions with a setup, every cell began by reading the ledger again into `df` or `gl`, throwing the
join away, and then looked for the joined table's columns in the bare ledger until its turns ran out
(`df = pd.read_excel("data/ledger.xlsx", sheet_name="gl_2022")`, then `df[df["size_class"] == "large"]`: KeyError).

Such a cell is not run, up to `setup_keeps` times a question; the model is told so, with the columns `df` holds,
and writes the cell again from `df`. A read of some other file, or into a name the setup did not make, runs as
written, and so does a reload once the keeps are spent. Inference (graphs/analyst.py) and RL rollouts
(training/rollout.py) use the same check and the same note.

The other way to lose the setup's work is to cut its frame to one group and then look for another group in it
(`df = df[df["arm"] == "A"]`, then `df[df["arm"] == "B"]`: agents/line_fixes.py `refiltered`). A model cannot make
a joined `df` whole again by its load call, so after such a cell the session runs the setup once more and says so
(:func:`cut_frame`, :func:`restored_note`).
"""

from __future__ import annotations

import ast

from worldsmith.agents.analyst import feedback
from worldsmith.agents.line_fixes import refiltered

#: the ExecSummary.error_type of a cell that was not run, and the guard kind that counts it (core/schemas.py)
NOT_RUN = "NotRun"
KIND = "setup_reload"
#: run in the session to name the columns the setup's `df` holds (for the note); prints nothing when there is none
COLUMNS_PROBE = 'print("\\x1f".join(map(str, df.columns)) if isinstance(globals().get("df"), pd.DataFrame) else "")'


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


def note(names: list[str], probed: str) -> str:
    """The observation of a cell not run: the names it would have replaced and, from the probe's output
    (:data:`COLUMNS_PROBE`), the columns `df` holds."""
    columns = [c for c in probed.strip().split("\x1f") if c] if probed.strip() else []
    held = feedback("setup columns", columns=", ".join(columns)) if columns else ""
    return feedback("setup kept", names=", ".join(f"`{n}`" for n in names), columns=held)


def cut_frame(code: str, setup: str) -> str | None:
    """The setup's frame that `code` cut to one group and then filtered for another (`refiltered`), or None."""
    cut = refiltered(code) if setup else None
    return cut[0] if cut and cut[0] in _made(setup) else None


def restored_note(frame: str) -> str:
    """Said after the setup ran again because `frame` was cut (:func:`cut_frame`)."""
    return feedback("setup restored", frame=frame)
