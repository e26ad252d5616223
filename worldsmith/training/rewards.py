"""RL rewards in TRL's `reward_func(prompts, completions, **kwargs) -> list[float]` shape.

TRL passes every dataset column other than the prompt as a keyword argument holding one value per row, so a
dataset with an `answers` column (a list of {name, value, tolerance?, unit?} per row) and optionally a `rule`
column ("official" or "tolerant") works as is:

    GRPOTrainer(..., reward_funcs=[closed_form_reward], train_dataset=ds)

`closed_form_reward` is the fraction of sub-answers right under the same comparators as eval and the shipped
verifiers (core/grading.py). `datamind_reward` is DataMind's composition over it (`compose`):

    correct (every sub-answer right)  → length_factor(completion tokens): 1 up to 256, linear to 0.5 at 1,024, then 0.5
    wrong but well-formed             → 0
    malformed                         → -0.1

Well-formed (`well_formed`): every assistant turn parses under the action grammar's strict parser, the last one is an
`<answer>`, and that answer carries a tag for every requested name. Completion length is the number of model tokens:
`completion_ids` (TRL passes it to every reward function) or an `answer_tokens` column.

`rubric_reward` scores report tasks by the normalised net points of their rubric (`Rubric.score`) over the
deterministic items; `make_rubric_reward(llm)` also sends the other items to the LLM judge, caching verdicts per
(rubric, completion). The table of hand-computed cases is tests/training/rewards_golden.jsonl.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from worldsmith.core.grading import extract_answers, grade
from worldsmith.core.schemas import Rubric
from worldsmith.core.store import sha256_json
from worldsmith.tools.grammar import INTERP_CLOSE, INTERP_OPEN, GrammarError, parse_turn

#: DataMind's constants: full credit up to SHORT tokens, falling linearly to FLOOR at LONG, FLOOR beyond.
SHORT_TOKENS, LONG_TOKENS, LENGTH_FLOOR = 256, 1024, 0.5
#: The reward of a completion the grammar cannot read (negative, so format errors cost more than wrong answers).
MALFORMED_REWARD = -0.1


def completion_text(completion: Any) -> str:
    """The text of a completion: TRL gives a string (standard format) or a list of messages (conversational)."""
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    if isinstance(completion, Sequence):
        # conversational: the assistant's turns are the completion; join them in order
        return "\n".join(str(m.get("content") or "") for m in completion
                         if isinstance(m, dict) and m.get("role", "assistant") == "assistant")
    raise TypeError(f"completion of type {type(completion).__name__}: expected a string or a list of messages")


def closed_form_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """Fraction of `@name[value]` sub-answers right, per completion (0.0 for an empty one).

    kwargs: `answers` (required) — per row, a list of {name, value, tolerance?: {abs, rel}, unit?};
    `rule` (optional) — per row or one string for all: "tolerant" (default) or "official"."""
    answers = kwargs.get("answers")
    if answers is None:
        raise ValueError("closed_form_reward needs an 'answers' column: per row, a list of {name, value, tolerance}")
    if len(answers) != len(completions):
        raise ValueError(f"closed_form_reward: {len(completions)} completions but {len(answers)} rows of answers")
    rules = kwargs.get("rule") or "tolerant"
    rules = [rules] * len(completions) if isinstance(rules, str) else list(rules)
    if len(rules) != len(completions):
        raise ValueError(f"closed_form_reward: {len(completions)} completions but {len(rules)} rules")
    return [float(grade(list(spec or []), completion_text(c), rule=r or "tolerant")["score"])
            for c, spec, r in zip(completions, answers, rules)]


# --------------------------------------------------------------------------------------------- DataMind composition


def length_factor(n_tokens: int) -> float:
    """1.0 at ≤ 256 tokens, linear down to 0.5 at 1,024, 0.5 beyond."""
    if n_tokens < 0:
        raise ValueError(f"length_factor: negative token count {n_tokens}")
    if n_tokens <= SHORT_TOKENS:
        return 1.0
    if n_tokens >= LONG_TOKENS:
        return LENGTH_FLOOR
    return 1.0 - (1.0 - LENGTH_FLOOR) * (n_tokens - SHORT_TOKENS) / (LONG_TOKENS - SHORT_TOKENS)


def compose(*, correct: bool, well_formed: bool, n_tokens: int) -> float:
    """DataMind's reward from its three facts (a correct answer is read from well-formed tags, so correct wins)."""
    if correct:
        return length_factor(n_tokens)
    return 0.0 if well_formed else MALFORMED_REWARD


def assistant_turns(completion: Any) -> list[str]:
    """The model's turns of a completion: the assistant messages of a conversational one; a string is split at
    interpreter blocks (a multi-turn rollout flattened to text), whose contents are not the model's."""
    if isinstance(completion, str):
        turns, rest = [], completion
        while INTERP_OPEN in rest:
            head, _, tail = rest.partition(INTERP_OPEN)
            turns.append(head)
            rest = tail.partition(INTERP_CLOSE)[2] if INTERP_CLOSE in tail else ""
        turns.append(rest)
        return [t for t in turns if t.strip()]
    if isinstance(completion, dict):
        return [str(completion.get("content") or "")]
    if isinstance(completion, Sequence):
        return [str(m.get("content") or "") for m in completion
                if isinstance(m, dict) and m.get("role", "assistant") == "assistant"]
    raise TypeError(f"completion of type {type(completion).__name__}: expected a string or a list of messages")


def well_formed(completion: Any, answer_names: Sequence[str] = ()) -> bool:
    """Every assistant turn parses strictly, the last is an answer, and it tags each of `answer_names`."""
    turns = assistant_turns(completion)
    if not turns:
        return False
    try:
        parsed = [parse_turn(t) for t in turns]
    except GrammarError:
        return False
    last = parsed[-1].action
    if last is None or last.kind != "answer":
        return False
    tagged = extract_answers(last.content)
    return all(name in tagged for name in answer_names)


def _per_row(value: Any, n: int, what: str) -> list[Any]:
    rows = [value] * n if value is None or isinstance(value, (str, int)) else list(value)
    if len(rows) != n:
        raise ValueError(f"datamind_reward: {n} completions but {len(rows)} {what}")
    return rows


def _token_counts(n: int, kwargs: dict[str, Any]) -> list[int]:
    if kwargs.get("answer_tokens") is not None:
        return [int(x) for x in _per_row(kwargs["answer_tokens"], n, "answer_tokens")]
    if kwargs.get("completion_ids") is not None:
        return [len(ids) for ids in _per_row(kwargs["completion_ids"], n, "completion_ids")]
    raise ValueError("datamind_reward needs completion lengths: TRL's completion_ids, or an answer_tokens column")


def datamind_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """DataMind's composed reward per completion (see the module doc). kwargs: `answers` and optional `rule`
    (as closed_form_reward), and `completion_ids` (TRL gives it) or `answer_tokens` (per row)."""
    answers = kwargs.get("answers")
    if answers is None:
        raise ValueError("datamind_reward needs an 'answers' column: per row, a list of {name, value, tolerance}")
    n = len(completions)
    answers = _per_row(answers, n, "rows of answers")
    rules = _per_row(kwargs.get("rule") or "tolerant", n, "rules")
    counts = _token_counts(n, kwargs)
    out = []
    for c, spec, rule, n_tok in zip(completions, answers, rules, counts):
        spec = list(spec or [])
        turns = assistant_turns(c)  # the answer is the last turn; tags echoed earlier (or by data) do not count
        correct = bool(grade(spec, turns[-1] if turns else "", rule=rule or "tolerant")["passed"])
        out.append(compose(correct=correct, well_formed=well_formed(c, [str(s["name"]) for s in spec]),
                           n_tokens=n_tok))
    return out


# --------------------------------------------------------------------------------------------- rubric


def _rubric(value: Any) -> Rubric:
    if isinstance(value, Rubric):
        return value
    if isinstance(value, str):
        return Rubric.model_validate_json(value)
    return Rubric.model_validate(value)


def make_rubric_reward(llm: Any = None) -> Any:
    """A TRL reward function for report tasks: per row a `rubric` (Rubric, dict or JSON). Score = normalised net
    points (Rubric.score) of the items graded: numeric items from the text; with `llm` (a StructuredLLM), the rest
    by the judge, each (rubric, completion) judged once per reward function. Without a judge, items that need one
    are left out of the normalisation (as graders.grade_rubric does)."""
    from worldsmith.training.graders import (
        grade_rubric,  # graders pull in the judge: only when asked
    )

    cache: dict[str, float] = {}

    def rubric_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        rubrics = kwargs.get("rubric")
        if rubrics is None:
            raise ValueError("rubric_reward needs a 'rubric' column: per row, the task's Rubric")
        if len(rubrics) != len(completions):
            raise ValueError(f"rubric_reward: {len(completions)} completions but {len(rubrics)} rubrics")
        out = []
        for c, r in zip(completions, rubrics):
            rubric, text = _rubric(r), completion_text(c)
            key = sha256_json([rubric.model_dump(mode="json"), text])
            if key not in cache:
                cache[key] = float(grade_rubric(rubric, text, llm=llm).score)
            out.append(cache[key])
        return out

    return rubric_reward


#: The deterministic rubric reward (no judge).
rubric_reward = make_rubric_reward()
