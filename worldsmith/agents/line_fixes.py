"""A cell's own lines rewritten the way pandas wants them, for the notes after a cell (agents/analyst.py). The 1.5B
model copies a concrete line far more often than it applies a general rule, so each note shows its line fixed.
Nothing here runs the code: the model reads the line and writes its next cell.

`parenthesized`: conditions combined without parentheses.

`df[df["segment"] == "consumer" & df["income"] > x]` parses as the chain `df["segment"] == ("consumer" & df["income"])
> x`, because `&` and `|` bind before comparisons; pandas then raises ("Cannot perform 'rand_' with a dtyped [float64]
array and scalar of type [bool]"). The 1.5B model repeated such a line after a note with pandas' general form (v15's
validator check, twice), so the note also shows its own line as it should read:
`df[(df['segment'] == 'consumer') & (df['income'] > x)]`. `and`/`or` between conditions inside a subscript (the
"truth value of a Series is ambiguous" error) become `&`/`|` the same way.

`assigned_back`: an in-place method on one column. Under pandas 3's Copy-on-Write, `df["col"].fillna(v, inplace=True)`
changes a copy and leaves `df` as it was, with only a ChainedAssignmentError warning; a DABench preprocessing answer
was computed from the unfilled column. The line as it works: `df["col"] = df["col"].fillna(v)`.

`refiltered`: a frame replaced by one group's rows, then filtered for another group (no rewrite: the note says to
keep the frame whole and filter into new names).
"""

from __future__ import annotations

import ast

_BIT = (ast.BitAnd, ast.BitOr)
#: statements whose bodies are looked into instead (their own tests are no row filters)
_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.AsyncFor, ast.While, ast.If, ast.With,
             ast.AsyncWith, ast.Try)
#: statements shown at most: the note is about the slip, not a copy of the cell
MAX_SHOWN = 2
#: in-place fills shown at most (a preprocessing cell fills several columns, and each one left out stays unfilled)
MAX_ASSIGNED = 4


def _joined(parts: list[ast.expr], ops: list[ast.operator]) -> ast.expr:
    out = parts[0]
    for op, part in zip(ops, parts[1:], strict=True):
        out = ast.BinOp(left=out, op=op, right=part)
    return out


class _Parenthesize(ast.NodeTransformer):
    def __init__(self) -> None:
        self.changed = False
        self._in_subscript = 0

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        """Split a chain whose inner operand is `L & R` (or `|`) into `(… L) & (R …)`."""
        self.generic_visit(node)
        inner = [i for i, c in enumerate(node.comparators) if isinstance(c, ast.BinOp) and isinstance(c.op, _BIT)]
        if not inner:
            return node
        parts: list[ast.expr] = []
        ops: list[ast.operator] = []
        left, chain_ops, chain = node.left, [], []
        for op, comp in zip(node.ops, node.comparators, strict=True):
            if isinstance(comp, ast.BinOp) and isinstance(comp.op, _BIT):
                parts.append(ast.Compare(left=left, ops=[*chain_ops, op], comparators=[*chain, comp.left]))
                ops.append(comp.op)
                left, chain_ops, chain = comp.right, [], []
            else:
                chain_ops.append(op)
                chain.append(comp)
        parts.append(ast.Compare(left=left, ops=chain_ops, comparators=chain) if chain_ops else left)
        self.changed = True
        return _joined(parts, ops)

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        self._in_subscript += 1
        try:
            self.generic_visit(node)
        finally:
            self._in_subscript -= 1
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        """`a > 1 and b == 2` inside `df[...]` or `.loc[...]`: the element-wise `&` (`or`: `|`)."""
        self.generic_visit(node)
        if not self._in_subscript or not all(isinstance(v, ast.Compare) for v in node.values):
            return node
        self.changed = True
        op = ast.BitAnd() if isinstance(node.op, ast.And) else ast.BitOr()
        return _joined(list(node.values), [op] * (len(node.values) - 1))


def parenthesized(code: str) -> list[str]:
    """The cell's statements that combine conditions without parentheses (or with `and`/`or` inside a
    subscript), each rewritten as pandas wants it; at most MAX_SHOWN, [] when none or the cell does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    out: list[str] = []
    simple = sorted((n for n in ast.walk(tree) if isinstance(n, ast.stmt) and not isinstance(n, _COMPOUND)),
                    key=lambda n: (n.lineno, n.col_offset))  # in the order the cell writes them
    for stmt in simple:
        fixer = _Parenthesize()
        fixed = fixer.visit(ast.parse(ast.unparse(stmt)).body[0])
        if fixer.changed:
            line = ast.unparse(ast.fix_missing_locations(fixed))
            if line not in out:
                out.append(line)
        if len(out) >= MAX_SHOWN:
            break
    return out


def _column_target(node: ast.expr) -> ast.expr | None:
    """`df["col"]` for `df["col"]` or `df.col` (an attribute would set no column), else None."""
    if isinstance(node, ast.Subscript):
        return node
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return ast.Subscript(value=node.value, slice=ast.Constant(node.attr), ctx=ast.Load())
    return None


def assigned_back(code: str) -> list[str]:
    """The cell's statements `X[col].method(..., inplace=True)` rewritten as `X[col] = X[col].method(...)`; at most
    MAX_ASSIGNED, [] when none or the cell does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    out: list[str] = []
    for stmt in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Expr)), key=lambda n: n.lineno):
        call = stmt.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
            continue
        inplace = [k for k in call.keywords if k.arg == "inplace" and isinstance(k.value, ast.Constant)
                   and k.value.value is True]
        column = _column_target(call.func.value)
        if not inplace or column is None:
            continue
        value = ast.Call(func=ast.Attribute(value=column, attr=call.func.attr, ctx=ast.Load()), args=call.args,
                         keywords=[k for k in call.keywords if k.arg != "inplace"])
        target = ast.Subscript(value=column.value, slice=column.slice, ctx=ast.Store())
        line = ast.unparse(ast.fix_missing_locations(ast.Assign(targets=[target], value=value, lineno=0)))
        if line not in out:
            out.append(line)
        if len(out) >= MAX_ASSIGNED:
            break
    return out


def _column_of(frame: str, node: ast.expr | None) -> str | None:
    """The column name of `frame["col"]` / `frame.col`, else None."""
    column = _column_target(node) if node is not None else None
    if (column is not None and isinstance(column.value, ast.Name) and column.value.id == frame
            and isinstance(column.slice, ast.Constant) and isinstance(column.slice.value, str)):
        return column.slice.value
    return None


def _group_tests(frame: str, node: ast.AST) -> list[tuple[str, bool, object]]:
    """(column, equal?, value) for each test of one column against one constant in the row filters `frame[...]`
    inside `node`: `frame["col"] == v` (True), `frame.col != v` (False), `frame["col"].isin([v])` (True)."""
    out: list[tuple[str, bool, object]] = []
    for sub in ast.walk(node):
        if not (isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id == frame):
            continue
        for part in ast.walk(sub.slice):
            if (isinstance(part, ast.Compare) and len(part.ops) == 1 and isinstance(part.ops[0], (ast.Eq, ast.NotEq))
                    and isinstance(part.comparators[0], ast.Constant)
                    and (col := _column_of(frame, part.left)) is not None):
                out.append((col, isinstance(part.ops[0], ast.Eq), part.comparators[0].value))
            elif (isinstance(part, ast.Call) and isinstance(part.func, ast.Attribute) and part.func.attr == "isin"
                  and len(part.args) == 1 and isinstance(part.args[0], (ast.List, ast.Tuple, ast.Set))
                  and len(part.args[0].elts) == 1 and isinstance(part.args[0].elts[0], ast.Constant)
                  and (col := _column_of(frame, part.func.value)) is not None):
                out.append((col, True, part.args[0].elts[0].value))
    return out


def refiltered(code: str) -> tuple[str, str] | None:
    """(frame, column) when the cell replaces a frame by the rows of one group (`df = df[df["type"] == "XL"]`, no
    `|` in the filter) and a later statement filters that frame for another group of the same column (`== "ECO"`,
    or `!= "XL"`): the second group is looked for among the first group's rows and comes out empty (generated-v1
    at eb32daa: a nan gap, and `df` stayed cut for every later cell). A frame first cut to several groups or a
    date window, then split, is fine and not flagged. None otherwise, or when the cell does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    kept: dict[str, dict[str, object]] = {}  # frame → {column: the one value its rows keep}
    for stmt in tree.body:
        for frame, groups in kept.items():
            for col, equal, value in _group_tests(frame, stmt):
                if col in groups and (equal != (value == groups[col])):
                    return frame, col
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Subscript) and isinstance(stmt.value.value, ast.Name)
                and stmt.value.value.id == stmt.targets[0].id
                and not any(isinstance(n, (ast.BitOr, ast.Or)) for n in ast.walk(stmt.value.slice))):
            frame = stmt.targets[0].id
            kept.setdefault(frame, {}).update({col: value for col, equal, value in _group_tests(frame, stmt.value)
                                               if equal})
    return None
