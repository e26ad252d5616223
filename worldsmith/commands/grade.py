"""`worldsmith grade RESPONSES.jsonl [--rule official|tolerant] [--json]`: score other systems' outputs with our rules.

Each line is `{"label": [[name, value], …], "response": "…"}` (the golden grading table's shape; other keys such
as `id` are kept for display and otherwise ignored). Prints each answer's verdict and DABench's three accuracies
under the official denominators (empty responses left out) and the conservative ones (empty = wrong).
Exit 0 when the file was graded, 2 when it cannot be read or a line is malformed (the message names the line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from worldsmith.commands.common import EXIT_USAGE, console, emit_json, fail
from worldsmith.core.grading import Outcome, dabench_accuracies, grade_label
from worldsmith.core.store import ArtifactError, read_jsonl_lines

RULES = ("official", "tolerant")


def register(root: typer.Typer) -> None:
    root.command("grade")(grade_cmd)


def read_responses(path: Path) -> list[dict[str, Any]]:
    """The lines of a responses file, checked; the error names the file and line of the first bad one."""
    rows = []
    for lineno, rec in read_jsonl_lines(path):
        label = rec.get("label") if isinstance(rec, dict) else None
        if not isinstance(label, list) or not label or not all(
                isinstance(p, (list, tuple)) and len(p) == 2 and isinstance(p[0], str) for p in label):
            raise ValueError(f'{path}:{lineno}: expected {{"label": [[name, value], ...], "response": "..."}}; '
                             "'label' must be a non-empty list of [name, value] pairs")
        response = rec.get("response")
        if response is not None and not isinstance(response, str):
            raise ValueError(f"{path}:{lineno}: 'response' must be a string (or null), got {type(response).__name__}")
        rows.append({"line": lineno, **rec})
    return rows


def grade_rows(rows: list[dict[str, Any]], rule: str) -> dict[str, Any]:
    """Per-line verdicts and the accuracies under both denominators."""
    graded = []
    for row in rows:
        result = grade_label(row["label"], row.get("response"), rule)
        graded.append({"line": row["line"], "id": row.get("id", row.get("case")), "empty": result["empty"],
                       "score": result["score"], "passed": result["passed"],
                       "items": [{k: i[k] for k in ("name", "expected", "got", "correct")} for i in result["items"]]})
    accuracies = dabench_accuracies(
        Outcome(sum(i["correct"] for i in g["items"]), len(g["items"]), g["empty"]) for g in graded)
    return {"rule": rule, "n": len(graded), "n_empty": sum(g["empty"] for g in graded), "accuracies": accuracies,
            "responses": graded}


def grade_cmd(
    responses: Annotated[Path, typer.Argument(
        help='JSONL file of {"label": [[name, value], ...], "response": "..."}.')],
    rule: Annotated[str, typer.Option("--rule", help="official (InfiAgent-DABench's rule) or tolerant.")] = "official",
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Grade a file of responses with worldsmith's comparators and print each answer's verdict."""
    if rule not in RULES:
        fail(f"--rule must be official or tolerant, got {rule!r}", code=EXIT_USAGE)
    if not responses.is_file():
        fail(f"{responses}: no such file", code=EXIT_USAGE)
    try:
        rows = read_responses(responses)
    except (ArtifactError, ValueError, UnicodeDecodeError) as exc:
        fail(escape(str(exc)), code=EXIT_USAGE)  # the message shows [[name, value]]: not rich markup
    result = grade_rows(rows, rule)
    if json_out:
        emit_json(result)
        return
    for g in result["responses"]:
        who = f"line {g['line']}" + (f" ({g['id']})" if g["id"] is not None else "")
        verdicts = ", ".join(f"{i['name']}: {'right' if i['correct'] else 'wrong'}" for i in g["items"])
        console.print(f"{who}: {verdicts}" + (" [empty response]" if g["empty"] else ""), highlight=False,
                      markup=False)
    off, con = result["accuracies"]["official"], result["accuracies"]["conservative"]
    console.print(f"\n{result['n']} responses ({result['n_empty']} empty), rule {rule}", highlight=False)
    console.print("                        official  conservative", highlight=False)
    for key, label in (("by_question", "accuracy by question"), ("by_sub_question", "accuracy by sub-question"),
                       ("proportional", "proportional accuracy")):
        console.print(f"{label:<24}{off[key]:>8.2%}  {con[key]:>12.2%}", highlight=False)
    console.print(f"{'questions counted':<24}{off['n']:>8}  {con['n']:>12}", highlight=False)
