"""Model-facing text lives in worldsmith/prompts/ as named templates, loaded by name."""

from __future__ import annotations

import re
from pathlib import Path

from worldsmith.core.schemas import Criterion
from worldsmith.prompts import load_prompt
from worldsmith.training.judge import judge_messages

ROOT = Path(__file__).resolve().parents[2]


def test_every_template_named_in_the_code_exists() -> None:
    named = {m for p in (ROOT / "worldsmith").rglob("*.py")
             for m in re.findall(r"load_(?:prompt|sections)\(\s*[\"']([^\"']+)[\"']", p.read_text(encoding="utf-8"))}
    assert {"router.md", "router_request.md", "judge_system.md", "judge_task.md", "judge_request.md"} <= named
    missing = sorted(n for n in named if not (ROOT / "worldsmith" / "prompts" / n).is_file())
    assert missing == []


def test_the_judge_conversation_is_assembled_from_its_templates() -> None:
    crit = Criterion.model_validate({"id": "c1", "polarity": "+", "section": "insight", "observable": "the mean",
                                     "satisfy": "states the mean {x}"})
    system, user = judge_messages([crit], "The mean is 20.", "Find the mean.")
    assert system == {"role": "system", "content": load_prompt("judge_system.md").strip()}
    assert system["content"].startswith("You grade a data-analysis deliverable against a rubric.")
    text = user["content"]
    assert text.startswith("## Task given to the analyst\nFind the mean.\n\n## Deliverable\nThe mean is 20.\n\n"
                           "## Criteria (one JSON object per line)\n{\"id\": \"c1\"")
    assert '"satisfy": "states the mean {x}"' in text  # braces in values are not template fields
    assert text.endswith('Answer with JSON: {"verdicts": [{"id": ..., "met": true|false, "evidence": ...}, ...]}')
    _, no_task = judge_messages([crit], "", "")
    assert no_task["content"].startswith("## Deliverable\n(empty)\n\n")
