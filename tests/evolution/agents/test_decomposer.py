"""Decomposer: a compound objective → distinct, self-contained parts; repeats are sent back."""

from __future__ import annotations

from worldsmith.agents.decomposer import decompose

OBJECTIVE = "Which region sells most and how did its share change?"


async def test_parts_are_distinct_and_not_the_objective_again(scripted_llm) -> None:
    script, llm = scripted_llm
    script.queue({"parts": [OBJECTIVE, "Which region sells most?"]},
                 {"parts": ["Which region has the largest total amount?", "How did the top region's share change?"]})
    out = await decompose(llm, OBJECTIVE, ["sales.csv"])
    assert out.value.parts == ["Which region has the largest total amount?", "How did the top region's share change?"]
    assert out.errors == [f"part {OBJECTIVE!r} repeats the objective or another part"]
    assert "sales.csv" in script.requests[0].text and OBJECTIVE in script.requests[0].text


async def test_too_many_parts_or_none_usable_leaves_no_value(scripted_llm) -> None:
    script, llm = scripted_llm
    script.queue({"parts": ["a b c", "d e f", "g h i", "j k l"]}, {"parts": ["x", "y"]})
    out = await decompose(llm, OBJECTIVE, ["sales.csv"], max_parts=3, retries=1)
    assert out.value is None
    assert out.errors[0] == "4 parts; at most 3 are allowed"
    assert "part 'x' is not a question an analyst can work on alone" in out.errors
