"""Operators and pipelines: bindings checked before anything runs, registry search, concurrency, export."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.core.pipeline_kit import AddOne, AskModel, Double, KeepEven, doubling_pipeline
from worldsmith.core.export import export_rows, from_dataset, import_rows, to_dataset
from worldsmith.core.operators import BindingError, RowOperator, find_operators
from worldsmith.core.pipeline import Pipeline, PipelineCompileError
from worldsmith.core.storage import StepStorage
from worldsmith.core.store import ArtifactError


class NoCallLLM:
    """A model that fails the test if anything calls it."""

    async def acomplete(self, *a: Any, **k: Any) -> str:
        pytest.fail("the model was called, but compile must not call any model")


def test_compile_lists_every_problem_before_any_model_call() -> None:
    pipe = (Pipeline("broken")
            .add(AskModel(NoCallLLM()), input_question_key="prompt", output_answer_key="n")   # no 'prompt'; clobbers n
            .add(AskModel(None), input_question_key="n")                                     # model not set
            .add(Double(), input_x_key="twice")                                              # 'twice' never produced
            .add(AddOne(), input_why_key="y"))                                               # no such binding
    with pytest.raises(PipelineCompileError) as info:
        pipe.compile(initial_keys={"n"})
    msg = str(info.value)
    assert len(info.value.problems) == 5, msg
    assert "step 1 (test_ask_model): input question='prompt': no such column; available: n" in msg
    assert "step 1 (test_ask_model): output answer='n': would overwrite an existing column" in msg
    assert "step 2 (test_ask_model): llm: required parameter is not set" in msg
    assert "step 3 (test_double): input x='twice': no such column; available: answer, n" in msg
    assert "step 4 (test_add_one): binding: no binding 'input_why_key'; it takes input_y_key, output_z_key" in msg


def test_a_step_may_refine_a_column_it_reads_and_later_steps_see_outputs() -> None:
    class Clip(RowOperator):
        name, category, description = "clip", "refine", "clip"
        inputs, outputs = ("v",), ("v",)

        async def process(self, v: dict[str, Any], storage: StepStorage) -> dict[str, Any]:
            return {"v": min(v["v"], 3)}

    pipe = Pipeline("ok").add(Double(), input_x_key="n", output_y_key="m").add(Clip(), input_v_key="m",
                                                                              output_v_key="m")
    assert pipe.compile({"n"}) is pipe


def test_operator_runs_standalone_on_storage_with_bound_keys(tmp_path: Path) -> None:
    storage = StepStorage(tmp_path / "s")
    storage.seed([{"n": 1}, {"n": 2}, {"n": 3}])
    assert Double().run(storage, input_x_key="n", output_y_key="m") == [{"n": 1, "m": 2}, {"n": 2, "m": 4},
                                                                          {"n": 3, "m": 6}]
    assert KeepEven().run(storage, input_x_key="m") == [{"n": 1, "m": 2}, {"n": 2, "m": 4}, {"n": 3, "m": 6}]
    assert KeepEven().run(storage, input_x_key="n") == [{"n": 2, "m": 4}]
    assert storage.rows("test_double") == [{"n": 1, "m": 2}, {"n": 2, "m": 4}, {"n": 3, "m": 6}]
    with pytest.raises(BindingError, match="input_x_key"):
        Double().run(storage, input_n_key="n")


def test_a_finished_run_is_not_redone_and_a_different_input_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    rows = doubling_pipeline(log=log).run(StepStorage(tmp_path / "s"), [{"n": i} for i in range(4)])
    assert rows == [{"n": i, "twice": 2 * i, "plus_one": 2 * i + 1} for i in range(4)]
    assert doubling_pipeline(log=log).resume(StepStorage(tmp_path / "s")) == rows
    assert len(log.read_text().split()) == 4  # resuming a finished run computes nothing again
    with pytest.raises(ArtifactError, match="other input rows"):
        doubling_pipeline().run(StepStorage(tmp_path / "s"), [{"n": 9}])
    with pytest.raises(ArtifactError, match="another pipeline"):
        Pipeline("other").add(Double(), input_x_key="n").run(StepStorage(tmp_path / "s"), [{"n": 1}])


def test_concurrency_limit_is_respected() -> None:
    class Slow(RowOperator):
        name, category, description = "slow", "generate", "slow"
        inputs, outputs = ("n",), ("m",)
        concurrency = 3
        running = peak = 0

        async def process(self, v: dict[str, Any], storage: StepStorage) -> dict[str, Any]:
            Slow.running += 1
            Slow.peak = max(Slow.peak, Slow.running)
            await asyncio.sleep(0.02)
            Slow.running -= 1
            return {"m": v["n"]}

    async def go(tmp: Path) -> list[dict[str, Any]]:
        return await Pipeline("slow").add(Slow()).arun(StepStorage(tmp), [{"n": i} for i in range(12)])

    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        rows = asyncio.run(go(Path(tmp)))
    assert [r["m"] for r in rows] == list(range(12)) and Slow.peak == 3


def test_registry_finds_operators_by_description() -> None:
    assert find_operators("multiply numbers by two")[0] is Double
    assert find_operators("drop odd rows", category="filter") == [KeepEven]
    import worldsmith.graphs.world_ops  # noqa: F401  (registers the world operators)

    assert find_operators("verify reference solution in a sandbox")[0].name == "verify_solutions"
    assert find_operators("zzz qqq") == []


ROWS = [{"id": 1, "text": "a", "score": 0.5, "meta": {"k": [1, 2]}, "tags": ["x", "y"], "note": None},
        {"id": 2, "text": "b", "score": None, "meta": {"k": []}, "tags": [], "note": "n"}]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_export_round_trips(tmp_path: Path, suffix: str) -> None:
    path = export_rows(ROWS, tmp_path / f"rows{suffix}")
    assert import_rows(path) == ROWS


def test_export_to_a_hugging_face_dataset() -> None:
    pytest.importorskip("datasets")
    ds = to_dataset(ROWS)
    assert ds.num_rows == 2 and set(ds.column_names) == set(ROWS[0])
    assert from_dataset(ds) == ROWS


def test_a_row_with_undeclared_outputs_fails_loudly(tmp_path: Path) -> None:
    class Sloppy(RowOperator):
        name, category, description = "sloppy", "generate", "sloppy"
        inputs, outputs = ("n",), ("m",)

        async def process(self, v: dict[str, Any], storage: StepStorage) -> dict[str, Any]:
            return {"m": 1, "extra": 2}

    with pytest.raises(ValueError, match=r"sloppy: row 0 gave outputs \['extra', 'm'\], declared \['m'\]"):
        Pipeline("sloppy").add(Sloppy()).run(StepStorage(tmp_path), [{"n": 1}])
