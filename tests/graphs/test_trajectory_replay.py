"""Trajectory replay: a run against a real HTTP endpoint (the fake OpenAI server) is recorded byte-exact.

The server keeps every request body it received; the trajectory's `ModelCall.messages` must be exactly those
messages, in order, so a training record is what the model saw and not a re-rendering of it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from tests.fakes.fake_openai import Action, fake_openai  # noqa: F401  (fixture)
from worldsmith.core.config import load_settings
from worldsmith.core.schemas import Trajectory
from worldsmith.graphs.analyst import build_analyst_graph, initial_state
from worldsmith.graphs.runtime import GraphRuntime
from worldsmith.llm import LLM

PROMPTS = Path(__file__).resolve().parents[2] / "worldsmith" / "prompts"
QUESTION = "What is the mean amount? Answer as @mean_amount[value] rounded to one decimal place."
# The model's four replies. The fake server cuts each at the first stop sequence, as a real one does.
CODE = "<think>\nLoad the data.\n</think>\n<code>\ndf = pd.read_csv('sales.csv')\nprint(df['amount'].mean())\n</code>"
VOID = "The mean is probably 20, I think."
UNTAGGED = "<think>\nDone.\n</think>\n<answer>\nThe mean amount is 20.\n</answer>"
UNROUNDED = "<think>\nFormat it.\n</think>\n<answer>\n@mean_amount[20.04]\n</answer>"


async def _record(fake, tmp_path: Path, sales_csv: Path) -> Trajectory:
    endpoint = fake.endpoint().model_dump(mode="json", exclude_none=True)
    settings = load_settings(overrides={"home": str(tmp_path / "home"), "runs_dir": str(tmp_path / "runs"),
                                        "llm": {"default": endpoint, "cache": False},
                                        "analyst": {"max_turns": 4, "format_retries": 2}})
    rt = GraphRuntime.from_settings(settings, llm=LLM.from_settings(settings))
    fake.enqueue(*(Action.reply(t) for t in (CODE, VOID, UNTAGGED, UNROUNDED)))
    state = initial_state(QUESTION, [str(sales_csv)], task_id="t1", session_id="replay", postprocess=False)
    try:
        out = await build_analyst_graph().ainvoke(state, {"recursion_limit": 100}, context=rt)
    finally:
        await rt.sessions.close_all()
    return Trajectory.model_validate(out["trajectory"])


async def test_recorded_calls_are_byte_identical_to_what_the_server_received(fake_openai, tmp_path: Path,  # noqa: F811
                                                                             sales_csv: Path) -> None:
    traj = await _record(fake_openai, tmp_path, sales_csv)
    received = [body["messages"] for body in fake_openai.requests]
    assert len(received) == len(traj.calls) == 4
    for call, sent in zip(traj.calls, received):
        assert [{"role": m.role, "content": m.content} for m in call.messages] == \
            [{"role": m["role"], "content": m["content"]} for m in sent]
    # each call's conversation is the previous one plus its reply: the record is one growing conversation
    for before, after in zip(traj.calls, traj.calls[1:]):
        assert [m.content for m in after.messages[:len(before.messages) + 1]] == \
            [m.content for m in before.messages] + [before.reply]
    assert [m.content for m in traj.messages()[:-1]] == [m["content"] for m in received[-1]]


async def test_each_call_records_what_was_asked_and_what_came_back(fake_openai, tmp_path: Path,  # noqa: F811
                                                                   sales_csv: Path) -> None:
    traj = await _record(fake_openai, tmp_path, sales_csv)
    first, void, untagged, last = traj.calls
    assert first.completion == CODE[:CODE.index("</code>")]  # the raw text: the stop sequence consumed the tag
    assert first.reply.endswith("</code>") and first.action is not None and first.action.kind == "code"
    assert void.action is None and void.void_reason and void.reply == VOID
    assert untagged.action is not None and untagged.action.kind == "answer"
    assert first.repaired is None and untagged.repaired is None  # well-formed turns needed no salvage
    for call, body in zip(traj.calls, fake_openai.requests):
        assert call.sampling["max_tokens"] == body["max_tokens"]
        assert call.sampling["stop"] == body["stop"] == ["</code>", "</answer>", "<interpreter>"]
        assert call.finish_reason == "stop" and call.cached is False and call.model == "fake-model"
        assert call.prompt_tokens > 0 and call.completion_tokens > 0
    assert [s.call for s in traj.steps] == [0, 1, 2, 3]
    # what the harness said between turns, in the order the model saw it
    feedback = [m.content for m in last.messages if m.source in ("feedback", "nudge")]
    assert feedback[0].startswith("I could not read your reply")
    assert feedback[1].startswith("Your answer does not follow the requested format: @mean_amount[value] is missing")
    assert feedback[2].startswith("This is your last turn.")


async def test_template_hashes_are_the_prompt_files_sha256(fake_openai, tmp_path: Path, sales_csv: Path) -> None:  # noqa: F811
    traj = await _record(fake_openai, tmp_path, sales_csv)

    def sha(name: str) -> str:
        return "sha256:" + hashlib.sha256((PROMPTS / name).read_bytes()).hexdigest()

    assert traj.calls[0].templates == {n: sha(n) for n in ("analyst_system.md", "analyst_example.json",
                                                           "analyst_user.md")}
    assert traj.calls[-1].templates == {n: sha(n) for n in ("analyst_system.md", "analyst_example.json",
                                                            "analyst_user.md", "analyst_feedback.md")}


async def test_only_the_models_own_valid_turns_are_trainable(fake_openai, tmp_path: Path, sales_csv: Path) -> None:  # noqa: F811
    traj = await _record(fake_openai, tmp_path, sales_csv)
    conversation = traj.messages()
    # system, worked example (user, assistant, interpreter-as-user, assistant), task, then this run's turns
    assert [m.role for m in conversation] == ["system", "user", "assistant", "user", "assistant", "user",
                                              "assistant", "user", "assistant", "user", "assistant", "user", "user",
                                              "assistant"]
    assert [i for i, m in enumerate(conversation) if m.trainable] == [6, 10, 13]  # code, untagged answer, final
    assert conversation[8].source == "model_void" and not conversation[8].trainable  # unreadable: never trained on
    assert conversation[2].source == "example" and not conversation[2].trainable  # the worked example is a prompt
    assert conversation[7].content.startswith("<interpreter>") and "20.0" in conversation[7].content


async def test_post_processing_is_recorded_off_and_the_raw_answer_graded(fake_openai, tmp_path: Path,  # noqa: F811
                                                                         sales_csv: Path) -> None:
    traj = await _record(fake_openai, tmp_path, sales_csv)
    assert traj.final_answer == "@mean_amount[20.04]"  # more decimals than asked, and the retries are used up
    assert traj.postprocess == [] and traj.answer_to_grade == "@mean_amount[20.04]"
