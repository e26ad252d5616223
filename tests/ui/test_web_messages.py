"""Event → chat message formatting of the web UI (no browser, no Gradio server)."""

from __future__ import annotations

import pytest

from worldsmith.ui.web_messages import (FINAL_ANSWER_HEADING, STOPPED_HEADING, event_to_message, fence, quote,
                                        status_word)


def content(event: dict) -> str:
    msg = event_to_message(event)
    assert msg is not None and msg["role"] == "assistant"
    return msg["content"]


def test_thought_is_a_muted_quote_with_every_line_quoted() -> None:
    text = content({"type": "thought", "text": "Load the data.\n\nThen group by region."})
    assert text.splitlines() == ["> Thought: Load the data.", ">", "> Then group by region."]


def test_code_is_a_python_fence() -> None:
    text = content({"type": "code", "code": "import pandas as pd\nprint(1)"})
    assert text == "**Code**\n\n```python\nimport pandas as pd\nprint(1)\n```"


def test_output_ok_and_error_are_told_apart() -> None:
    ok = content({"type": "output", "text": "20.0", "ok": True})
    bad = content({"type": "output", "text": "KeyError: 'amt'", "ok": False})
    assert ok.startswith("**Output**") and "```text\n20.0\n```" in ok and "✗" not in ok
    assert bad.startswith("**✗ Error in the code**") and "KeyError: 'amt'" in bad
    assert "(no output)" in content({"type": "output", "text": "", "ok": True})


def test_backticks_in_code_cannot_close_the_fence() -> None:
    code = 'print("```")\ns = "````"'
    text = content({"type": "code", "code": code})
    assert text.splitlines()[2] == "`````python" and text.endswith("\n`````")
    assert code in text


def test_plot_becomes_a_file_message_and_other_files_a_note(tmp_path) -> None:
    fig = tmp_path / "fig_1.png"
    fig.write_bytes(b"\x89PNG")
    msg = event_to_message({"type": "plot", "path": str(fig)})
    assert msg == {"role": "assistant", "content": {"path": str(fig), "alt_text": "fig_1.png"}}
    assert "report.csv" in content({"type": "plot", "path": "/w/report.csv"})


def test_a_planted_link_or_missing_file_is_never_served(tmp_path) -> None:
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"host data")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "plot.png").symlink_to(secret)
    (ws / "d").symlink_to(tmp_path)
    for path in (ws / "plot.png", ws / "d" / "secret.png", ws / "gone.png", "relative.png"):
        text = content({"type": "plot", "path": str(path)})
        assert isinstance(text, str) and text.startswith("File written:")  # a note, never a served file


def test_answer_has_the_heading_and_keeps_markdown_tables() -> None:
    table = "| region | mean |\n|---|---|\n| north | 10 |"
    text = content({"type": "answer", "text": f"Means:\n\n{table}\n", "status": "answered"})
    assert text.startswith(FINAL_ANSWER_HEADING + "\n\n")
    assert table in text  # untouched, so Gradio renders it as a table


def test_done_without_answer_says_why() -> None:
    text = content({"type": "done", "status": "max_turns"})
    assert text.startswith(STOPPED_HEADING) and "max_turns" in text and "analyst.max_turns" in text


def test_feedback_is_quoted() -> None:
    assert content({"type": "feedback", "text": "use @name[value]"}).startswith("> ↺ **Format check:** use @name")
    guard = content({"type": "feedback", "text": "load the data", "guard": "no_evidence"})
    assert guard.startswith("> ↺ **Answer check (no_evidence):** load the data")


def test_an_unsupported_answer_says_so_under_it() -> None:
    text = content({"type": "answer", "text": "@total[60]", "status": "unsupported"})
    assert text.startswith(FINAL_ANSWER_HEADING + "\n\n@total[60]") and "Unsupported" in text
    assert "Unsupported" not in content({"type": "answer", "text": "@total[60]", "status": "answered"})


@pytest.mark.parametrize("event", [{"type": "status", "text": "thinking"}, {"type": "intent"}, {}])
def test_status_and_unknown_events_make_no_message(event: dict) -> None:
    assert event_to_message(event) is None


def test_status_words() -> None:
    assert status_word({"type": "status", "text": "thinking"}) == "thinking…"
    assert status_word({"type": "code", "code": "x"}) == "running code…"
    assert status_word({"type": "answer", "text": "x"}) is None


def test_helpers() -> None:
    assert fence("a`b") == "```\na`b\n```"
    assert quote("") == ">"
