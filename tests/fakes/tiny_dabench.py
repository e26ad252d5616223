"""A small DABench-format task folder whose answers are known by construction, and a fake-server responder that
plays an analyst solving it (one code turn that really runs in the sandbox, then the answer).

    root = write_tiny_dabench(tmp_path / "bench", n=10)     # questions.jsonl, labels.jsonl, tables/values.csv
    fake.responder = analyst_responder()                     # FakeOpenAI answers like a competent analyst

Question i asks for `v` in the row where `k == i`; the table has v = 3k + 1, so the label of question i is 3i + 1.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

TABLE = "values.csv"
_ASKED = re.compile(r"where k == (\d+)")


def answer_of(i: int) -> int:
    return 3 * i + 1


def write_tiny_dabench(root: Path, n: int = 10) -> Path:
    tables = root / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    (tables / TABLE).write_text("k,v\n" + "".join(f"{k},{answer_of(k)}\n" for k in range(max(n, 1))))
    questions = [{"id": i, "question": f"What is the value of v in the row where k == {i}?",
                  "constraints": f"Read {TABLE} with pandas and select the row.", "format": "@v[value] where value is an integer.",
                  "file_name": TABLE, "level": "easy", "concepts": ["Summary Statistics"]} for i in range(n)]
    labels = [{"id": i, "common_answers": [["v", str(answer_of(i))]]} for i in range(n)]
    (root / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    (root / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    return root


def analyst_responder() -> Callable[[dict[str, Any]], str]:
    """A turn for the conversation in a chat request body: code first, the answer once the interpreter replied."""

    def respond(body: dict[str, Any]) -> str:
        messages = body.get("messages", [])
        asked = [int(m.group(1)) for msg in messages if msg.get("role") == "user"
                 for m in [_ASKED.search(str(msg.get("content", "")))] if m]
        if not asked:
            return "<think>I cannot find a question.</think><answer>no question</answer>"
        i = asked[-1]
        last = str(messages[-1].get("content", "")) if messages else ""
        if last.startswith("<interpreter>"):
            return f"<think>The interpreter printed it.</think><answer>@v[{answer_of(i)}]</answer>"
        return (f"<think>Select the row.</think><code>df = pd.read_csv('{TABLE}')\n"
                f"print(int(df.loc[df['k'] == {i}, 'v'].iloc[0]))</code>")

    return respond
