"""Grammar-valid and void-turn rates, hand-counted."""

from __future__ import annotations

from worldsmith.core.schemas import Action, ModelCall, Step, Trajectory
from worldsmith.training.metrics import turn_rates


def call(i: int, action: Action | None, repaired: str | None = None) -> ModelCall:
    return ModelCall(index=i, messages=[], action=action, repaired=repaired,
                     void_reason=None if action else "no <code> or <answer>")


def test_rates_count_model_calls_and_fall_back_to_steps() -> None:
    with_calls = Trajectory(id="a", task_id="t", model="m", calls=[
        call(0, Action(kind="code", content="print(1)")),                            # valid
        call(1, Action(kind="answer", content="@x[1]"), repaired="missing </answer>"),  # read, but not strictly
        call(2, None),                                                                 # void
    ])
    steps_only = Trajectory(id="b", task_id="t", model="m", label="oracle", steps=[
        Step(index=0, void=True), Step(index=1, action=Action(kind="answer", content="@x[1]"))])
    rates = turn_rates([with_calls, steps_only])
    assert rates.turns == 5
    assert rates.grammar_valid_rate == 2 / 5
    assert rates.void_rate == 2 / 5


def test_no_turns_gives_zero_rates() -> None:
    rates = turn_rates([Trajectory(id="e", task_id="t", model="m")])
    assert (rates.turns, rates.grammar_valid_rate, rates.void_rate) == (0, 0.0, 0.0)
