"""RL rewards in TRL's `reward_func(prompts, completions, **kwargs) -> list[float]` shape.

TRL passes every dataset column other than the prompt as a keyword argument holding one value per row, so a
dataset with an `answers` column (a list of {name, value, tolerance?, unit?} per row) and optionally a `rule`
column ("official" or "tolerant") works as is:

    GRPOTrainer(..., reward_funcs=[closed_form_reward], train_dataset=ds)

The reward is the fraction of sub-answers right under the same comparators as eval and the shipped verifiers
(core/grading.py). The trainer issue adds DataMind's length factor on top; this function stays the plain
correctness term.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from worldsmith.core.grading import grade


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
