"""Writes a world's tasks (template requests) into a pipeline folder; run as a script so a test can kill -9 it.

    python -m tests.worldtasks.tasks_script WORLD_DIR TASKS_DIR STORAGE_DIR RUNS_DIR
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from worldsmith.core.config import load_settings
from worldsmith.graphs.runtime import GraphRuntime, SandboxSessions
from worldsmith.graphs.world import write_world_tasks


def runtime(runs_dir: Path) -> GraphRuntime:
    settings = load_settings(overrides={"runs_dir": str(runs_dir), "world": {"concurrency": 1}})
    return GraphRuntime(settings=settings, llm=None, sessions=SandboxSessions(settings))


async def main(world: Path, tasks: Path, storage: Path, runs: Path) -> tuple[list[str], list[dict]]:
    return await write_world_tasks(runtime(runs), storage, world, tasks, max_tasks=4, seed=1, use_llm=False,
                                   on_event=lambda e: None)


if __name__ == "__main__":
    asyncio.run(main(*(Path(a) for a in sys.argv[1:5])))
