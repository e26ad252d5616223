"""The router agent: a natural-language request → a typed Intent.

The model classifies (schema-constrained); deterministic extraction keeps it honest: file paths must exist or
at least appear verbatim in the request, numbers must appear in the text. When the model fails, the
heuristics alone decide, and the intent records that.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from worldsmith.prompts import load_prompt

Action = Literal["answer_question", "make_world", "make_tasks", "evaluate", "train", "help", "unknown"]
DOMAIN_WORDS = {
    "churn": "customer_pricing", "pricing": "customer_pricing", "customer": "customer_pricing", "sales": "commercial_growth",
    "marketing": "commercial_growth", "finance": "finance", "supply": "operations_supply_chain",
    "inventory": "operations_supply_chain", "hr": "people", "employee": "people", "fraud": "risk_fraud",
    "clinical": "clinical", "patient": "clinical", "epidemic": "epidemiology", "gene": "bioinformatics",
    "experiment": "experimental_science", "climate": "environment_geospatial", "energy": "energy_iot",
    "policy": "public_policy", "school": "education", "student": "education", "survey": "social_science_survey",
    "traffic": "transportation", "transport": "transportation", "booking": "transportation",
}
_PATH_RE = re.compile(r"(?:\.{0,2}/)?[\w\-./~]+\.(?:csv|tsv|xlsx|xls|json|jsonl|parquet|sqlite|db|gz|txt|md)\b|(?:\.{1,2}|~)?/[\w\-./~]+")
_COUNT_RE = re.compile(r"\b(\d{1,5})\b")


class Intent(BaseModel):
    action: Action = Field(description="what the person wants")
    question: str | None = Field(None, description="for answer_question: the request verbatim (the analyst gets the "
                                                   "user's own words, format sentence included)")
    reading: str | None = Field(None, description="for answer_question: the router model's reading of the question, "
                                                  "kept beside the request (never replaces it)")
    files: list[str] = Field(default_factory=list, description="file or folder paths named in the request")
    count: int | None = Field(None, description="how many tasks/worlds, if a number is given")
    difficulty: Literal["easy", "medium", "hard"] | None = None
    topic: str | None = Field(None, description="subject of the tasks, e.g. churn")
    domain: str | None = Field(None, description="world domain if named or implied")
    since: str | None = Field(None, description="time reference such as 'last night'")
    source: Literal["llm", "heuristic", "llm+heuristic"] = "heuristic"


class _LLMIntent(BaseModel):
    action: Action
    question: str | None = None
    files: list[str] = Field(default_factory=list)
    count: int | None = None
    difficulty: Literal["easy", "medium", "hard"] | None = None
    topic: str | None = None


def heuristic_intent(request: str, extra_files: list[str] | None = None) -> Intent:
    text = request.strip()
    low = text.lower()
    attached = list(extra_files or [])
    names = {Path(f).name for f in attached}
    # a bare file name in the text that names an attachment refers to it, not to ./name
    mentioned = [p for p in dict.fromkeys(_PATH_RE.findall(text)) if p not in ("/", ".", "..")
                 and not (Path(p).name in names and not Path(p).expanduser().exists())]
    files = mentioned + [f for f in attached if f not in mentioned]
    count_match = _COUNT_RE.search(low)
    difficulty = next((d for d in ("easy", "medium", "hard") if re.search(rf"\b{d}\b", low)), None)
    topic_m = re.search(r"\babout ([\w\- ]+?)(?: from| in| using| on|$|[,.?])", low)
    topic = topic_m.group(1).strip() if topic_m else None
    domain = next((dom for word, dom in DOMAIN_WORDS.items() if word in low), None)
    if re.search(r"\b(train|fine-?tune|sft|rl)\b", low):
        action: Action = "train"
    elif re.search(r"\b(eval|evaluate|benchmark|score)\b", low):
        action = "evaluate"
    elif re.search(r"\bworlds?\b", low) and re.search(r"\b(make|create|generate|build|new)\b", low):
        action = "make_world"
    elif re.search(r"\btasks?\b|\bquestions\b", low) and re.search(r"\b(make|create|generate|build|synthesi[sz]e)\b", low):
        action = "make_tasks"
    elif re.search(r"\b(help|what can you do)\b", low):
        action = "help"
    elif text.endswith("?") or re.match(r"^(what|which|how|why|who|when|where|is|are|does|do|can|compute|calculate|find|show)\b", low) or files:
        action = "answer_question"
    else:
        action = "unknown"
    since = "last night" if "last night" in low else ("today" if "today" in low else None)
    return Intent(action=action, question=text if action == "answer_question" else None, files=files,
                  count=int(count_match.group(1)) if count_match and action in ("make_tasks", "make_world") else None,
                  difficulty=difficulty, topic=topic, domain=domain, since=since)


def _says_number(request: str, n: int, paths: list[str]) -> bool:
    """Whether the request itself states the number n (as a word of its own, not inside a file path)."""
    for p in sorted(paths, key=len, reverse=True):
        request = request.replace(p, " ")
    return re.search(rf"(?<![\w./-]){n}(?![\w./-])", request) is not None


async def classify(llm: Any | None, request: str, files: list[str] | None = None, role: str = "router") -> Intent:
    """LLM classification checked against the heuristics; heuristics alone when no model or it fails."""
    base = heuristic_intent(request, files)
    if llm is None:
        return base
    from worldsmith.llm.errors import LLMError

    messages = [{"role": "system", "content": load_prompt("router.md")},
                {"role": "user", "content": load_prompt("router_request.md").strip().format(request=request,
                                                                                          files=files or [])}]
    try:
        got = await llm.astructured(messages, _LLMIntent, role=role)
    except LLMError:
        return base
    llm_intent: _LLMIntent = getattr(got, "value", got)
    names = {Path(f).name for f in files or []}
    grounded_files = [f for f in llm_intent.files if Path(f).expanduser().exists()
                      or (f in request and Path(f).name not in names)]
    action = llm_intent.action
    # a weak model's "unknown"/"help" does not override a clear keyword match
    if action in ("unknown", "help") and base.action not in ("unknown", "help"):
        action = base.action
    count = base.count
    if action in ("make_tasks", "make_world") and llm_intent.count is not None \
            and _says_number(request, llm_intent.count, base.files):
        count = llm_intent.count
    asks = action == "answer_question"
    return Intent(action=action, question=request.strip() if asks else None,
                  reading=llm_intent.question if asks else None,
                  files=list(dict.fromkeys(base.files + grounded_files)), count=count,
                  difficulty=llm_intent.difficulty or base.difficulty, topic=llm_intent.topic or base.topic,
                  domain=base.domain, since=base.since, source="llm+heuristic")
