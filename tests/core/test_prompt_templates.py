"""Named prompt templates: the id and content hash a trajectory records, and sections filled by name."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from worldsmith.agents import analyst as agent
from worldsmith.prompts import template

PROMPTS = Path(__file__).resolve().parents[2] / "worldsmith" / "prompts"


def test_a_template_carries_its_id_text_and_the_files_sha256() -> None:
    t = template("analyst_system.md")
    data = (PROMPTS / "analyst_system.md").read_bytes()
    assert t.id == "analyst_system.md" and t.text == data.decode()
    assert t.sha256 == "sha256:" + hashlib.sha256(data).hexdigest()


def test_sections_are_filled_by_name_and_missing_ones_are_named() -> None:
    t = template("analyst_feedback.md")
    assert t.section("void", error="no tags") == (
        "I could not read your reply (no tags). Reply with <think>your plan</think> followed by exactly one "
        "<code>python code</code> or <answer>final answer</answer>.")
    with pytest.raises(KeyError, match="no section '## nonsense'.*void"):
        t.section("nonsense")
    with pytest.raises(KeyError, match="placeholder 'error'"):
        t.section("void")


def test_the_analysts_task_turn_is_built_from_its_template() -> None:
    text = agent.user_prompt("  How many rows?  ", "rows.csv: 3 rows", ["n"], hints="count with len()")
    # the file list comes before the question: questions on the same files share the prompt up to the question
    assert text == ("# Files in your working directory\nrows.csv: 3 rows\n\n# Task\nHow many rows?\n\n"
                    "# Method notes\ncount with len()\n\n# Answer format\nYour final <answer> must contain: @n[value]"
                    "\n\nStart with <think>, then write <code> to explore or compute.")
    assert agent.user_prompt("Q?", "", []) == "# Task\nQ?\n\nStart with <think>, then write <code> to explore or compute."


def test_the_analyst_has_no_model_facing_text_inline() -> None:
    source = (PROMPTS.parent / "agents" / "analyst.py").read_text() + (PROMPTS.parent / "graphs" / "analyst.py").read_text()
    for phrase in ("I could not read your reply", "This is your last turn", "The interpreter was restarted",
                   "You ran the same code", "# Answer format", "does not follow the requested format"):
        assert phrase not in source
