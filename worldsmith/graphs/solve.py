"""Solve a Task with the analyst graph: the solver that evaluation, synthesis and rollouts share."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from worldsmith.core.schemas import Task, Trajectory
from worldsmith.graphs.analyst import build_analyst_graph, initial_state
from worldsmith.graphs.runtime import GraphRuntime


def task_files(task: Task) -> list[Path]:
    """The sandbox inputs of a task: its workspace's top-level entries, so the solver's working directory
    mirrors the workspace (files at the root, sub-folders such as memos/ as folders)."""
    if not task.workspace.root:
        raise ValueError(f"task {task.id}: its workspace has no root folder on disk (read it from a task package)")
    root = Path(task.workspace.root)
    tops = dict.fromkeys(f.path.split("/", 1)[0] for f in task.workspace.files)
    return [root / t for t in tops]


class TaskSolver:
    """`await solver(task, sample_index) -> Trajectory`; one fresh sandbox per trajectory."""

    def __init__(self, rt: GraphRuntime, temperature: float | None = None, *, postprocess: bool | None = None,
                 greedy_first: bool = False):
        """`postprocess=False` for trajectories that become training data (graded on the model's raw answer);
        None follows the analyst.postprocess setting. `greedy_first`: sample 0 decodes greedily whatever
        `temperature` is (the later samples use it)."""
        self.rt = rt
        self.graph = build_analyst_graph()
        self.temperature = temperature
        self.postprocess = postprocess
        self.greedy_first = greedy_first

    def temperature_for(self, sample_index: int) -> float | None:
        """The decoding temperature of one sample (None: the endpoint's own temperature, what a one-sample eval
        decodes with — greedy on the default configuration)."""
        if sample_index == 0 and self.greedy_first:
            return None
        return self.temperature if sample_index or self.temperature else None

    async def __call__(self, task: Task, sample_index: int = 0) -> Trajectory:
        session = f"{task.id}-{sample_index}-{uuid.uuid4().hex[:6]}"
        state = initial_state(task.instruction, [str(p) for p in task_files(task)], task_id=task.id,
                              answer_names=task.deliverable.answer_names or None,
                              categories=[task.category, *task.tags] if task.category else task.tags,
                              sample_index=sample_index,
                              temperature=self.temperature_for(sample_index),
                              session_id=session, postprocess=self.postprocess)
        try:
            out: dict[str, Any] = await self.graph.ainvoke(
                state, {"recursion_limit": 8 * self.rt.settings.analyst.max_turns + 20}, context=self.rt)
            traj = Trajectory.model_validate(out["trajectory"])
            if task.kind != "closed_form":  # a report is graded on the files it left too, as its verifier does
                traj.deliverables = await self.rt.sessions.deliverables(session)
        finally:
            await self.rt.sessions.close(session)
        return traj
