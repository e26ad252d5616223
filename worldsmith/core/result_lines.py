"""A script's labelled number prints rewritten as `RESULT name = value` lines.

The executor's contract is that a script prints each key result as `RESULT <name> = <number>`. The 1.5B model
often computes the right numbers and prints them its own way — `print("basket_size_amount_corr:", r)`,
`print(f"segment {segment} = {mean:.2f}")` — then, told to use RESULT lines, rewrites the same script or
answers in prose (v13: two of the dual-evidence solvers that failed had printed the right numbers). The prints
of a label and one value (or of a label alone and, on the next line, one value) are rewritten here, by syntax,
into RESULT prints of the same expression at full precision (a Series or a two-column table of labels and values
one line per row: `HELPER`, put at the top); the caller re-runs the script and keeps the rewrite only when it
printed RESULT lines. Nothing is guessed from the output: a rewritten line prints whatever the model's expression
computes.
"""

from __future__ import annotations

import ast
import re

#: the label's own separator before the value: "name:" or "name ="
_SEP = re.compile(r"\s*[:=]\s*$")


def _name_text(text: str) -> str:
    """A label's literal text as a RESULT name part: words joined by underscores."""
    return re.sub(r"\W+", "_", text)


def _name_part(value: ast.expr) -> ast.expr:
    """A formatted part of a label (`segment` in f"segment {segment} = …"), as the name part it prints:
    `str(segment).replace(' ', '_')`."""
    as_text = ast.Call(func=ast.Name(id="str", ctx=ast.Load()), args=[value], keywords=[])
    return ast.Call(func=ast.Attribute(value=as_text, attr="replace", ctx=ast.Load()),
                    args=[ast.Constant(" "), ast.Constant("_")], keywords=[])


#: put at the top of a rewritten script: a labelled value printed as RESULT lines, a table one line per row
HELPER = '''def _result_lines(name, value):
    """(worldsmith) RESULT lines of a labelled value: one per row of a Series, or of a two-column table of labels
    and values; else one line."""
    columns = list(getattr(value, "columns", []))
    if len(columns) == 1:
        value = value[columns[0]]
    elif len(columns) == 2 and value[columns[0]].dtype.kind not in "biufc":
        value = value.set_index(columns[0])[columns[1]]
    if hasattr(value, "index") and hasattr(value, "items") and not hasattr(value, "columns"):
        for key, item in value.items():
            print(f"RESULT {name}_{str(key).replace(' ', '_')} = {item}")
    else:
        print(f"RESULT {name} = {value}")


'''


def _result_print(name: list[ast.expr], value: ast.expr) -> ast.Call | None:
    """`_result_lines(f"{name}", value)` (`HELPER`), or None when the name has no word in it."""
    parts: list[ast.expr] = []
    for p in name:
        if isinstance(p, ast.Constant):
            text = _name_text(str(p.value))
            if text:
                parts.append(ast.Constant(text))
        else:
            parts.append(ast.FormattedValue(value=_name_part(p), conversion=-1, format_spec=None))
    literal = "".join(p.value for p in parts if isinstance(p, ast.Constant)).strip("_")
    if not literal or not re.match(r"[A-Za-z_]", literal) or literal.startswith("RESULT"):
        return None  # no name, or a RESULT line already
    if isinstance(parts[0], ast.Constant):
        parts[0] = ast.Constant(parts[0].value.lstrip("_"))
    if isinstance(parts[-1], ast.Constant):
        parts[-1] = ast.Constant(parts[-1].value.rstrip("_"))
    body: list[ast.expr] = [p for p in parts if not (isinstance(p, ast.Constant) and not p.value)]
    return ast.Call(func=ast.Name(id="_result_lines", ctx=ast.Load()), args=[ast.JoinedStr(values=body), value],
                    keywords=[])


def _rewritten(call: ast.Call) -> ast.Call | None:
    """The RESULT form of one `print` call of a label and a value, or None for any other print."""
    if not (isinstance(call.func, ast.Name) and call.func.id == "print") or call.keywords:
        return None
    if len(call.args) == 2:  # print("label:", value)
        label, value = call.args
        if isinstance(label, ast.Constant) and isinstance(label.value, str) and _SEP.search(label.value) \
                and not isinstance(value, (ast.Constant, ast.JoinedStr)):
            # "RESULT name =" and a table after it (v15's teacher printed a frame of segment means that way)
            return _result_print([ast.Constant(re.sub(r"^\s*RESULT\b", "", _SEP.sub("", label.value)))], value)
        return None
    if len(call.args) != 1 or not isinstance(call.args[0], ast.JoinedStr):
        return None
    values = call.args[0].values  # f"label {part} = {value}"
    if len(values) < 2 or not isinstance(values[-1], ast.FormattedValue):
        return None
    sep = values[-2]
    if not (isinstance(sep, ast.Constant) and isinstance(sep.value, str) and _SEP.search(sep.value)):
        return None
    name = [*values[:-2], ast.Constant(_SEP.sub("", sep.value))]
    parts = [v.value if isinstance(v, ast.FormattedValue) else v for v in name]
    return _result_print(parts, values[-1].value)


def _print_args(stmt: ast.stmt) -> list[ast.expr] | None:
    """The arguments of a statement that is a bare `print(...)` call without keywords, else None."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name) \
            and stmt.value.func.id == "print" and not stmt.value.keywords:
        return stmt.value.args
    return None


def _label_then_value(a: ast.stmt, b: ast.stmt) -> ast.Call | None:
    """The RESULT print for `print("RESULT r between x and y:")` followed, on the next line, by `print(r)` (v14's
    teacher printed the right r that way three times), or None."""
    first, second = _print_args(a), _print_args(b)
    if first is None or second is None or len(first) != 1 or len(second) != 1 or b.lineno != (a.end_lineno or 0) + 1:
        return None
    label, value = first[0], second[0]
    if not (isinstance(label, ast.Constant) and isinstance(label.value, str) and _SEP.search(label.value)) \
            or isinstance(value, (ast.Constant, ast.JoinedStr)):
        return None
    text = re.sub(r"^\s*RESULT\b", "", _SEP.sub("", label.value))
    return _result_print([ast.Constant(text)], value)


def as_result_lines(script: str) -> tuple[str, int]:
    """(the script with each print of a label and one value as a RESULT print, how many were rewritten). Only
    those calls change; every other character (comments included) stays as written. A script that does not parse,
    or has no such print, comes back as it is with 0."""
    try:
        tree = ast.parse(script)
    except SyntaxError:
        return script, 0
    source = script.encode("utf-8")  # ast offsets count UTF-8 bytes
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.end_lineno is not None and node.end_col_offset is not None \
                and (new := _rewritten(node)) is not None:
            edits.append((starts[node.lineno - 1] + node.col_offset, starts[node.end_lineno - 1] + node.end_col_offset,
                          ast.unparse(ast.fix_missing_locations(new)).encode("utf-8")))
        for field in ("body", "orelse", "finalbody"):  # a label printed, then its value on the next line
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for a, b in zip(block, block[1:]):
                if b.end_lineno is not None and b.end_col_offset is not None \
                        and (new := _label_then_value(a, b)) is not None:
                    edits.append((starts[a.lineno - 1] + a.col_offset,
                                  starts[b.end_lineno - 1] + b.end_col_offset,
                                  ast.unparse(ast.fix_missing_locations(new)).encode("utf-8")))
    for begin, end, text in sorted(edits, reverse=True):  # the spans are disjoint: a pair's prints are no single one
        source = source[:begin] + text + source[end:]
    if edits:  # the helper the rewritten prints call, after any `from __future__` import (those must come first)
        first = next((s for s in tree.body if not (isinstance(s, ast.ImportFrom) and s.module == "__future__")), None)
        at = starts[first.lineno - 1] if first is not None else len(source)
        source = source[:at] + HELPER.encode("utf-8") + source[at:]
    return source.decode("utf-8"), len(edits)
