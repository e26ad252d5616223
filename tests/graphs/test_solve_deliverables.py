"""A report is graded on what the solver leaves in its workspace, as the packaged verifier grades it: the
in-process solver reads those files before its sandbox closes and the grade sees them."""

from __future__ import annotations

import json
from pathlib import Path

from worldsmith.core.runs import RunDir
from worldsmith.core.schemas import AnswerSpec, Criterion, DeliverableSpec, Provenance, Rubric, Task
from worldsmith.core.taskpkg import workspace_ref
from worldsmith.graphs.solve import TaskSolver
from worldsmith.training.evaluate import evaluate

SALES = "region,amount\nnorth,10\nnorth,30\nsouth,70\n"


def _report_task(ws: Path) -> Task:
    rubric = Rubric(criteria=[Criterion(id="south", section="computation", observable="south total",
                                        satisfy="states the south region's total amount", expected_value=70.0)])
    return Task(id="rep", kind="report", instruction="Write a Markdown report (`answer.md`) with the south "
                "region's total amount.", workspace=workspace_ref(ws), provenance=Provenance(source="manual"),
                deliverable=DeliverableSpec(format="markdown", filename="answer.md"),
                rubric=rubric)


async def test_a_report_written_to_a_file_is_recorded_and_graded(scripted, tmp_path: Path) -> None:
    script, make_rt = scripted
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "sales.csv").write_text(SALES)

    def respond(req):
        if "<interpreter>" in req.last_user:
            return "<think>Saved.</think><answer>The report is in answer.md.</answer>"
        return ("<think>Sum the south rows and write the report.</think><code>\n"
                "df = pd.read_csv('sales.csv')\nt = df[df.region == 'south'].amount.sum()\n"
                "open('answer.md', 'w').write(f'# South\\nThe south total amount is {t}.\\n')\n"
                "print(t)\n</code>")

    script.fallback(respond)
    rt = make_rt(analyst={"format_retries": 0})
    task = _report_task(ws)
    report = await evaluate([task], TaskSolver(rt), samples=1, run_dir=RunDir.create("eval", tmp_path / "runs"))
    await rt.sessions.close_all()
    sample = report.tasks[0].samples[0]
    saved = json.loads((tmp_path / "runs").glob("*/trajectories/rep/0.json").__next__().read_text())
    # the file the model wrote, read back; the task's own data file is not the solver's and is not read
    assert saved["deliverables"] == {"answer.md": "# South\nThe south total amount is 70.\n"}
    assert saved["final_answer"] == "The report is in answer.md."
    # graded on the file as well as the message: the message alone states no number
    assert sample.passed and sample.score == 1.0


async def test_a_closed_form_task_reads_no_files(scripted, tmp_path: Path) -> None:
    script, make_rt = scripted
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "sales.csv").write_text(SALES)
    script.fallback(lambda req: "<think>Done.</think><answer>@t[70]</answer>" if "<interpreter>" in req.last_user
                    else "<think>Sum.</think><code>\ndf = pd.read_csv('sales.csv')\n"
                         "open('notes.md', 'w').write('t = 70')\nprint(df.amount.sum())\n</code>")
    rt = make_rt(analyst={"format_retries": 0})
    task = Task(id="cf", kind="closed_form", instruction="The total amount? Answer as @t[value].",
                workspace=workspace_ref(ws), provenance=Provenance(source="manual"),
                answers=[AnswerSpec(name="t", value=110.0)],
                deliverable=DeliverableSpec(format="answer_tags", answer_names=["t"]))
    traj = await TaskSolver(rt)(task)
    await rt.sessions.close_all()
    assert traj.final_answer == "@t[70]" and traj.deliverables == {}
