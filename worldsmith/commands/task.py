"""`worldsmith task grade DIR --response FILE [--workspace DIR] [--reward FILE] [--json]`: grade a response the
way the package's own verifier does.

Closed form: core/grading.py (the package's grade.py). Report: core/rubric_grading.py (the package's
grade_report.py) for the deterministic items, then a judge for the rest: the configured `llm.roles.judge` when
there is one, else the endpoint named by WORLDSMITH_JUDGE_BASE_URL/_MODEL/_API_KEY (as in the container), else
none, and the result lists the items it could not grade. Exit 0 passed, 1 not passed, 2 bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

import worldsmith.prompts
from worldsmith.commands.common import EXIT_USAGE, STATE, console, emit_json, fail
from worldsmith.core import grading
from worldsmith.core import rubric_grading as rg
from worldsmith.core.schemas import Task
from worldsmith.core.store import ArtifactError
from worldsmith.core.taskpkg import read_task_package

app = typer.Typer(help="Work with task packages.", no_args_is_help=True)
_PROMPTS_DIR = Path(worldsmith.prompts.__file__).parent  # the judge templates packages ship


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="task")


def grade_package(task: Task, response: Path, workspace: Path | None, judge: rg.Judge | None) -> dict[str, Any]:
    """The verdict dict the package's verifier prints (`score`, `passed`, `items`, and `ungraded` for reports)."""
    if task.kind == "closed_form":
        text = response.read_text(encoding="utf-8") if response.is_file() else ""
        rule = "official" if task.metadata.get("strict_grading") else "tolerant"
        return grading.grade([a.model_dump(exclude_none=True) for a in task.answers], text, rule=rule)
    assert task.rubric is not None
    text = rg.read_deliverable(response, workspace, [f.path for f in task.workspace.files])
    criteria = [c.model_dump(mode="json") for c in task.rubric.criteria]
    return rg.grade_rubric(criteria, text, judge=judge, instruction=task.instruction)


def _role_judge() -> rg.Judge | None:
    """The configured judge role through worldsmith's LLM layer, as a synchronous `rg.Judge`."""
    settings = STATE.settings()
    if "judge" not in settings.llm.roles:
        return None
    from worldsmith.commands.common import runtime
    from worldsmith.core.schemas import Criterion
    from worldsmith.llm.errors import LLMError
    from worldsmith.training.judge import judge as llm_judge

    llm = runtime().llm

    def call(criteria, text, instruction):
        try:
            verdicts = llm_judge(llm, [Criterion.model_validate(c) for c in criteria], text, instruction)
        except (LLMError, ValueError) as exc:  # as training/graders.py: the judged items stay ungraded
            raise rg.JudgeError(f"llm.roles.judge: {type(exc).__name__}: {exc}") from exc
        return {k: {"met": v.met, "evidence": v.evidence} for k, v in verdicts.items()}

    return call


@app.command("grade")
def grade_cmd(
    package: Annotated[Path, typer.Argument(help="Task package folder (with task.json).")],
    response: Annotated[Path, typer.Option("--response", help="The answer file (closed form: @name[value] tags).")],
    workspace: Annotated[Optional[Path], typer.Option(
        help="Report tasks: the solver's workspace, whose text files count as the deliverable "
             "(default: the response's folder).")] = None,
    reward: Annotated[Optional[Path], typer.Option(help="Also write the score here (as reward.txt).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Grade RESPONSE against the package's expected answers or rubric, as its tests/test.sh would."""
    try:
        task = read_task_package(package, verify=False)
    except (ArtifactError, OSError) as exc:
        fail(f"{package}: not a task package: {exc}", EXIT_USAGE)
    if not response.is_file() and task.kind == "closed_form":
        fail(f"{response}: response file does not exist", EXIT_USAGE)
    judge = (_role_judge() or rg.judge_from_env(_PROMPTS_DIR)) if task.kind == "report" else None
    result = grade_package(task, response, workspace or response.parent, judge)
    if reward is not None:
        reward.parent.mkdir(parents=True, exist_ok=True)
        reward.write_text(f"{result['score']:.6f}\n", encoding="utf-8")
    if json_out:
        emit_json({"task": task.id, "kind": task.kind, **result})
    else:
        _print(task, result)
    raise typer.Exit(0 if result["passed"] else 1)


def _print(task: Task, result: dict[str, Any]) -> None:
    console.print(f"[bold]{escape(task.id)}[/bold] ({task.kind}): score {result['score']:.3f}, "
                  f"{'passed' if result['passed'] else 'not passed'}")
    for item in result["items"]:
        if task.kind == "closed_form":
            mark = "ok" if item["correct"] else "--"
            console.print(f"  {mark} @{escape(item['name'])}: got {escape(str(item['got']))}, "
                          f"expected {escape(str(item['expected']))}", highlight=False)
        else:
            mark = {True: "met", False: "not met", None: "ungraded"}[item["met"]]
            console.print(f"  {mark:>8} {escape(item['id'])} [{item['method']}] {escape(item['evidence'])}",
                          highlight=False)
    if result.get("note"):
        console.print(escape(result["note"]), highlight=False)

