"""The web UI's thread service without a browser: uploads, follow-ups, and a thread that survives a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ui.conftest import ANSWER_TURN, CODE_TURN, FOLLOWUP_ANSWER, FOLLOWUP_CODE
from worldsmith.ui.web_threads import ChatService, UploadError


async def _events(svc: ChatService, thread, question: str) -> list[dict]:
    return [e async for e in svc.ask(thread, question)]


async def test_thread_survives_a_server_restart(scripted_settings, sales_csv: Path) -> None:
    script, settings = scripted_settings
    script.queue(CODE_TURN, ANSWER_TURN)
    svc = ChatService(settings)
    thread = svc.new_thread([str(sales_csv)])
    copy = Path(settings.runs_dir).resolve() / "web" / "uploads" / thread.id / "sales.csv"
    assert thread.files == [str(copy)] and copy.read_text() == sales_csv.read_text()
    try:
        events = await _events(svc, thread, "What is the mean amount?")
    finally:
        await svc.aclose()
    outputs = [e for e in events if e["type"] == "output"]
    assert outputs and outputs[0]["ok"] and outputs[0]["text"].strip() == "20.0"
    assert events[-1] == {"type": "answer", "text": "The mean amount is 20. @mean_amount[20]", "status": "answered"}

    # A new service over the same runs_dir = a restarted server. The follow-up uses `df` from the first
    # question: it only works if the checkpoint came back and the sandbox replayed the earlier cell.
    script.queue(FOLLOWUP_CODE, FOLLOWUP_ANSWER)
    svc2 = ChatService(settings)
    reopened = svc2.load(thread.id)
    assert reopened is not None and reopened.files == thread.files
    try:
        events = await _events(svc2, reopened, "And seven times the maximum?")
    finally:
        await svc2.aclose()
    outputs = [e for e in events if e["type"] == "output"]
    assert outputs and outputs[0]["ok"], outputs
    assert outputs[0]["text"].strip() == "210"
    followup_prompt = script.requests[-2].text
    assert "What is the mean amount?" in followup_prompt and "And seven times the maximum?" in followup_prompt


def test_bad_uploads_are_refused_with_the_file_and_reason(scripted_settings, tmp_path: Path) -> None:
    _, settings = scripted_settings
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(b"%PDF-1.4")
    svc = ChatService(settings)
    with pytest.raises(UploadError) as err:
        svc.new_thread([str(empty), str(pdf)])
    text = str(err.value)
    assert "`empty.csv`: the file is empty" in text
    assert "`report.pdf`: unsupported file type" in text and ".parquet" in text
    assert not (Path(settings.runs_dir).resolve() / "web" / "uploads").exists()  # nothing half-copied


def test_thread_ids_from_urls_are_validated(scripted_settings) -> None:
    _, settings = scripted_settings
    svc = ChatService(settings)
    for bad in ("../../etc/passwd", "", "ABCDEF123456", "0123456789abc"):
        assert svc.load(bad) is None
    thread = svc.new_thread([])
    assert svc.load(thread.id) == thread
