"""Small operators for the pipeline tests, and a script that runs them (so a test can kill -9 it mid-step).

    python -m tests.core.pipeline_kit STORAGE_DIR ROWS DELAY_S   # runs double → add_one, logging each call
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from worldsmith.core.operators import RowOperator, register_operator
from worldsmith.core.pipeline import Pipeline
from worldsmith.core.storage import StepStorage


@register_operator
class Double(RowOperator):
    name = "test_double"
    category = "generate"
    description = "Test operator: multiply a number by two (slowly), logging every call."
    inputs = ("x",)
    outputs = ("y",)

    def __init__(self, delay_s: float = 0.0, log: Path | None = None, concurrency: int = 1):
        self.delay_s, self.log, self.concurrency = delay_s, log, concurrency

    async def process(self, v: dict[str, Any], storage: StepStorage) -> dict[str, Any]:
        await asyncio.sleep(self.delay_s)
        if self.log is not None:
            with open(self.log, "a", encoding="utf-8") as fh:
                fh.write(f"{v['x']}\n")
        return {"y": 2 * v["x"]}


@register_operator
class AddOne(RowOperator):
    name = "test_add_one"
    category = "refine"
    description = "Test operator: add one to a number."
    inputs = ("y",)
    outputs = ("z",)

    async def process(self, v: dict[str, Any], storage: StepStorage) -> dict[str, Any]:
        return {"z": v["y"] + 1}


@register_operator
class KeepEven(RowOperator):
    name = "test_keep_even"
    category = "filter"
    description = "Test operator: drop rows whose number is odd."
    inputs = ("x",)
    outputs = ()

    async def process(self, v: dict[str, Any], storage: StepStorage) -> dict[str, Any] | None:
        return {} if v["x"] % 2 == 0 else None


@register_operator
class AskModel(RowOperator):
    name = "test_ask_model"
    category = "generate"
    description = "Test operator: ask a language model a question about each row."
    inputs = ("question",)
    outputs = ("answer",)
    required = ("llm",)

    def __init__(self, llm: Any | None):
        self.llm = llm

    async def process(self, v: dict[str, Any], storage: StepStorage) -> dict[str, Any]:
        return {"answer": await self.llm.acomplete(v["question"])}


def doubling_pipeline(delay_s: float = 0.0, log: Path | None = None) -> Pipeline:
    return (Pipeline("doubling").add(Double(delay_s, log, concurrency=2), input_x_key="n", output_y_key="twice")
            .add(AddOne(), input_y_key="twice", output_z_key="plus_one"))


if __name__ == "__main__":
    root, n, delay = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    pipe = doubling_pipeline(delay, root.parent / "calls.log")
    rows = None if (root / "steps").is_dir() else [{"n": i} for i in range(n)]
    print(os.getpid(), flush=True)
    pipe.run(StepStorage(root), rows)
